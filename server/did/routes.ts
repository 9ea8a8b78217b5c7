import Router from '@koa/router';
import { z } from 'zod';
import type { Context } from 'koa';
import { authenticatedRouter, identityIdOf, principalOf, requireScope, type AuthDeps } from '../platform/auth/authenticate.js';
import { parseInput } from '../platform/validate.js';
import type { DidOwner, DidService } from './did-service.js';

/**
 * Standard base64 of at most `maxChars` characters, decoded. The data to sign or verify is held to 1 MB
 * of base64 (750 KB of bytes), so its JSON body fits the default 1 MiB body limit: data within the
 * schema is never refused with a 413 instead.
 */
const base64 = (maxChars: number) => z.string().max(maxChars).regex(/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/, 'must be standard base64')
  .transform((v) => Uint8Array.from(Buffer.from(v, 'base64')));
const data = base64(1_000_000);
/** An Ed25519 signature is 64 bytes (88 characters); some room for other encodings of it. */
const signature = base64(1_024);
export const signBody = z.object({ data }).strict();
export const verifyBody = z.object({ data, signature, did: z.string().min(8).max(2048).startsWith('did:web:', 'must be a did:web DID') }).strict();
export const identityParams = z.object({ identityId: z.string().regex(/^id-[0-9a-f]{16}$/, 'must be an identity id') });

const ownerOf = (ctx: Context): DidOwner => ({ orgId: principalOf(ctx).orgId, identityId: identityIdOf(ctx) });

const publishDocument = (ctx: Context, doc: unknown) => {
  // Public documents that any resolver, including a browser, may fetch and cache briefly.
  ctx.set('Access-Control-Allow-Origin', '*');
  ctx.set('Cache-Control', 'public, max-age=60');
  ctx.body = doc;
};

/**
 * did:web documents, unauthenticated and unversioned because the did:web method fixes their paths.
 * A revoked identity's document answers 404: its DID no longer resolves, so its signatures stop verifying.
 */
export function didDocumentRoutes({ did }: { did: DidService }): Router {
  const router = new Router();
  router.get('/.well-known/did.json', (ctx) => publishDocument(ctx, did.serviceDocument()));
  router.get('/.well-known/jwks.json', (ctx) => publishDocument(ctx, did.serviceJwks()));
  router.get('/identities/:identityId/did.json', async (ctx) => {
    const parsed = identityParams.safeParse(ctx.params);
    if (!parsed.success) { ctx.status = 404; ctx.body = { error: 'not_found', message: 'DID not found', status: 404 }; return; }
    publishDocument(ctx, await did.identityDocument(parsed.data.identityId));
  });
  return router;
}

export interface IdentitySigningRouteDeps extends AuthDeps {
  did: DidService;
}

/** Signing as the calling identity and verifying anyone's did:web signature. */
export function identitySigningRoutes({ keys, identities, did }: IdentitySigningRouteDeps): Router {
  const router = authenticatedRouter({ keys, identities }, { prefix: '/v0/identity' });
  router.post('/sign', requireScope('identity:sign'), async (ctx) => {
    const body = parseInput(signBody, ctx.request.body, 'body');
    ctx.body = await did.sign(ownerOf(ctx), body.data);
  });
  router.post('/verify', requireScope('identity:verify'), async (ctx) => {
    const body = parseInput(verifyBody, ctx.request.body, 'body');
    ctx.body = await did.verify(ownerOf(ctx), body);
  });
  return router;
}
