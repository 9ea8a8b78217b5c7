import { AppError } from '../platform/errors.js';

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
