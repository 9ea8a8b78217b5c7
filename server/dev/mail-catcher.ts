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
 * `agentgate dev`'s stand-in for the outside world's mail servers, as the local chat workspace stands in
 * for Slack: a real SMTP receiver on loopback that the backend relays outside addresses to
 * (SMTP_RELAY_URL), and a person answers from the dev server's /dev/mail page, as that outside address,
 * back into the agent's inbox. It keeps the last 200 mails, in a file when given one.
 */
export class MailCatcher {
  private mails: CaughtMail[] = [];
  private server: SMTPServer | undefined;
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
        simpleParser(stream).then((parsed) => {
          const references = typeof parsed.references === 'string' ? [parsed.references] : parsed.references ?? [];
          this.keep({
            id: randomBytes(8).toString('hex'),
            messageId: parsed.messageId ?? `<caught-${Date.now()}@catcher.local>`,
            from: (session.envelope.mailFrom as { address: string } | false || { address: '' }).address,
            to: session.envelope.rcptTo.map((r) => r.address),
            subject: parsed.subject ?? '',
            text: (parsed.text ?? '').slice(0, 100_000),
            references,
            receivedAt: new Date().toISOString(),
          });
          callback(null);
        }, (err: Error) => callback(err));
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
