import { lookup as dnsLookup } from 'node:dns/promises';
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';

/**
 * Outbound HTTP to addresses someone else chose (webhook URLs, seller endpoints, did:web hosts, URLs an
 * agent pays). The guard resolves the host itself, refuses anything that is not a public unicast
 * address, and pins the connection to the address it checked, so a DNS answer that changes between the
 * check and the connect (rebinding) cannot redirect the request. Every redirect hop is checked again.
 */

export type GuardedFetchErrorCode = 'invalid_url' | 'invalid_request' | 'blocked_address' | 'dns_failed' | 'timeout' | 'too_large' | 'too_many_redirects' | 'network_error';

export class GuardedFetchError extends Error {
  constructor(readonly code: GuardedFetchErrorCode, message: string) {
    super(message);
    this.name = 'GuardedFetchError';
  }
}

/** Resolves a host name to every address it has (tests inject their own to simulate DNS). */
export type HostResolver = (hostname: string) => Promise<Array<{ address: string; family: 4 | 6 }>>;

export interface AddressPolicy {
  /** Lets 127.0.0.0/8 and ::1 through; only ever true in dev mode (`app.config.mode === 'dev'`). */
  allowLoopback?: boolean;
  /**
   * Private addresses the operator lets through (ALLOWED_PRIVATE_ADDRESSES): sellers and webhook receivers
   * on its own network. Parsed by parseAddressRanges.
   */
  allowedRanges?: readonly AddressRange[];
  resolve?: HostResolver;
}

/** An IP range the operator allows: its family, network and prefix length. */
export interface AddressRange { family: 4 | 6; range: Range }

/**
 * `10.0.5.0/24,127.0.0.1,fd00::/8`: IPs or CIDR ranges, comma-separated. Throws a TypeError naming the
 * first entry that is neither.
 */
export function parseAddressRanges(text: string): AddressRange[] {
  return text.split(',').map((entry) => entry.trim()).filter(Boolean).map((entry) => {
    const [ip, length, extra] = entry.split('/');
    const family = isIP(ip ?? '');
    const bits = family === 6 ? 128 : 32;
    const prefix = length === undefined ? bits : Number(length);
    if (!family || extra !== undefined || !Number.isInteger(prefix) || prefix < 0 || prefix > bits || (length !== undefined && !/^\d+$/.test(length))) {
      throw new TypeError(`"${entry}" is not an IP address or a CIDR range`);
    }
    return { family: family === 6 ? 6 : 4, range: [family === 6 ? v6ToBigint(ip!) : v4ToBigint(ip!), prefix] };
  });
}

/** The address policy of a process: loopback in dev mode, and the private ranges its operator allows. */
export function outboundPolicy(config: { mode: 'dev' | 'production'; ALLOWED_PRIVATE_ADDRESSES?: string }): AddressPolicy {
  return { allowLoopback: config.mode === 'dev', allowedRanges: parseAddressRanges(config.ALLOWED_PRIVATE_ADDRESSES ?? '') };
}

export interface GuardedFetchOptions extends AddressPolicy {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Total time for all hops, connect to last byte. */
  timeoutMs?: number;
  /** Cap on the response body; a larger one is an error, not a truncation. */
  maxBytes?: number;
  maxRedirects?: number;
}

export interface GuardedResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  bodyText: string;
  /** The URL that produced this response, after redirects. */
  url: string;
}

const systemResolver: HostResolver = async (hostname) =>
  (await dnsLookup(hostname, { all: true, verbatim: true })).map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));

/** Host names that are cloud metadata endpoints whatever they resolve to. */
const BLOCKED_NAMES = new Set(['metadata.google.internal', 'metadata.goog', 'metadata', 'instance-data', 'instance-data.ec2.internal']);

type Range = [bigint, number]; // network, prefix length

function v4ToBigint(ip: string): bigint {
  return ip.split('.').reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n);
}

