/**
 * Loopback spellings of one resource. `localhost`, `127.0.0.1` and `[::1]` all name the machine the
 * seller runs on, and a developer reaches the same seller by any of them: a registration made for one
 * spelling must accept a payment presented for another. The backend applies this only in dev mode
 * (production refuses loopback endpoints at registration, so there is nothing to match there), and the
 * seller library uses it to recognise its own endpoint in the backend's list. Shared here so the two
 * cannot drift apart; the backend may import the seller core, never the other way round.
 */

export const LOOPBACK_HOSTS: readonly string[] = ['localhost', '127.0.0.1', '[::1]'];

const AUTHORITY = /^([a-z][a-z0-9+.-]*:\/\/)([^/?#]*)(.*)$/is;

/**
 * Every spelling of `resource` under which it reaches the same loopback host, `localhost` first; a
 * resource on any other host (or not an http(s) URL) is its only spelling. Scheme, port and path are
 * kept exactly as given.
 */
export function loopbackSpellings(resource: string): string[] {
  const parts = AUTHORITY.exec(resource);
  if (!parts) return [resource];
  const [, scheme, authority, rest] = parts as unknown as [string, string, string, string];
  if (!/^https?:\/\/$/i.test(scheme) || authority.includes('@')) return [resource];
  const port = /:\d+$/.exec(authority)?.[0] ?? '';
  const host = authority.slice(0, authority.length - port.length).toLowerCase();
  if (!LOOPBACK_HOSTS.includes(host)) return [resource];
  return LOOPBACK_HOSTS.map((alias) => `${scheme}${alias}${port}${rest}`);
}

/** One spelling per resource: loopback hosts become `localhost`. */
export function canonicalLoopback(resource: string): string {
  return loopbackSpellings(resource)[0]!;
}
