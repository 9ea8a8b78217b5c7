import { z } from 'zod';
import { selfView, type SelfViewDeps } from '../identities/present.js';
import { toolDefiner, type ToolDefinition } from '../platform/mcp-tool.js';
import type { DidService } from './did-service.js';
import { signBody, verifyBody } from './routes.js';

const owner = (principal: { orgId: string; identityId: string }) => ({ orgId: principal.orgId, identityId: principal.identityId });

/** The DID key's calls, and what identity_whoami shows. */
export interface DidToolDeps extends SelfViewDeps {
  did: DidService;
}

const defineTool = toolDefiner<DidToolDeps>();

/** MCP tools of the did:web identity: the same service calls as /v0/identity/*. */
export const didTools: ToolDefinition<DidToolDeps>[] = [
  defineTool({
    name: 'identity_sign',
    title: 'Sign data with this identity\'s DID key',
    description: 'Signs base64 data with this identity\'s Ed25519 key. Returns the base64 signature, the did:web DID and the verification method, which anyone can check against the published DID document.',
    scope: 'identity:sign',
    input: signBody,
    run: ({ did }, principal, input) => did.sign(owner(principal), input.data),
  }),
  defineTool({
    name: 'identity_verify',
    title: 'Verify a did:web signature',
    description: 'Checks a base64 Ed25519 signature over base64 data against the DID document of any did:web DID (resolved over https). Answers {valid}.',
    scope: 'identity:verify',
    input: verifyBody,
    run: ({ did }, principal, input) => did.verify(owner(principal), input),
  }),
  defineTool({
    name: 'identity_whoami',
    title: 'Who am I',
    description: 'This identity: id, name, inbox address, scopes, did:web DID and where its DID document is published.',
    scope: 'identity:read',
    input: z.object({}),
    run: (deps, principal) => selfView(deps, principal.identityId),
  }),
];
