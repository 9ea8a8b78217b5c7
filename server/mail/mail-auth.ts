import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import { promises as dns } from 'node:dns';
import type { Config } from '../platform/config.js';
import type { Logger } from '../platform/logger.js';
import { lazily } from '../platform/lazily.js';

// Who really sent a received message: SPF, DKIM, DMARC and ARC checked by mailauth against the real SMTP
// conversation (the connecting IP, its HELO and the MAIL FROM, never the Received headers a sender
// writes), and the trusted path between our own inboxes, which needs no DNS at all.

// mailauth is loaded with the first message to check: its modules (X.509, DNS records, schemas) are
// 0.2-0.3 s of a start on an idle machine.
const loadMailauth = lazily(() => import('mailauth'));

export const AUTH_RESULTS = ['pass', 'fail', 'softfail', 'neutral', 'none', 'temperror', 'permerror'] as const;
export type AuthResult = (typeof AUTH_RESULTS)[number];

/** One method's verdict and the domain it checked (null when there was none to check). */
export interface MethodVerdict { result: AuthResult; domain: string | null }

/**
 * The verdict a received message carries. `verified` is true only when DMARC passes or, where the
 * From domain publishes no DMARC record, when an SPF or DKIM pass is aligned with the From domain.
 * `internal` marks mail that came over the trusted path from another inbox of this server.
 */
export interface Authentication {
  spf: MethodVerdict;
  dkim: MethodVerdict;
  dmarc: MethodVerdict & { policy?: string };
  arc: MethodVerdict;
  verified: boolean;
  internal?: boolean;
}

/** What the SMTP conversation told us about the client: never taken from the message's own headers. */
export interface SmtpPeer { ip: string; helo: string; mailFrom: string }

const asResult = (value: unknown): AuthResult => {
  const result = typeof value === 'string' ? value.toLowerCase() : 'none';
  if ((AUTH_RESULTS as readonly string[]).includes(result)) return result as AuthResult;
  // DKIM's `policy` (a valid signature our policy does not accept, e.g. a too short key) counts as a failure.
  return result === 'policy' ? 'fail' : 'neutral';
};

const domainOf = (address: string) => address.slice(address.lastIndexOf('@') + 1).toLowerCase().replace(/\.$/, '');

/** Relaxed, and on the safe side without a public suffix list: the same domain, or one a subdomain of the other. */
const aligned = (a: string | null, b: string | null) =>
  !!a && !!b && (a === b || a.endsWith(`.${b}`) || b.endsWith(`.${a}`));

/** The verdict when authentication itself could not run: nothing passed, nothing is known. */
const unknown = (result: AuthResult): Authentication => ({
  spf: { result, domain: null }, dkim: { result, domain: null }, dmarc: { result, domain: null }, arc: { result: 'none', domain: null }, verified: false,
});

/** The trusted path's stamp: the first header line of a message one of our processes hands our own listener. */
export const INTERNAL_HEADER = 'X-Agentgate-Internal';

interface MailauthResult {
  spf?: { domain?: string; status?: { result?: string } } | false;
  dkim?: { headerFrom?: string[]; results?: { signingDomain?: string; status?: { result?: string; aligned?: string | false } }[] };
  dmarc?: { domain?: string; policy?: string; status?: { result?: string; header?: { from?: string } } } | false;
  arc?: { status?: { result?: string }; signature?: { signingDomain?: string } } | false;
}

/** The resolver mail reads DNS with: MAIL_DNS_SERVERS, or the system's; each query bounded by MAIL_DNS_TIMEOUT_MS. */
export function mailResolver(config: Config): dns.Resolver {
  const resolver = new dns.Resolver({ timeout: config.MAIL_DNS_TIMEOUT_MS, tries: 2 });
  if (config.MAIL_DNS_SERVERS) resolver.setServers(config.MAIL_DNS_SERVERS);
  return resolver;
}

export class MailAuthenticator {
  private readonly resolver: (name: string, type: string) => Promise<unknown>;
  private readonly internalKey: Buffer;

  constructor(private readonly config: Config, private readonly log: Logger) {
    const resolver = mailResolver(config);
    this.resolver = (name, type) => resolver.resolve(name, type);
    // Every process of one deployment shares MASTER_KEY, so any of them can stamp and check the trusted path.
    this.internalKey = Buffer.from(hkdfSync('sha256', config.MASTER_KEY, Buffer.alloc(0), 'agentgate mail internal path v1', 32));
  }

  /**
   * The message with the trusted path's stamp on top: an HMAC of the envelope sender and the exact
   * bytes, under a key only this deployment's processes hold. Our own delivery adds it to mail for our own
   * inboxes; nothing else can make one, and it is bound to these bytes and this sender.
   */
  stampInternal(raw: string, envelopeFrom: string): string {
    return `${INTERNAL_HEADER}: ${this.mac(raw, envelopeFrom)}\r\n${raw}`;
  }

