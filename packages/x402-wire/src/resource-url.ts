/**
 * The identifier a payment is bound to: `<scheme>://<host><path>` (SPEC 4.5), or `mcp://tool/<name>` for
 * a paid MCP tool. Scheme and host compare case-insensitively, the path exactly, with no query,
 * fragment or trailing slash, so the seller's middleware, its endpoint sync and the backend's
 * registration agree on one spelling. Here, in the seller core, because both sides use it.
 */
export type ResourceParse = { readonly ok: true; readonly resource: string } | { readonly ok: false; readonly why: string };

export function parseResource(input: string): ResourceParse {
  if (input.length > 2048) return { ok: false, why: 'is too long' };
  const mcp = /^mcp:\/\/tool\/([A-Za-z0-9_.-]{1,128})$/i.exec(input);
  if (mcp) return { ok: true, resource: `mcp://tool/${mcp[1]}` };
  let url: URL;
  try {
    url = new URL(input);
  } catch {
    return { ok: false, why: 'is not an absolute URL' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { ok: false, why: 'must use http or https (or be mcp://tool/<name>)' };
  if (url.username || url.password) return { ok: false, why: 'must not carry credentials' };
  const path = url.pathname.replace(/\/+$/, '') || '/';
  return { ok: true, resource: `${url.protocol}//${url.host.toLowerCase()}${path}` };
}
