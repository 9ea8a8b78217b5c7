// The DNS records a custom mail domain publishes, and what DNS says of each: the records an org is told to
// publish (POST /v0/domains) and the check that reads them back (GET /v0/domains/{id}, the scheduled
// re-check). Nothing here writes: the resolver is passed in, so a test's loopback DNS server answers.

export const RECORD_PURPOSES = ['verification', 'mx', 'spf', 'dkim', 'dmarc'] as const;
export type RecordPurpose = (typeof RECORD_PURPOSES)[number];

/**
 * - ok: published as required;
 * - missing: the name has no such record (NXDOMAIN, no data);
 * - wrong: a record is there but says something else (`found` shows what);
 * - unknown: DNS did not answer (a timeout, SERVFAIL): nothing is concluded from it.
 */
export type RecordStatus = 'ok' | 'missing' | 'wrong' | 'unknown';

/** A record to publish: where, what, and why. */
export interface ExpectedRecord {
  purpose: RecordPurpose;
  type: 'TXT' | 'MX';
  /** The full name, e.g. `_dmarc.example.com`. */
  name: string;
  /** What to publish (for MX, the host; its priority is 10). */
  value: string;
  /** The DKIM key's selector (dkim records only). */
  selector?: string;
  /** Whether the domain is verified without it (a DKIM key being rotated in while the old one signs). */
  required: boolean;
}

export interface CheckedRecord extends ExpectedRecord {
  status: RecordStatus;
  /** What DNS holds at that name and type (all of it, so a wrong record shows what is there instead). */
  found: string[];
}

/** What the deployment asks every custom domain to publish. */
export interface RecordSettings {
  /** Our inbound SMTP host, which the MX must name. */
  mxHost: string;
  /** The SPF record of our sending relay, which the domain's SPF must include. */
  spfInclude: string;
}

/** A DKIM key of the domain, as the records need it. */
export interface DkimPublicKey {
  selector: string;
  /** The `p=` value: the public key, base64 of its DER SubjectPublicKeyInfo. */
  publicKey: string;
  /** Being rotated in: not required while an older key is published. */
  rotating?: boolean;
}

export const VERIFICATION_PREFIX = 'agentgate-verification=';

export function expectedRecords(domain: string, verificationToken: string, keys: DkimPublicKey[], settings: RecordSettings): ExpectedRecord[] {
  return [
    { purpose: 'verification', type: 'TXT', name: `_agentgate.${domain}`, value: `${VERIFICATION_PREFIX}${verificationToken}`, required: true },
    { purpose: 'mx', type: 'MX', name: domain, value: settings.mxHost, required: true },
    { purpose: 'spf', type: 'TXT', name: domain, value: `v=spf1 include:${settings.spfInclude} ~all`, required: true },
    ...keys.map((key): ExpectedRecord => ({
      purpose: 'dkim', type: 'TXT', name: `${key.selector}._domainkey.${domain}`, value: `v=DKIM1; k=rsa; p=${key.publicKey}`,
      selector: key.selector, required: !key.rotating,
    })),
    { purpose: 'dmarc', type: 'TXT', name: `_dmarc.${domain}`, value: 'v=DMARC1; p=quarantine; adkim=r; aspf=r', required: true },
  ];
}

/** How the check reads DNS: `resolveTxt` and `resolveMx` of node:dns's Resolver. */
export interface DnsReader {
  resolveTxt(name: string): Promise<string[][]>;
  resolveMx(name: string): Promise<{ exchange: string; priority: number }[]>;
}

/** The answers that mean "no such record" (as opposed to DNS not answering). */
const ABSENT = new Set(['ENOTFOUND', 'ENODATA', 'NXDOMAIN']);

const lower = (host: string) => host.toLowerCase().replace(/\.$/, '');

/** The tag=value pairs of a DKIM, DMARC or SPF-like record, tags lowercased. */
function tags(record: string): Map<string, string> {
  const map = new Map<string, string>();
  for (const part of record.split(';')) {
    const at = part.indexOf('=');
    if (at > 0) map.set(part.slice(0, at).trim().toLowerCase(), part.slice(at + 1).replace(/\s+/g, ''));
  }
  return map;
}

/** Whether what was found is what `expected` asks for: the same meaning, not necessarily the same spelling. */
function matches(expected: ExpectedRecord, found: string[]): boolean {
  switch (expected.purpose) {
    case 'verification':
      return found.includes(expected.value);
    case 'mx':
      return found.some((host) => lower(host) === lower(expected.value));
    case 'spf': {
      // Exactly one SPF record (two are a permerror for every receiver), including ours.
      const spf = found.filter((r) => /^v=spf1(\s|$)/i.test(r));
      const include = expected.value.split(/\s+/).find((term) => term.startsWith('include:'))!.toLowerCase();
      return spf.length === 1 && spf[0]!.toLowerCase().split(/\s+/).some((term) => term.replace(/^[+]/, '') === include);
    }
    case 'dkim':
      return found.some((r) => tags(r).get('p') === tags(expected.value).get('p'));
    case 'dmarc': {
      // Any valid DMARC policy: which one is the domain owner's choice.
      const dmarc = found.filter((r) => /^v=DMARC1\s*(;|$)/i.test(r));
      return dmarc.length === 1 && ['none', 'quarantine', 'reject'].includes(tags(dmarc[0]!).get('p')?.toLowerCase() ?? '');
    }
  }
}

/** Reads one record back from DNS and says whether it is as required. Never throws. */
export async function checkRecord(dns: DnsReader, expected: ExpectedRecord): Promise<CheckedRecord> {
  let found: string[];
  try {
    found = expected.type === 'MX'
      ? (await dns.resolveMx(expected.name)).sort((a, b) => a.priority - b.priority).map((mx) => lower(mx.exchange))
      : (await dns.resolveTxt(expected.name)).map((chunks) => chunks.join(''));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    return { ...expected, status: ABSENT.has(code) ? 'missing' : 'unknown', found: [] };
  }
  // TXT at the domain itself also holds other records (site verifications): only SPF ones are shown.
  const relevant = expected.purpose === 'spf' ? found.filter((r) => /^v=spf1(\s|$)/i.test(r)) : found;
  if (!relevant.length) return { ...expected, status: 'missing', found: [] };
  return { ...expected, status: matches(expected, relevant) ? 'ok' : 'wrong', found: relevant };
}

/**
 * The domain's standing after a check:
 * - `verified`: every required record ok;
 * - `failing`: a required record missing or wrong;
 * - undefined: DNS did not answer for some record and none is known to be bad, so nothing changes.
 */
export function verdictOf(records: CheckedRecord[]): 'verified' | 'failing' | undefined {
  const required = records.filter((r) => r.required);
  if (required.some((r) => r.status === 'missing' || r.status === 'wrong')) return 'failing';
  if (required.every((r) => r.status === 'ok')) return 'verified';
  return undefined;
}