  private mac(raw: string | Buffer, envelopeFrom: string): string {
    return createHmac('sha256', this.internalKey).update(`${envelopeFrom.toLowerCase()}\n`).update(raw).digest('hex');
  }

  /**
   * Takes the trusted path's stamp off a received message: `internal` is true only when the stamp is
   * there and right for these bytes and this envelope sender. Any stamp is removed either way.
   */
  openInternal(raw: Buffer, envelopeFrom: string): { raw: Buffer; internal: boolean } {
    const prefix = `${INTERNAL_HEADER}: `;
    if (raw.subarray(0, prefix.length).toString('latin1').toLowerCase() !== prefix.toLowerCase()) return { raw, internal: false };
    const end = raw.indexOf('\r\n');
    if (end < 0) return { raw, internal: false };
    const given = raw.subarray(prefix.length, end).toString('latin1').trim();
    const rest = raw.subarray(end + 2);
    const expected = this.mac(rest, envelopeFrom);
    const internal = given.length === expected.length && timingSafeEqual(Buffer.from(given), Buffer.from(expected));
    return { raw: rest, internal };
  }

  /** The verdict of mail from our own inboxes: our own DKIM and our own path, so verified by construction. */
  internalVerdict(): Authentication {
    const domain = this.config.MAIL_DOMAIN.toLowerCase();
    return {
      spf: { result: 'pass', domain }, dkim: { result: 'pass', domain }, dmarc: { result: 'pass', domain }, arc: { result: 'none', domain: null },
      verified: true, internal: true,
    };
  }

  /**
   * SPF, DKIM, DMARC and ARC of a message as it arrived. Never throws: a DNS failure is a `temperror`
   * in the method it broke (mailauth reports those itself), and anything else unexpected is a
   * `temperror` verdict for the whole message, which is then stored unverified, never lost.
   */
  async verify(raw: Buffer, peer: SmtpPeer): Promise<Authentication> {
    let result: MailauthResult;
    try {
      const { authenticate } = await loadMailauth();
      result = await authenticate(raw, {
        ip: peer.ip, helo: peer.helo || peer.ip, sender: peer.mailFrom, mta: this.config.MAIL_DOMAIN,
        resolver: this.resolver as never, disableBimi: true, trustReceived: false,
      }) as unknown as MailauthResult;
    } catch (err) {
      this.log.warn({ err }, 'mail authentication failed; the message is kept as temperror');
      return unknown('temperror');
    }
    return this.verdictOf(result, peer);
  }

  private verdictOf(result: MailauthResult, peer: SmtpPeer): Authentication {
    const fromDomain = (result.dmarc && result.dmarc.status?.header?.from?.toLowerCase())
      || (result.dkim?.headerFrom?.length === 1 ? domainOf(result.dkim.headerFrom[0]!) : null);
    const spfResult = result.spf ? result.spf : undefined;
    const spf: MethodVerdict = {
      result: asResult(spfResult?.status?.result),
      domain: spfResult?.domain?.toLowerCase() ?? (peer.mailFrom ? domainOf(peer.mailFrom) : peer.helo.toLowerCase() || null),
    };
    // Of several signatures, the one that says most: a pass aligned with From, then any pass, then the first.
    const signatures = result.dkim?.results ?? [];
    const best = signatures.find((s) => s.status?.result === 'pass' && aligned(s.signingDomain?.toLowerCase() ?? null, fromDomain))
      ?? signatures.find((s) => s.status?.result === 'pass') ?? signatures[0];
    const dkim: MethodVerdict = { result: best ? asResult(best.status?.result) : 'none', domain: best?.signingDomain?.toLowerCase() ?? null };
    const dmarcResult = result.dmarc || undefined;
    const dmarc: Authentication['dmarc'] = {
      result: dmarcResult ? asResult(dmarcResult.status?.result) : 'none',
      domain: fromDomain ?? dmarcResult?.domain?.toLowerCase() ?? null,
      ...(dmarcResult?.policy ? { policy: dmarcResult.policy } : {}),
    };
    const arcResult = result.arc || undefined;
    const arc: MethodVerdict = { result: arcResult ? asResult(arcResult.status?.result) : 'none', domain: arcResult?.signature?.signingDomain?.toLowerCase() ?? null };
    const verified = dmarc.result === 'pass'
      || (dmarc.result === 'none' && !!fromDomain && (
        (spf.result === 'pass' && aligned(spf.domain, fromDomain))
        || (dkim.result === 'pass' && aligned(dkim.domain, fromDomain))));
    return { spf, dkim, dmarc, arc, verified };
  }
}
