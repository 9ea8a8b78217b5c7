import { z } from 'zod';
import { toolDefiner, type ToolDefinition } from '../platform/mcp-tool.js';
import { presentCredential, type VaultService } from './vault-service.js';
import { credentialName, putCredentialBody } from './schemas.js';

const owner = (principal: { orgId: string; identityId: string }) => ({ orgId: principal.orgId, identityId: principal.identityId });
const named = z.object({ name: credentialName });

export interface VaultToolDeps {
  vault: VaultService;
}

const defineTool = toolDefiner<VaultToolDeps>();

/** MCP tools of the vault: the same service calls as /v0/vault. A TOTP seed is never part of any result. */
export const vaultTools: ToolDefinition<VaultToolDeps>[] = [
  defineTool({
    name: 'vault_list',
    title: 'List vault credentials',
    description: 'Lists every credential in this identity\'s vault: name, type, metadata and dates, never the secret data.',
    scope: 'vault:read',
    input: z.object({}),
    run: async ({ vault }, principal) => {
      const credentials = (await vault.list(owner(principal))).map(presentCredential);
      return { credentials, count: credentials.length };
    },
  }),
  defineTool({
    name: 'vault_get',
    title: 'Read a vault credential',
    description: 'Returns one credential with its decrypted data (a TOTP credential shows its settings and remaining backup codes, not its seed). Expired credentials are refused.',
    scope: 'vault:read',
    input: named,
    run: ({ vault }, principal, input) => vault.get(owner(principal), input.name),
  }),
  defineTool({
    name: 'vault_store',
    title: 'Store a vault credential',
    description:
      'Creates or replaces a credential. type is one of LOGIN, API_KEY, OAUTH, TOTP, SSH_KEY, DATABASE, SMTP, AWS, CERTIFICATE, CARD, ' +
      'SHIPPING_ADDRESS, CUSTOM; data is checked per type (e.g. CARD needs number, expiry MM/YY and cvc; TOTP needs secret (base32) or uri (otpauth://)). ' +
      'Omit data to change only metadata or expiresAt.',
    scope: 'vault:write',
    input: putCredentialBody.extend({ name: credentialName }),
    run: async ({ vault }, principal, input) => {
      const { name, ...body } = input;
      const { credential, created } = await vault.put(owner(principal), name, body);
      return { ...presentCredential(credential), created };
    },
  }),
  defineTool({
    name: 'vault_delete',
    title: 'Delete a vault credential',
    description: 'Deletes a credential and its data for good.',
    scope: 'vault:write',
    input: named,
    run: async ({ vault }, principal, input) => {
      await vault.delete(owner(principal), input.name);
      return { name: input.name, deleted: true };
    },
  }),
  defineTool({
    name: 'vault_totp',
    title: 'Current TOTP code',
    description: 'The current one-time code of a TOTP credential and the seconds it stays valid. The seed itself is never returned.',
    scope: 'vault:read',
    input: named,
    run: ({ vault }, principal, input) => vault.totp(owner(principal), input.name),
  }),
];
