import { createHash } from 'node:crypto';
import { SMTPServer, type SMTPServerAuthentication, type SMTPServerSession } from 'smtp-server';
import type { ApiKeyService } from '../platform/auth/api-keys.js';
import type { IdentityService } from '../identities/identity-service.js';
import { AppError, isDuplicateKey } from '../platform/errors.js';
import type { Config } from '../platform/config.js';
import type { Logger } from '../platform/logger.js';
import type { MailService } from './mail-service.js';
import { parseInbound } from './inbound.js';
import { listenSmtp, smtpError, smtpListenAddress, tlsOptions } from './smtp-listener.js';

// SMTP submission (RFC 6409) for any mail client: port 587 with STARTTLS and, given a certificate, 465
// with TLS from the first byte. A client logs in with AUTH PLAIN or LOGIN, its identity key as the
// password, and sends as one of the identity's own addresses. What it submits is sent as
// POST /v0/messages/send is: the same approval policy, quotas, threading, DKIM, sent label and events.

export interface SubmissionListener {
  port: number;
  /** The implicit-TLS port (465), when one was asked for. */
  tlsPort?: number;
  close(): Promise<void>;
}

export interface SubmissionDeps {
  config: Config;
  log: Logger;
  keys: Pick<ApiKeyService, 'resolve'>;
  identities: Pick<IdentityService, 'getLive'>;
  mail: MailService;
}

/** The identity an AUTH logged in as (smtp-server keeps it on the session as `user`). */
interface SubmissionUser { identityId: string }

const userOf = (session: SMTPServerSession) => session.user as unknown as SubmissionUser;

/**
 * The submission listeners, when SMTP_SUBMISSION_PORT (and SMTP_SUBMISSIONS_PORT) is set. Passwords are
 * identity keys: in production they are taken only over TLS (STARTTLS, or port 465), so the listener
 * refuses to start there without a certificate; `agentgate dev` takes them in the clear on loopback.
 */
export async function startSubmission(deps: SubmissionDeps): Promise<SubmissionListener | undefined> {
  const { config, keys, identities, mail } = deps;
  if (config.SMTP_SUBMISSION_PORT === undefined && config.SMTP_SUBMISSIONS_PORT === undefined) return undefined;
  const log = deps.log.child({ area: 'smtp-submission' });
  const tls = tlsOptions(config);
  const { host } = smtpListenAddress(config);

  const options = (secure: boolean): ConstructorParameters<typeof SMTPServer>[0] => ({
    name: config.MAIL_DOMAIN,
    banner: 'agentgate mail submission',
    secure,
    ...(tls ? tls : { hideSTARTTLS: true }),
    authMethods: ['PLAIN', 'LOGIN'],
    // In the clear only where there is no certificate, which production refuses (config.ts).
    allowInsecureAuth: !tls,
    size: config.SMTP_MAX_MESSAGE_BYTES,
    logger: false,
    closeTimeout: 2_000,
    socketTimeout: 60_000,
    maxClients: 200,

    onAuth(auth: SMTPServerAuthentication, _session, callback) {
      const refuse = () => callback(smtpError(535, '5.7.8 Authentication credentials invalid: the password is an identity key with mail:send, the user name one of its addresses'));
      (async () => {
        const key = auth.password ? await keys.resolve(auth.password) : null;
        const identity = key?.tier === 'identity' && key.identityId ? await identities.getLive(key.identityId) : null;
        if (!identity || !identity.scopes.includes('mail:send')) return refuse();
        // The user name says which mailbox the client thinks it logs into: it must be one of this identity's.
        const named = (auth.username ?? '').trim().toLowerCase();
        if (named !== identity._id && (await mail.mailboxOf(named))?._id !== identity._id) return refuse();
        callback(null, { user: { identityId: identity._id } as unknown as string });
      })().catch((err) => {
        log.error({ err }, 'submission login failed');
        callback(smtpError(454, '4.7.0 Temporary authentication failure, try again later'));
      });
    },

    onMailFrom(address, session, callback) {
      if (!session.user) return callback(smtpError(530, '5.7.0 Authentication required'));
      mail.fromAddress(userOf(session).identityId, address.address).then(
        () => callback(),
        (err) => callback(err instanceof AppError && err.status === 403
          ? smtpError(553, `5.7.1 ${address.address} is not one of your addresses (an address on a domain of your org is yours only while the domain is verified)`)
          : smtpError(451, '4.3.0 Temporary failure checking the sender, try again later')),
      );
    },

    onRcptTo(_address, session, callback) {
      if (session.envelope.rcptTo.length >= config.SMTP_MAX_RECIPIENTS) {
        return callback(smtpError(452, `4.5.3 Too many recipients (at most ${config.SMTP_MAX_RECIPIENTS} per message)`));
      }
      callback();
    },

    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => { if (!stream.sizeExceeded) chunks.push(chunk); });
      stream.once('error', (err) => callback(err));
      stream.once('end', () => {
        if (stream.sizeExceeded) return callback(smtpError(552, `5.3.4 Message exceeds the maximum size of ${config.SMTP_MAX_MESSAGE_BYTES} bytes`));
        submit(deps, userOf(session).identityId, Buffer.concat(chunks), session).then(
          (answer) => callback(null, answer),
          (err) => {
            const refusal = refusalOf(err);
            if (!refusal) log.error({ err }, 'submitted mail failed');
            callback(refusal ?? smtpError(451, '4.3.0 Temporary failure sending the message, try again later'));
          },
        );
      });
    },
  });

  const listen = async (server: SMTPServer, port: number, setting: string) => {
    const actual = await listenSmtp(server, host, port, setting);
    server.on('error', (err) => log.error({ err }, 'SMTP submission listener error'));
    return actual;
  };
  const servers: SMTPServer[] = [];
  const close = () => Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve())))).then(() => {});
  try {
    let port = -1;
    let tlsPort: number | undefined;
    if (config.SMTP_SUBMISSION_PORT !== undefined) {
      const server = new SMTPServer(options(false));
      servers.push(server);
      port = await listen(server, config.SMTP_SUBMISSION_PORT, 'SMTP_SUBMISSION_PORT');
    }
    if (config.SMTP_SUBMISSIONS_PORT !== undefined) {
      const server = new SMTPServer(options(true));
      servers.push(server);
      tlsPort = await listen(server, config.SMTP_SUBMISSIONS_PORT, 'SMTP_SUBMISSIONS_PORT');
    }
    return { port, ...(tlsPort !== undefined ? { tlsPort } : {}), close };
  } catch (err) {
    await close();
    throw err;
  }
}

