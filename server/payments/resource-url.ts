import { AppError } from '../platform/errors.js';
import type { Mode } from '../platform/config.js';
import { loopbackSpellings } from '../../middleware/loopback.js';

/**
 * The identifier a payment is bound to: `<scheme>://<host><path>` (SPEC 4.5), or `mcp://tool/<name>` for
 * a paid MCP tool. Scheme and host compare case-insensitively, the path exactly, with no query,
 * fragment or trailing slash, so the seller's middleware and the registration agree on one spelling.
 */
export function normalizeResource(input: string): string {
  const invalid = (why: string) => new AppError(400, 'invalid_resource', `resource ${JSON.stringify(input.slice(0, 200))} ${why}`);
  if (input.length > 2048) throw invalid('is too long');
  const mcp = /^mcp:\/\/tool\/([A-Za-z0-9_.-]{1,128})$/i.exec(input);
  if (mcp) return `mcp://tool/${mcp[1]}`;
  let url: URL;
  try {
    url = new URL(input);
  } catch {
    throw invalid('is not an absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw invalid('must use http or https (or be mcp://tool/<name>)');
  if (url.username || url.password) throw invalid('must not carry credentials');
  const path = url.pathname.replace(/\/+$/, '') || '/';
  return `${url.protocol}//${url.host.toLowerCase()}${path}`;
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