function v6ToBigint(ip: string): bigint {
  let text = ip.toLowerCase();
  const zone = text.indexOf('%');
  if (zone >= 0) text = text.slice(0, zone);
  // A trailing dotted quad (::ffff:1.2.3.4) becomes two hextets.
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const v4 = v4ToBigint(dotted[1]!);
    text = text.slice(0, dotted.index) + `${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') as [string, string] : [text, undefined];
  const headParts = head ? head.split(':') : [];
  const tailParts = tail !== undefined && tail !== '' ? tail.split(':') : [];
  const fill = tail === undefined ? [] : Array(8 - headParts.length - tailParts.length).fill('0');
  return [...headParts, ...fill, ...tailParts].reduce((acc, part) => (acc << 16n) | BigInt(parseInt(part || '0', 16)), 0n);
}

const v4 = (cidr: string): Range => { const [ip, len] = cidr.split('/'); return [v4ToBigint(ip!), Number(len)]; };
const v6 = (cidr: string): Range => { const [ip, len] = cidr.split('/'); return [v6ToBigint(ip!), Number(len)]; };

const inRange = (value: bigint, bits: number, [network, prefix]: Range) => (value >> BigInt(bits - prefix)) === (network >> BigInt(bits - prefix));

const V4_LOOPBACK = v4('127.0.0.0/8');
/** Everything that is not public unicast: private, CGNAT, link-local (metadata), multicast, reserved, documentation. */
const V4_BLOCKED = [
  '0.0.0.0/8', '10.0.0.0/8', '100.64.0.0/10', '127.0.0.0/8', '169.254.0.0/16', '172.16.0.0/12', '192.0.0.0/24', '192.0.2.0/24',
  '192.88.99.0/24', '192.168.0.0/16', '198.18.0.0/15', '198.51.100.0/24', '203.0.113.0/24', '224.0.0.0/4', '240.0.0.0/4',
].map(v4);
const V6_LOOPBACK = v6('::1/128');
const V6_BLOCKED = [
  '::/128', '::1/128', '100::/64', '2001::/32' /* Teredo */, '2001:db8::/32', '2001:10::/28', '2001:20::/28', 'fc00::/7', 'fe80::/10', 'fec0::/10', 'ff00::/8',
].map(v6);
/** IPv6 forms that carry an IPv4 address inside; the embedded address decides. */
const V6_EMBEDDING_V4: Array<{ range: Range; extract: (v: bigint) => bigint }> = [
  { range: v6('::ffff:0:0/96'), extract: (v) => v & 0xffffffffn }, // IPv4-mapped
  { range: v6('::ffff:0:0:0/96'), extract: (v) => v & 0xffffffffn }, // IPv4-translated
  { range: v6('64:ff9b::/96'), extract: (v) => v & 0xffffffffn }, // NAT64
  { range: v6('64:ff9b:1::/48'), extract: (v) => v & 0xffffffffn }, // local-use NAT64
  { range: v6('::/96'), extract: (v) => v & 0xffffffffn }, // IPv4-compatible (deprecated)
  { range: v6('2002::/16'), extract: (v) => (v >> 80n) & 0xffffffffn }, // 6to4
];

function classifyV4(value: bigint, allowLoopback: boolean): string | null {
  if (allowLoopback && inRange(value, 32, V4_LOOPBACK)) return null;
  return V4_BLOCKED.some((r) => inRange(value, 32, r)) ? 'a private, loopback, link-local or reserved IPv4 address' : null;
}

/** Why `address` may not be contacted, or null when it is a public unicast address or one the operator allows. */
export function blockedReason(address: string, options: { allowLoopback?: boolean; allowedRanges?: readonly AddressRange[] } = {}): string | null {
  const allowLoopback = options.allowLoopback ?? false;
  const family = isIP(address.split('%')[0]!);
  if (options.allowedRanges?.some((r) => r.family === family && inRange(family === 6 ? v6ToBigint(address) : v4ToBigint(address), family === 6 ? 128 : 32, r.range))) return null;
  if (family === 4) return classifyV4(v4ToBigint(address), allowLoopback);
  if (family !== 6) return 'not an IP address';
  const value = v6ToBigint(address);
  for (const form of V6_EMBEDDING_V4) {
    if (inRange(value, 128, form.range) && value !== 0n && value !== 1n) {
      const reason = classifyV4(form.extract(value), allowLoopback);
      return reason ? `an IPv6 form of ${reason}` : null;
    }
  }
  if (allowLoopback && inRange(value, 128, V6_LOOPBACK)) return null;
  return V6_BLOCKED.some((r) => inRange(value, 128, r)) ? 'a private, loopback, link-local, multicast or reserved IPv6 address' : null;
}

function parseTarget(raw: string | URL): URL {
  let url: URL;
  try {
    url = new URL(String(raw));
  } catch {
    throw new GuardedFetchError('invalid_url', 'is not a valid URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new GuardedFetchError('invalid_url', 'must be an http or https URL');
  if (url.username || url.password) throw new GuardedFetchError('invalid_url', 'must not carry credentials');
  if (!url.hostname) throw new GuardedFetchError('invalid_url', 'has no host');
  return url;
}

/**
 * Checks a URL and picks the address to connect to. Every address the name resolves to must be allowed
 * (a mixed answer is refused), so the choice cannot depend on which answer happens to come first.
 */
export async function assertAllowedUrl(raw: string | URL, policy: AddressPolicy = {}): Promise<{ url: URL; address: string; family: 4 | 6 }> {
  const url = parseTarget(raw);
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const name = host.toLowerCase().replace(/\.$/, '');
  if (BLOCKED_NAMES.has(name)) throw new GuardedFetchError('blocked_address', `${url.host} is a cloud metadata host`);
  let addresses: Array<{ address: string; family: 4 | 6 }>;
  const literal = isIP(host);
  if (literal) {
    addresses = [{ address: host, family: literal === 6 ? 6 : 4 }];
  } else {
    try {
      addresses = await (policy.resolve ?? systemResolver)(name);
    } catch (err) {
      throw new GuardedFetchError('dns_failed', `${url.hostname} did not resolve (${(err as { code?: string }).code ?? (err as Error).message})`);
    }
    if (addresses.length === 0) throw new GuardedFetchError('dns_failed', `${url.hostname} did not resolve`);
  }
  for (const { address } of addresses) {
    const reason = blockedReason(address, policy);
    if (reason) throw new GuardedFetchError('blocked_address', `${url.host} resolves to ${address}, ${reason}`);
  }
  return { url, address: addresses[0]!.address, family: addresses[0]!.family };
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/** fetch-like, for untrusted targets. Throws GuardedFetchError for anything the guard refuses or cuts off. */
export async function guardedFetch(raw: string | URL, options: GuardedFetchOptions = {}): Promise<GuardedResponse> {
  const deadline = Date.now() + (options.timeoutMs ?? 10_000);
  const maxBytes = options.maxBytes ?? 1024 * 1024;
  const maxRedirects = options.maxRedirects ?? 3;
  let method = (options.method ?? 'GET').toUpperCase();
  let body = options.body;
  let headers = { ...(options.headers ?? {}) };
  let current = String(raw);
  for (let hop = 0; ; hop++) {
    const target = await assertAllowedUrl(current, options);
    const response = await requestPinned(target, { method, headers, body, deadline, maxBytes });
    const location = response.headers.location;
    if (!REDIRECTS.has(response.status) || typeof location !== 'string') return response;
    if (hop >= maxRedirects) throw new GuardedFetchError('too_many_redirects', `more than ${maxRedirects} redirects`);
    const next = new URL(location, target.url);
    if (next.origin !== target.url.origin) {
      // Credentials meant for one origin are not handed to whatever it redirects to.
      headers = Object.fromEntries(Object.entries(headers).filter(([k]) => !['authorization', 'cookie', 'proxy-authorization'].includes(k.toLowerCase())));
    }
    if (response.status === 303 || ((response.status === 301 || response.status === 302) && method === 'POST')) {
      method = 'GET';
      body = undefined;
      headers = Object.fromEntries(Object.entries(headers).filter(([k]) => !['content-type', 'content-length'].includes(k.toLowerCase())));
    }
    current = next.toString();
  }
}

function requestPinned(
  target: { url: URL; address: string; family: 4 | 6 },
  request: { method: string; headers: Record<string, string>; body?: string | Buffer; deadline: number; maxBytes: number },
): Promise<GuardedResponse> {
  const remaining = request.deadline - Date.now();
  if (remaining <= 0) return Promise.reject(new GuardedFetchError('timeout', 'timed out'));
  // The connection goes to the address that was checked, whatever DNS says by now.
  const pinned: LookupFunction = (_hostname, opts, callback) => {
    if ((opts as { all?: boolean }).all) (callback as unknown as (e: null, a: Array<{ address: string; family: number }>) => void)(null, [{ address: target.address, family: target.family }]);
    else callback(null, target.address, target.family);
  };
  const { url } = target;
  const client = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    let req: http.ClientRequest | undefined;
    const fail = (err: GuardedFetchError) => {
      clearTimeout(timer);
      if (!settled) { settled = true; req?.destroy(); reject(err); }
    };
    // Node validates headers inside request() and throws synchronously (ERR_INVALID_CHAR and friends):
    // that must become this request's error, and no timer may be armed before the request exists.
    try {
      req = client.request({
        protocol: url.protocol,
        hostname: url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname,
        port: url.port || undefined,
        path: `${url.pathname}${url.search}`,
        method: request.method,
        headers: { 'user-agent': 'agentgate', ...request.headers, host: url.host },
        lookup: pinned,
        agent: false,
        ...(url.protocol === 'https:' && !isIP(url.hostname) ? { servername: url.hostname } : {}),
      }, (res) => {
        const declared = Number(res.headers['content-length'] ?? 0);
        if (declared > request.maxBytes) return fail(new GuardedFetchError('too_large', `response is ${declared} bytes, over the ${request.maxBytes} byte cap`));
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > request.maxBytes) return fail(new GuardedFetchError('too_large', `response exceeds the ${request.maxBytes} byte cap`));
          chunks.push(chunk);
        });
        res.on('end', () => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          const body = Buffer.concat(chunks);
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body, bodyText: body.toString('utf8'), url: url.toString() });
        });
        res.on('error', (err) => fail(new GuardedFetchError('network_error', err.message)));
      });
    } catch (err) {
      return fail(new GuardedFetchError('invalid_request', `the request could not be built: ${(err as Error).message}`));
    }
    timer = setTimeout(() => fail(new GuardedFetchError('timeout', `timed out after ${Math.round(remaining)} ms`)), remaining);
    req.on('error', (err) => fail(new GuardedFetchError('network_error', err.message)));
    req.on('close', () => clearTimeout(timer));
    if (request.body !== undefined) req.write(request.body);
    req.end();
  });
}
