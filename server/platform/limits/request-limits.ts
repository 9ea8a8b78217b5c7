import type { Context, Next } from 'koa';
import { bearerToken } from '../auth/authenticate.js';
import type { ApiKeyDoc, ApiKeyService } from '../auth/api-keys.js';
import { AppError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import type { OrgLimits, OrgLimitsDoc } from './org-limits.js';
import type { Take, WindowCounts } from './window-counts.js';

/** The deployment's default limits, requests per window (RATE_LIMIT_*); 0 turns one off. */
export interface LimitDefaults { perKey: number; perSellerKey: number; perOrg: number; perAnonymous: number; windowMs: number }

/**
 * Routes a limit never answers 429: probes and metrics, and the calls that finish a payment already taken
 * (the facilitator's /settle after /verify, a hold's capture or release after the seller's handler ran).
 * Refusing those would leave a buyer's payment taken without an answer; the calls that start a payment
 * (redeem, /verify, a hold) are limited, since refusing them takes nothing.
 */
const NEVER_LIMITED = [/^\/(health|ready|metrics)$/, /^\/v0\/x402\/settle$/, /^\/v0\/payments\/holds\/[^/]+\/(capture|release)$/];

/**
 * Request limits for every key, its org and every anonymous client (by address), counted across the
 * deployment's processes (window-counts.ts), with the IETF RateLimit headers on every limited answer:
 * `RateLimit-Policy` (each limit that applies: its quota `q` per window `w` seconds) and `RateLimit` (the
 * limit nearest to running out: `r` requests remaining, `t` seconds until the window resets). Over a limit
 * the answer is 429 `rate_limited` with `Retry-After`. A key that does not resolve counts as anonymous
 * (guessing keys is limited by address).
 */
interface Limit { name: string; bucket: string; limit: number }
/** What applies to one key (or one anonymous client): its limits in force and their RateLimit-Policy header. */
interface Plan { limits: Limit[]; policy: string }

export function requestLimits(deps: { counts: WindowCounts; keys: ApiKeyService; orgLimits: OrgLimits; defaults: LimitDefaults; metrics: Metrics }) {
  const { counts, keys, orgLimits, defaults, metrics } = deps;
  const windowSeconds = Math.round(defaults.windowMs / 1000);
  const planOf = (limits: Limit[]): Plan => {
    const active = limits.filter((l) => l.limit > 0);
    return { limits: active, policy: active.map((l) => `"${l.name}";q=${l.limit};w=${windowSeconds}`).join(', ') };
  };
  /**
   * Each key's plan, kept while the org's own limits (the cached document, or none) stay the same object:
   * a request then does one lookup, not the strings and arrays of its limits.
   */
  const plans = new Map<string, { own: OrgLimitsDoc | null; plan: Plan }>();
  const keyPlan = (key: ApiKeyDoc, own: OrgLimitsDoc | null): Plan => {
    const kept = plans.get(key._id);
    if (kept && kept.own === own) return kept.plan;
    const perKey = key.tier === 'seller' ? own?.perSellerKey ?? defaults.perSellerKey : own?.perKey ?? defaults.perKey;
    const plan = planOf([{ name: 'key', bucket: `key:${key._id}`, limit: perKey }, { name: 'org', bucket: `org:${key.orgId}`, limit: own?.perOrg ?? defaults.perOrg }]);
    if (plans.size >= 50_000) plans.clear();
    plans.set(key._id, { own, plan });
    return plan;
  };
  const anonymousPolicy = planOf([{ name: 'anonymous', bucket: '', limit: defaults.perAnonymous }]).policy;

  /**
   * Counts the request against each limit of its plan, from `from` on, and answers over one. Synchronous
   * while the counts are at hand (far from a limit: most requests), so a request pays no promise for it.
   */
  const enforce = (ctx: Context, next: Next, plan: Plan, from = 0, nearest?: { name: string; take: Take }): unknown => {
    if (from === 0) ctx.set('RateLimit-Policy', plan.policy);
    for (let i = from; i < plan.limits.length; i++) {
      const limit = plan.limits[i]!;
      const counted = counts.take(limit.bucket, limit.limit);
      if (counted instanceof Promise) return counted.then((take) => enforce(ctx, next, plan, i + 1, judge(ctx, limit, take, nearest)));
      nearest = judge(ctx, limit, counted, nearest);
    }
    ctx.set('RateLimit', `"${nearest!.name}";r=${nearest!.take.remaining};t=${nearest!.take.resetSeconds}`);
    return next();
  };
  /** Throws the 429 of a refused take; else the limit nearest to running out so far. */
  const judge = (ctx: Context, limit: Limit, take: Take, nearest: { name: string; take: Take } | undefined) => {
    if (!take.ok) {
      ctx.set('RateLimit', `"${limit.name}";r=0;t=${take.resetSeconds}`);
      metrics.rateLimited.inc({ limit: limit.name });
      throw new AppError(429, 'rate_limited', `Too many requests for this ${limit.name === 'anonymous' ? 'client' : limit.name}: ${limit.limit} per ${windowSeconds} s; retry in ${take.resetSeconds} s`, { limit: limit.name, quota: limit.limit, windowSeconds, retryAfter: take.resetSeconds }, { 'Retry-After': String(take.resetSeconds) });
    }
    return !nearest || take.remaining < nearest.take.remaining ? { name: limit.name, take } : nearest;
  };
  const anonymous = (ctx: Context, next: Next) => {
    if (defaults.perAnonymous <= 0) return next();
    return enforce(ctx, next, { limits: [{ name: 'anonymous', bucket: `ip:${ctx.ip}`, limit: defaults.perAnonymous }], policy: anonymousPolicy });
  };
  const forKey = (ctx: Context, next: Next, key: ApiKeyDoc) => {
    const own = orgLimits.of(key.orgId);
    const apply = (found: OrgLimitsDoc | null) => {
      const plan = keyPlan(key, found);
      return plan.limits.length ? enforce(ctx, next, plan) : next();
    };
    return own instanceof Promise ? own.catch(() => null).then(apply) : apply(own);
  };
  /** A token not in this process's key cache: looked up (a key that does not resolve counts as anonymous). */
  const lookedUp = async (ctx: Context, next: Next, token: string) => {
    let key: ApiKeyDoc | null;
    try {
      key = await keys.resolve(token);
    } catch {
      // The database cannot tell (an outage): counted as anonymous here; authenticate() answers the outage.
      return anonymous(ctx, next);
    }
    ctx.state.resolvedKey = { token, key };
    return key ? forKey(ctx, next, key) : anonymous(ctx, next);
  };

  // Not async: with the key, its org's limits and the counts in memory, a request goes through without a
  // promise or a turn of the microtask queue.
  return (ctx: Context, next: Next) => {
    if (NEVER_LIMITED.some((path) => path.test(ctx.path))) return next();
    const token = bearerToken(ctx);
    if (!token) return anonymous(ctx, next);
    const key = keys.atHand(token);
    if (key === undefined) return lookedUp(ctx, next, token);
    // authenticate() takes the key from here rather than resolving the token again.
    ctx.state.resolvedKey = { token, key };
    return key ? forKey(ctx, next, key) : anonymous(ctx, next);
  };
}
