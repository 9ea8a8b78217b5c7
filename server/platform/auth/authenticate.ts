import Router from '@koa/router';
import type { Context, Next } from 'koa';
import { AppError, forbidden, unauthorized } from '../errors.js';
import type { KeyTier } from '../keys.js';
import type { Scope } from './scopes.js';
import type { ApiKeyService } from './api-keys.js';

/** Who is calling, resolved once per request from the bearer key. */
export interface Principal {
  tier: KeyTier;
  keyId: string;
  orgId: string;
  userId?: string;
  identityId?: string;
  scopes: ReadonlySet<string>;
}

declare module 'koa' {
  interface DefaultState {
    principal?: Principal;
  }
}

export interface IdentityScopeSource {
  /** Scopes of a live (not revoked) identity, or null when it is gone. */
  liveScopes(identityId: string): Promise<string[] | null>;
  recordUse(identityId: string): void;
}

export function bearerToken(ctx: Context): string | undefined {
  const header = ctx.get('authorization');
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

/** Resolves the bearer key for every route behind it; 401 for a missing, unknown or revoked key. */
export function authenticate(keys: ApiKeyService, identities: IdentityScopeSource) {
  return async (ctx: Context, next: Next) => {
    const token = bearerToken(ctx);
    if (!token) throw unauthorized();
    // The request limits (platform/limits) resolved this token already, moments ago.
    const resolved = ctx.state.resolvedKey as { token: string; key: Awaited<ReturnType<ApiKeyService['resolve']>> } | undefined;
    const key = resolved?.token === token ? resolved.key : await keys.resolve(token);
    if (!key) throw unauthorized('API key is invalid or revoked');
    let scopes: string[] = [];
    if (key.tier === 'identity') {
      const live = key.identityId ? await identities.liveScopes(key.identityId) : null;
      if (!live) throw unauthorized('API key is invalid or revoked');
      scopes = live;
      identities.recordUse(key.identityId!);
    }
    keys.touch(key._id);
    ctx.state.principal = {
      tier: key.tier, keyId: key._id, orgId: key.orgId, userId: key.userId, identityId: key.identityId,
      scopes: new Set(scopes),
    };
    return next();
  };
}

export function principalOf(ctx: Context): Principal {
  const principal = ctx.state.principal;
  if (!principal) throw unauthorized();
  return principal;
}

/** An identity-key route: the key must hold `scope`. Other tiers are told which key to use. */
export function requireScope(scope: Scope) {
  return async (ctx: Context, next: Next) => {
    const principal = principalOf(ctx);
    if (principal.tier !== 'identity') {
      throw forbidden(`This route needs an identity key with scope ${scope}`, { requiredScope: scope });
    }
    if (!principal.scopes.has(scope)) {
      throw forbidden(`API key lacks the scope ${scope}`, { requiredScope: scope });
    }
    return next();
  };
}

export function requireTier(...tiers: KeyTier[]) {
  return async (ctx: Context, next: Next) => {
    const principal = principalOf(ctx);
    if (!tiers.includes(principal.tier)) {
      throw new AppError(403, 'forbidden', `This route needs a ${tiers.join(' or ')} key`);
    }
    return next();
  };
}

/** A route of the org's: its admin (a platform key) or an identity key holding `scope`; a seller key is told no. */
export function requirePlatformOrScope(scope: Scope) {
  const identity = requireScope(scope);
  const platform = requireTier('platform');
  return (ctx: Context, next: Next) => (principalOf(ctx).tier === 'identity' ? identity(ctx, next) : platform(ctx, next));
}

/** The identity an identity-key request acts as. */
export function identityIdOf(ctx: Context): string {
  const id = principalOf(ctx).identityId;
  if (!id) throw forbidden('This route needs an identity key');
  return id;
}

/** What resolving a bearer key needs: the keys, and the identities whose scopes an identity key carries. */
export interface AuthDeps {
  keys: ApiKeyService;
  identities: IdentityScopeSource;
}

/** A router whose every route requires a valid bearer key. */
export function authenticatedRouter(deps: AuthDeps, options: { prefix?: string } = {}) {
  const router = new Router(options);
  router.use(authenticate(deps.keys, deps.identities));
  return router;
}
