import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { SMTPServer, type SMTPServerDataStream, type SMTPServerSession } from 'smtp-server';
import { ConfigError, type Config } from '../platform/config.js';
import type { Logger } from '../platform/logger.js';
import type { MailService } from './mail-service.js';
import { parseInbound } from './inbound.js';
import type { SmtpPeer } from './mail-auth.js';

export interface SmtpListener {
  host: string;
  port: number;
  close(): Promise<void>;
}

/** An error smtp-server answers the client with: `responseCode` and the message. */
export const smtpError = (responseCode: number, message: string) => Object.assign(new Error(message), { responseCode });

/**
 * Listens on `host`:`port` and answers the port it got (0 picks one); a port in use is said so, naming the
 * setting that moves it.
 */
export async function listenSmtp(server: SMTPServer, host: string, port: number, setting: string): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    const failed = (err: NodeJS.ErrnoException) => {
      if (err.code === 'EADDRINUSE') err.message = `SMTP port ${port} on ${host} is already in use: set ${setting} to another port`;
      reject(err);
    };
    server.server.once('error', failed);
    server.listen(port, host, () => { server.server.off('error', failed); resolve(); });
  });
  return (server.server.address() as AddressInfo).port;
}

/** dev: 2525 on loopback; production: port 25 on every interface; SMTP_PORT=0 picks a free port. */
export function smtpListenAddress(config: Config): { host: string; port: number } {
  return {
    host: config.SMTP_HOST ?? (config.mode === 'dev' ? '127.0.0.1' : '0.0.0.0'),
    port: config.SMTP_PORT ?? (config.mode === 'dev' ? 2525 : 25),
  };
}

/** The certificate STARTTLS offers (the inbound listener and submission alike), when one is configured. */
export function tlsOptions(config: Config): { key: Buffer; cert: Buffer } | undefined {
  const { SMTP_TLS_CERT_FILE: certFile, SMTP_TLS_KEY_FILE: keyFile } = config;
  if (!certFile && !keyFile) return undefined;
  if (!certFile || !keyFile) throw new ConfigError('configuration error: SMTP_TLS_CERT_FILE and SMTP_TLS_KEY_FILE must be given together');
  return { cert: readFileSync(certFile), key: readFileSync(keyFile) };
}

export interface SmtpListenerDeps {
  config: Config;
  log: Logger;
  mail: MailService;
}

/**
 * The inbound MX for `{MAIL_DOMAIN}`: accepts RCPT only for live inboxes, caps size and recipient count,
 * parses each message once and stores a copy in every recipient's inbox. STARTTLS is offered when a
 * certificate is configured; no AUTH (this is where the world delivers to us, not a submission port).
 */
export async function startSmtpListener(deps: SmtpListenerDeps): Promise<SmtpListener> {
  const { config, mail } = deps;
  const log = deps.log.child({ area: 'smtp' });
  const domain = config.MAIL_DOMAIN.toLowerCase();
  const tls = tlsOptions(config);
  const server = new SMTPServer({
    name: config.MAIL_DOMAIN,
    banner: 'agentgate inbound mail',
    size: config.SMTP_MAX_MESSAGE_BYTES,
    rejectOversized: true,
    authOptional: true,
    disabledCommands: ['AUTH'],
    ...(tls ? tls : { hideSTARTTLS: true }),
    logger: false,
    closeTimeout: 2_000,
    socketTimeout: 60_000,
    maxClients: 200,

    onRcptTo(address, session, callback) {
      if (session.envelope.rcptTo.length >= config.SMTP_MAX_RECIPIENTS) {
        return callback(smtpError(452, `Too many recipients (at most ${config.SMTP_MAX_RECIPIENTS} per message)`));
      }
      const recipient = address.address.toLowerCase();
      const recipientDomain = recipient.slice(recipient.lastIndexOf('@') + 1);
      // Ours: the service's domain, and the orgs' own domains while they are verified (domains/).
      mail.mailboxOf(recipient).then(async (identity) => {
        if (!identity) {
          const served = recipientDomain === domain || await mail.domains.isVerified(recipientDomain);
          return callback(smtpError(550, served ? `No such mailbox: ${recipient}` : `Relaying denied: ${recipientDomain} is not a domain this server receives mail for`));
        }
        // Over its org's quota the mailbox is full (RFC 3463 4.2.2): a temporary refusal, retried by the sender.
        const full = await mail.receivingRefusal(identity.orgId);
        callback(full ? smtpError(452, `4.2.2 ${recipient}: ${full}, try again later`) : null);
      }).catch(() => callback(smtpError(451, 'Temporary failure looking up the mailbox, try again later')));
    },

    onData(stream: SMTPServerDataStream, session: SMTPServerSession, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => { if (!stream.sizeExceeded) chunks.push(chunk); });
      stream.once('error', (err) => callback(err));
      stream.once('end', () => {
        if (stream.sizeExceeded) {
          return callback(smtpError(552, `Message exceeds the maximum size of ${config.SMTP_MAX_MESSAGE_BYTES} bytes`));
        }
        // What the SMTP conversation itself says about the client: the connecting address, its HELO and
        // MAIL FROM. Received headers are the sender's own words and are never read for this.
        const peer: SmtpPeer = {
          ip: session.remoteAddress.replace(/^::ffff:/, ''),
          helo: session.hostNameAppearsAs ?? '',
          mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
        };
        deliverLocally(deps, Buffer.concat(chunks), peer, session.envelope.rcptTo.map((r) => r.address.toLowerCase())).then(
          () => callback(null, 'Message accepted'),
          (err) => {
            log.error({ err, recipients: session.envelope.rcptTo.length }, 'storing inbound mail failed');
            callback(smtpError(451, 'Temporary failure storing the message, try again later'));
          },
        );
      });
    },
  });
  server.on('error', (err) => log.error({ err }, 'SMTP listener error'));

  const { host, port } = smtpListenAddress(config);
  const actualPort = await listenSmtp(server, host, port, 'SMTP_PORT');
  mail.delivery.useLocalListener({ host: host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host, port: actualPort });
  return {
    host,
    port: actualPort,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

async function deliverLocally({ mail }: Pick<SmtpListenerDeps, 'mail'>, received: Buffer, peer: SmtpPeer, recipients: string[]): Promise<void> {
  // Mail from one of our own inboxes comes with the trusted path's stamp; anything else is checked
  // against DNS. Authentication never throws: a DNS outage is a temperror verdict, the mail is still kept.
  const { authenticator } = mail;
  const { raw, internal } = authenticator.openInternal(received, peer.mailFrom);
  const sender = internal ? await mail.mailboxOf(peer.mailFrom) : null;
  const authentication = sender ? authenticator.internalVerdict() : await authenticator.verify(raw, peer);
  const message = { ...await parseInbound(raw, () => mail.newMessageId()), authentication, ...(sender ? { senderOrgId: sender.orgId } : {}) };
  for (const address of new Set(recipients)) {
    const identity = await mail.mailboxOf(address);
    // Revoked between RCPT and DATA: the mail is simply not stored for that inbox.
    if (identity) await mail.receive(identity, message);
  }
}
