import { SMTPServer } from 'smtp-server';
import { simpleParser } from 'mailparser';
import nodemailer from 'nodemailer';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';

/** A mail an agent sent to an outside address, as the catcher received it. */
export interface CaughtMail {
  id: string;
  messageId: string;
  from: string;
  to: string[];
  subject: string;
  text: string;
  references: string[];
  receivedAt: string;
}

const KEEP = 200;
const MAX_MESSAGE_BYTES = 10 * 1024 * 1024;

/**
 * Addresses the outside world does not have: any `.invalid` domain (RFC 2606) and any local part starting
 * with `bounce` (`bounce@example.org`, `bounce-test@...`). Mail to them is accepted and then returned to
 * its sender with a delivery status notification, as a real relay does when the final server refuses.
 */
export const isUndeliverable = (address: string) => /^bounce/i.test(address) || /\.invalid$/i.test(address);

/** An RFC 3464 delivery status notification for `recipients`, carrying the original message's headers. */
export function deliveryStatusNotification(input: { sender: string; recipients: string[]; originalHeaders: string; reportingHost: string }): string {
  const boundary = `dsn-${randomBytes(8).toString('hex')}`;
  const now = new Date().toUTCString();
  const perRecipient = input.recipients.map((r) => [
    `Final-Recipient: rfc822; ${r}`, `Original-Recipient: rfc822; ${r}`, 'Action: failed', 'Status: 5.1.1',
    `Remote-MTA: dns; ${r.slice(r.lastIndexOf('@') + 1)}`, `Diagnostic-Code: smtp; 550 5.1.1 <${r}>: Recipient address rejected: User unknown`,
  ].join('\r\n')).join('\r\n\r\n');
  return [
    `From: Mail Delivery System <MAILER-DAEMON@${input.reportingHost}>`, `To: ${input.sender}`, 'Subject: Undelivered Mail Returned to Sender',
    `Message-ID: <${randomBytes(12).toString('hex')}@${input.reportingHost}>`, `Date: ${now}`, 'Auto-Submitted: auto-replied', 'MIME-Version: 1.0',
    `Content-Type: multipart/report; report-type=delivery-status; boundary="${boundary}"`, '',
    `--${boundary}`, 'Content-Type: text/plain; charset=utf-8', '',
    `This is the mail system at ${input.reportingHost}. Your message could not be delivered to: ${input.recipients.join(', ')} (550 5.1.1 User unknown).`, '',
    `--${boundary}`, 'Content-Type: message/delivery-status', '',
    `Reporting-MTA: dns; ${input.reportingHost}`, `Arrival-Date: ${now}`, '', perRecipient, '',
    `--${boundary}`, 'Content-Type: text/rfc822-headers', '', input.originalHeaders.trimEnd(), '',
    `--${boundary}--`, '',
  ].join('\r\n');
}

/**
 * `agentgate dev`'s stand-in for the outside world's mail servers, as the local chat workspace stands in
 * for Slack: a real SMTP receiver on loopback that the backend relays outside addresses to
 * (SMTP_RELAY_URL), and a person answers from the dev server's /dev/mail page, as that outside address,
 * back into the agent's inbox. It keeps the last 200 mails, in a file when given one.
 */
export class MailCatcher {
  private mails: CaughtMail[] = [];
  private server: SMTPServer | undefined;
  private bounceTarget: { host: string; port: number } | undefined;
  port = 0;

  constructor(private readonly options: { port?: number; stateFile?: string } = {}) {
    if (options.stateFile && existsSync(options.stateFile)) {
      try { this.mails = JSON.parse(readFileSync(options.stateFile, 'utf8')) as CaughtMail[]; } catch { this.mails = []; }
    }
  }

