import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { Schema, type Connection, type Model } from 'mongoose';
import { sha256Hex } from '../platform/keys.js';
import { newId } from '../platform/ids.js';

/** How long a console sign-in lasts; the expiry is checked on every request, the TTL index only cleans up. */
export const SESSION_TTL_MS = 12 * 60 * 60 * 1000;

export type ConsoleRole = 'admin' | 'viewer';

export interface ConsoleSessionDoc {
  _id: string;
  /** SHA-256 of the random token in the cookie: a copy of this collection signs nobody in. */
  tokenHash: string;
  orgId: string;
  /** The API key signed in with; revoking it ends the session (checked per request, and deleted on revoke). */
  keyId: string;
  role: ConsoleRole;
  createdAt: Date;
  expiresAt: Date;
}

const schema = new Schema<ConsoleSessionDoc>({
  _id: String,
  tokenHash: { type: String, required: true, unique: true },
  orgId: { type: String, required: true },
  keyId: { type: String, required: true, index: true },
  role: { type: String, required: true },
  createdAt: { type: Date, required: true },
  expiresAt: { type: Date, required: true },
}, { versionKey: false });
schema.index({ expiresAt: 1 }, { expireAfterSeconds: 0 });

export interface LiveSession extends ConsoleSessionDoc {
  /** The per-session CSRF token every console form carries. */
  csrfToken: string;
}

/**
 * Console sign-ins. The browser holds only a random 256-bit token; the database holds its hash. The CSRF
 * token is derived from the session token (an HMAC), so it is bound to the session, needs no storage, and
 * cannot be computed from anything in the database.
 */
export class ConsoleSessions {
  private readonly sessions: Model<ConsoleSessionDoc>;

  constructor(conn: Connection) {
    this.sessions = conn.models.ConsoleSession ?? conn.model<ConsoleSessionDoc>('ConsoleSession', schema, 'console_sessions');
  }

  async create(owner: { orgId: string; keyId: string; role: ConsoleRole }): Promise<{ token: string; expiresAt: Date }> {
    const token = randomBytes(32).toString('base64url');
    const now = new Date();
    const expiresAt = new Date(now.getTime() + SESSION_TTL_MS);
    await this.sessions.create({ _id: newId('cs'), tokenHash: sha256Hex(token), ...owner, createdAt: now, expiresAt });
    return { token, expiresAt };
  }

  /** The unexpired session behind a cookie token, or null. */
  async resolve(token: string | undefined): Promise<LiveSession | null> {
    if (!token || !/^[A-Za-z0-9_-]{43}$/.test(token)) return null;
    const doc = await this.sessions.findOne({ tokenHash: sha256Hex(token), expiresAt: { $gt: new Date() } }).lean();
    return doc ? { ...doc, csrfToken: csrfTokenOf(token) } : null;
  }

  async end(sessionId: string): Promise<void> {
    await this.sessions.deleteOne({ _id: sessionId });
  }

  /** Every session signed in with this key (the key was revoked). */
  async endAllFor(keyId: string): Promise<void> {
    await this.sessions.deleteMany({ keyId });
  }
}

export const csrfTokenOf = (sessionToken: string) => createHmac('sha256', sessionToken).update('agentgate-console-csrf').digest('base64url');

/** Constant-time comparison of a submitted CSRF token with the session's. */
export function csrfMatches(session: LiveSession, submitted: unknown): boolean {
  if (typeof submitted !== 'string') return false;
  const a = Buffer.from(submitted);
  const b = Buffer.from(session.csrfToken);
  return a.length === b.length && timingSafeEqual(a, b);
}
