import { readFileSync } from 'node:fs';
import type { ServiceEvents } from '../platform/events.js';
import nodemailer, { type Transporter } from 'nodemailer';
import type { Model } from 'mongoose';
import type { Config } from '../platform/config.js';
import type { JobRun } from '../platform/jobs.js';
import type { Delivery, OutboundDoc, RecipientResult } from './message-model.js';
import type { AttachmentStore } from './attachment-store.js';
import type { MailAuthenticator } from './mail-auth.js';

export const DELIVER_JOB = 'mail.deliver';
/** After a temporary failure (4xx reply, relay unreachable): retry after 1 s, 10 s, 1 min, 5 min, 30 min, 3 h. */
export const MAIL_RETRY_DELAYS_MS = [1_000, 10_000, 60_000, 300_000, 1_800_000, 10_800_000] as const;

interface SmtpFailure extends Error {
  code?: string;
  responseCode?: number;
  response?: string;
  recipient?: string;
  rejectedErrors?: SmtpFailure[];
}

const describe = (err: SmtpFailure) => (err.response ?? err.message).slice(0, 500);
const domainOf = (address: string) => address.slice(address.lastIndexOf('@') + 1).toLowerCase();

/** What delivery asks of the custom mail domains (domains/domain-service.ts). */
export interface MailDomainsForDelivery {
  /** Whether mail for this domain is ours (a custom domain verified now): delivered to our own listener. */
  isVerified(name: string): Promise<boolean>;
  /** The DKIM key mail from this custom domain is signed with while it is verified. */
  signingKey(name: string): Promise<{ domainName: string; keySelector: string; privateKey: string } | undefined>;
}

/**
 * Hands sent messages to SMTP. Mail for our own domain goes to our own listener over real SMTP, so two
 * identities on one server mail each other exactly as they would mail anyone; other domains go to the
 * configured relay, DKIM-signed when a key is configured. Each recipient's outcome is kept in the message's
 * outbound record.
 */
export class MailDelivery {
  private loopback: { host: string; port: number } | undefined;
  private dkimKey: string | undefined;

  constructor(private readonly outbound: Model<OutboundDoc>, private readonly config: Config, private readonly store: AttachmentStore,
    private readonly authenticator: MailAuthenticator,
    private readonly domains: MailDomainsForDelivery,
    private readonly events?: ServiceEvents,
    /** Told every recipient whose outcome is settled, after each recorded attempt (it may hear one twice). */
    private readonly onSettled?: (id: string, settled: RecipientResult[]) => Promise<void>) {
    if (config.DKIM_PRIVATE_KEY_FILE) this.dkimKey = readFileSync(config.DKIM_PRIVATE_KEY_FILE, 'utf8');
  }

  /** Where our own inbound listener accepts mail; set when the listener starts in this process. */
  useLocalListener(address: { host: string; port: number }): void {
    this.loopback = address;
  }

  /** Where our own inbound SMTP listener is reached (the readiness probe connects to it). */
  inboundListener(): { host: string; port: number } {
    return this.localListener();
  }

  private localListener(): { host: string; port: number } {
    if (this.loopback) return this.loopback;
    const host = this.config.SMTP_HOST && this.config.SMTP_HOST !== '0.0.0.0' ? this.config.SMTP_HOST : '127.0.0.1';
    return { host, port: this.config.SMTP_PORT || (this.config.mode === 'dev' ? 2525 : 25) };
  }

  /**
   * The recipient domains that are ours: the service's mail domain, and custom domains verified now (their
   * MX is us: going out would loop back). One lookup per domain, however many recipients share it.
   */
  private async localDomains(addresses: string[]): Promise<Set<string>> {
    const domains = [...new Set(addresses.map(domainOf))];
    const ours = await Promise.all(domains.map((d) => d === this.config.MAIL_DOMAIN.toLowerCase() || this.domains.isVerified(d)));
    return new Set(domains.filter((_, i) => ours[i]));
  }

  /**
   * How mail from `from` is DKIM-signed for other domains: a custom domain with its own key (undefined
   * when it is not verified any more: such mail is not sent), the service's domain with DKIM_PRIVATE_KEY_FILE.
   */
  private async signing(from: string): Promise<{ dkim?: { domainName: string; keySelector: string; privateKey: string } } | undefined> {
    const domain = domainOf(from);
    if (domain !== this.config.MAIL_DOMAIN.toLowerCase()) {
      const key = await this.domains.signingKey(domain);
      return key && { dkim: key };
    }
    return this.dkimKey ? { dkim: { domainName: this.config.MAIL_DOMAIN, keySelector: this.config.DKIM_SELECTOR, privateKey: this.dkimKey } } : {};
  }

