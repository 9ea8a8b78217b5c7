import { AppError } from '../platform/errors.js';
import type { Mode } from '../platform/config.js';
import { loopbackSpellings, parseResource } from 'agentgate-x402-wire';

/** The resource a payment is bound to (middleware/resource-url.ts), or a 400 saying why the input is not one. */
export function normalizeResource(input: string): string {
  const parsed = parseResource(input);
  if (!parsed.ok) throw new AppError(400, 'invalid_resource', `resource ${JSON.stringify(input.slice(0, 200))} ${parsed.why}`);
  return parsed.resource;
}

export const isMcpResource = (resource: string) => resource.startsWith('mcp://');

/**
 * The stored endpoint URLs a (normalized) resource matches, for registration's duplicate check and for
 * redeem's lookup. In dev mode `http://localhost:P/x`, `http://127.0.0.1:P/x` and `http://[::1]:P/x` are
 * one resource: a seller started on any port is called by either spelling, and a challenge issued for
 * one must redeem against an endpoint registered under another. Only in dev: production refuses
 * loopback endpoints at registration, so no stored URL could match an alias, and there every other host
 * is compared exactly. The stored URL keeps the spelling the seller registered (what GET shows, and
 * older dev registrations keep working); the payment records the spelling the buyer paid for.
 */
export function endpointUrlsFor(resource: string, mode: Mode): string[] {
  return mode === 'dev' ? loopbackSpellings(resource) : [resource];
}