  async start(): Promise<this> {
    this.server = new SMTPServer({
      authOptional: true, hideSTARTTLS: true, logger: false, disabledCommands: ['AUTH'], size: MAX_MESSAGE_BYTES,
      onData: (stream, session, callback) => {
        const chunks: Buffer[] = [];
        stream.on('data', (chunk: Buffer) => chunks.push(chunk));
        stream.once('error', (err) => callback(err));
        stream.once('end', () => this.receive(Buffer.concat(chunks), session).then(() => callback(null), (err: Error) => callback(err)));
      },
    });
    await new Promise<void>((resolve, reject) => {
      // SMTPServer re-emits its net server's errors on itself: listened for there, or a port in use is
      // an unhandled 'error' event (a stack trace) instead of a rejection the caller can explain.
      this.server!.once('error', reject);
      this.server!.listen(this.options.port ?? 0, '127.0.0.1', () => resolve());
    });
    this.port = (this.server.server.address() as AddressInfo).port;
    return this;
  }

  /** Where bounces for undeliverable addresses go: the backend's inbound listener (set once it runs). */
  returnBouncesTo(inbound: { host: string; port: number }): void {
    this.bounceTarget = inbound;
  }

  private async receive(raw: Buffer, session: { envelope: { mailFrom: { address: string } | false; rcptTo: Array<{ address: string }> } }): Promise<void> {
    const sender = (session.envelope.mailFrom || { address: '' }).address;
    const recipients = session.envelope.rcptTo.map((r) => r.address);
    const undeliverable = recipients.filter(isUndeliverable);
    if (undeliverable.length && sender && this.bounceTarget) {
      // Accepted, then returned: the DSN goes out after this transaction has ended, as a relay's would.
      const target = this.bounceTarget;
      const crlf = raw.indexOf('\r\n\r\n');
      const originalHeaders = raw.subarray(0, crlf >= 0 ? crlf : Math.min(raw.length, 8192)).toString('utf8');
      setImmediate(() => {
        const transport = nodemailer.createTransport({ host: target.host, port: target.port, secure: false, ignoreTLS: true, name: 'catcher.localhost' });
        transport.sendMail({
          envelope: { from: 'mailer-daemon@catcher.localhost', to: [sender] },
          raw: deliveryStatusNotification({ sender, recipients: undeliverable, originalHeaders, reportingHost: 'catcher.localhost' }),
        }).catch(() => {}).finally(() => transport.close());
      });
    }
    if (undeliverable.length === recipients.length) return;
    const parsed = await simpleParser(raw);
    const references = typeof parsed.references === 'string' ? [parsed.references] : parsed.references ?? [];
    this.keep({
      id: randomBytes(8).toString('hex'),
      messageId: parsed.messageId ?? `<caught-${Date.now()}@catcher.local>`,
      from: sender,
      to: recipients.filter((r) => !isUndeliverable(r)),
      subject: parsed.subject ?? '',
      text: (parsed.text ?? '').slice(0, 100_000),
      references,
      receivedAt: new Date().toISOString(),
    });
  }

  /** Where the backend relays mail for outside addresses. */
  get relayUrl(): string { return `smtp://127.0.0.1:${this.port}`; }

  /** Newest first. */
  list(): CaughtMail[] { return [...this.mails].reverse(); }

  get(id: string): CaughtMail | undefined { return this.mails.find((m) => m.id === id); }

  /**
   * A person's answer, sent as one of the mail's outside recipients to its sender (the agent), threaded
   * by In-Reply-To and References, over SMTP to the backend's inbound listener.
   */
  async reply(mail: CaughtMail, input: { as: string; text: string }, inbound: { host: string; port: number }): Promise<void> {
    const transport = nodemailer.createTransport({ host: inbound.host, port: inbound.port, secure: false, ignoreTLS: true });
    await transport.sendMail({
      from: input.as, to: mail.from, subject: mail.subject.startsWith('Re:') ? mail.subject : `Re: ${mail.subject}`, text: input.text,
      inReplyTo: mail.messageId, references: [...mail.references, mail.messageId],
    });
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private keep(mail: CaughtMail): void {
    this.mails = [...this.mails, mail].slice(-KEEP);
    if (this.options.stateFile) writeFileSync(this.options.stateFile, JSON.stringify(this.mails), { mode: 0o600 });
  }
}