  async deliver(id: string, run: JobRun): Promise<void> {
    const message = await this.outbound.findById(id).select('+raw').lean();
    if (!message) return; // deleted meanwhile: nothing to deliver
    const raw = message.rawFileId ? (await this.store.read(message.rawFileId)).toString('utf8') : message.raw;
    const recipients = message.recipients.map((r) => ({ ...r }));
    const pending = recipients.filter((r) => r.status === 'pending').map((r) => r.address);
    const localDomains = await this.localDomains(pending);
    const local = pending.filter((a) => localDomains.has(domainOf(a)));
    const remote = pending.filter((a) => !localDomains.has(domainOf(a)));
    let temporary: SmtpFailure | undefined;

    const settle = (addresses: string[], outcome: (address: string) => Omit<RecipientResult, 'address'> | undefined) => {
      for (const r of recipients) if (addresses.includes(r.address)) Object.assign(r, outcome(r.address) ?? {});
    };
    const attempt = async (addresses: string[], transport: () => Transporter, bytes = raw) => {
      if (!addresses.length) return;
      const outcome = await this.sendOver(transport(), message.from, addresses, bytes);
      settle(addresses, (a) => outcome.get(a));
      const stillPending = addresses.filter((a) => !outcome.has(a));
      if (stillPending.length) temporary = outcome.temporary;
    };

    // Our own inboxes get the trusted path's stamp: verified by construction, no DNS involved.
    await attempt(local, () => nodemailer.createTransport({ ...this.localListener(), secure: false, ignoreTLS: true, name: this.config.MAIL_DOMAIN }),
      local.length ? this.authenticator.stampInternal(raw, message.from) : raw);
    const signing = remote.length ? await this.signing(message.from) : undefined;
    if (remote.length && !this.config.SMTP_RELAY_URL) {
      settle(remote, () => ({ status: 'failed', error: 'No SMTP relay is configured for other domains (SMTP_RELAY_URL)' }));
    } else if (remote.length && !signing) {
      settle(remote, () => ({ status: 'failed', error: `Not sent: ${domainOf(message.from)} is not verified now, so mail from it cannot be signed (GET /v0/domains shows its records)` }));
    } else {
      await attempt(remote, () => nodemailer.createTransport(this.config.SMTP_RELAY_URL!, signing ?? {}));
    }

    const lastError = temporary ? describe(temporary) : recipients.find((r) => r.status === 'failed')?.error;
    await this.record(id, recipients, run.attempt, lastError);
    if (temporary) throw temporary;
  }

  /** Retries are exhausted: whoever is still pending has failed for good. */
  async giveUp(id: string, error: Error): Promise<void> {
    const message = await this.outbound.findById(id).lean();
    if (!message) return;
    const recipients = message.recipients.map((r) => (r.status === 'pending'
      ? { ...r, status: 'failed' as const, error: r.error ?? describe(error) } : r));
    await this.record(id, recipients, message.attempts, describe(error));
  }

  private async record(id: string, recipients: RecipientResult[], attempts: number, lastError: string | undefined) {
    const delivered = recipients.filter((r) => r.status === 'delivered').length;
    const failed = recipients.filter((r) => r.status === 'failed').length;
    const computed: Delivery['status'] = delivered === recipients.length ? 'delivered'
      : delivered + failed < recipients.length ? 'retrying'
        : delivered === 0 ? 'failed' : 'partially_failed';
    const delivery: Delivery = { status: computed, attempts, recipients, updatedAt: new Date(), ...(lastError ? { lastError } : {}) };
    await this.outbound.updateOne({ _id: id }, { $set: delivery });
    await this.onSettled?.(id, recipients.filter((r) => r.status !== 'pending'));
    this.events?.emit({ category: 'mail', line: `mail: delivery ${computed} (attempt ${attempts}) to ${recipients.map((r) => `${r.address} ${r.status}`).join(', ')}${lastError && computed !== 'delivered' ? `: ${lastError}` : ''}` });
  }

  /**
   * One SMTP transaction. Returns the settled recipients (delivered, or failed with a 5xx); recipients
   * missing from the map were deferred (4xx, connection trouble) and `temporary` says why.
   */
  private async sendOver(transport: Transporter, from: string, to: string[], raw: string) {
    const outcome = new Map<string, RecipientResult>() as Map<string, RecipientResult> & { temporary?: SmtpFailure };
    const classify = (err: SmtpFailure, address: string) => {
      if (err.responseCode && err.responseCode >= 500) outcome.set(address, { address, status: 'failed', error: describe(err) });
      else outcome.temporary = err;
    };
    try {
      const info = await transport.sendMail({ envelope: { from, to }, raw });
      for (const address of info.accepted as string[]) outcome.set(address, { address, status: 'delivered' });
      for (const err of (info as { rejectedErrors?: SmtpFailure[] }).rejectedErrors ?? []) classify(err, err.recipient ?? '');
    } catch (err) {
      const failure = err as SmtpFailure;
      if (failure.rejectedErrors?.length) for (const e of failure.rejectedErrors) classify(e, e.recipient ?? '');
      else for (const address of to) classify(failure, address);
      if (!outcome.temporary && outcome.size < to.length) outcome.temporary = failure;
    } finally {
      transport.close();
    }
    return outcome;
  }
}
