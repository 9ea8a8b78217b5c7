/**
 * The public origin (`<scheme>://<host>`) of a request, which becomes part of the x402 resource URL.
 * The backend compares that URL with the registered endpoint, so behind a proxy or tunnel it must be
 * the public one. X-Forwarded-* headers are client-controlled unless a proxy we trust overwrites them,
 * hence `trustProxy`; like Express, we take the first (left-most) value of each.
 */

export interface OriginSource {
  readonly protocol: 'http' | 'https';
  readonly host: string | undefined;
  readonly headers: Readonly<Record<string, string | undefined>>;
}

// RFC 3986 reg-name (DNS-ish) or bracketed IPv6, optional port. Lower-cased before the test.
const HOST = /^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*\.?|\[[0-9a-f:.]+\])(?::\d{1,5})?$/;

export function resolveOrigin(source: OriginSource, trustProxy: boolean): string | undefined {
  let protocol: string = source.protocol;
  let host = source.host;
  if (trustProxy) {
    const forwardedProto = firstValue(source.headers['x-forwarded-proto'])?.toLowerCase();
    if (forwardedProto === 'http' || forwardedProto === 'https') protocol = forwardedProto;
    host = firstValue(source.headers['x-forwarded-host']) ?? host;
  }
  if (host === undefined) return undefined;
  host = host.toLowerCase();
  if (!HOST.test(host)) return undefined;
  // The default port is not part of the registered URL.
  if ((protocol === 'https' && host.endsWith(':443')) || (protocol === 'http' && host.endsWith(':80'))) {
    host = host.slice(0, host.lastIndexOf(':'));
  }
  return `${protocol}://${host}`;
}

/** Validates a configured origin such as "https://api.example.com" and returns it without a trailing slash. */
export function parsePublicOrigin(origin: string): string {
  const match = /^(https?):\/\/([^/?#]+)\/?$/i.exec(origin.trim());
  const resolved = match ? resolveOrigin({ protocol: match[1]!.toLowerCase() as 'http' | 'https', host: match[2], headers: {} }, false) : undefined;
  if (!resolved) throw new TypeError(`publicOrigin must look like "https://api.example.com", got ${JSON.stringify(origin)}`);
  return resolved;
}

function firstValue(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const comma = header.indexOf(',');
  const value = (comma === -1 ? header : header.slice(0, comma)).trim();
  return value === '' ? undefined : value;
}