/** An error of ours that is the client's to fix (a quota, a refused recipient), as the SMTP reply that says so. */
function refusalOf(err: unknown): Error | undefined {
  if (!(err instanceof AppError)) return undefined;
  if (err.status === 429) return smtpError(452, `4.5.3 ${err.message}`);
  if (err.status === 413) return smtpError(552, `5.3.4 ${err.message}`);
  if (err.status >= 400 && err.status < 500) return smtpError(550, `5.7.1 ${err.message}`);
  return undefined;
}

/**
 * Sends what the client submitted. Its recipients are the envelope's (those on neither To nor Cc go as
 * Bcc); the From header must be the envelope sender. A client that sends the same message again (its
 * connection dropped before our answer) gets the first send's answer: the sent message's id is derived
 * from the identity and the client's Message-ID, and a second insert of it is refused.
 */
async function submit({ mail }: SubmissionDeps, identityId: string, raw: Buffer, session: SMTPServerSession): Promise<string> {
  const envelopeFrom = session.envelope.mailFrom ? session.envelope.mailFrom.address.toLowerCase() : '';
  const parsed = await parseInbound(raw, () => '');
  const headerFrom = parsed.from[0]?.toLowerCase();
  if (parsed.from.length !== 1 || headerFrom !== envelopeFrom) {
    throw new AppError(403, 'from_not_allowed', `The From header (${parsed.from.join(', ') || 'none'}) must be the address you send as (${envelopeFrom})`);
  }
  const recipients = session.envelope.rcptTo.map((r) => r.address);
  const listed = new Set([...parsed.to, ...parsed.cc].map((a) => a.toLowerCase()));
  const onEnvelope = new Set(recipients.map((a) => a.toLowerCase()));
  const message = {
    to: parsed.to.filter((a) => onEnvelope.has(a.toLowerCase())), cc: parsed.cc.filter((a) => onEnvelope.has(a.toLowerCase())),
    bcc: recipients.filter((a) => !listed.has(a.toLowerCase())),
    subject: parsed.subject, text: parsed.text, ...(parsed.html !== undefined ? { html: parsed.html } : {}),
    ...(parsed.inReplyTo ? { inReplyTo: parsed.inReplyTo } : {}), references: parsed.references, attachments: parsed.attachments,
  };
  const id = parsed.messageId ? `msg_${createHash('sha256').update(`submission:${identityId}:${parsed.messageId}`).digest('hex').slice(0, 24)}` : undefined;
  try {
    const outcome = await mail.submitChecked(identityId, envelopeFrom, message, id ? { id } : {});
    return 'sent' in outcome ? `2.0.0 Ok: sent as ${outcome.sent.messageId}` : `2.0.0 Ok: held for approval as draft ${outcome.held.draft._id}`;
  } catch (err) {
    if (id && isDuplicateKey(err)) return '2.0.0 Ok: this message was sent already';
    throw err;
  }
}
