import { randomBytes } from 'node:crypto';
import { sha256Hex } from '../platform/keys.js';
import type { Connection, Model } from 'mongoose';
import type { Config } from '../platform/config.js';
import type { SecretBox } from '../platform/secret-box.js';
import type { ActivityLog } from '../platform/activity-log.js';
import type { IdentityService } from '../identities/identity-service.js';
import { AppError, isDuplicateKey } from '../platform/errors.js';
import { newId } from '../platform/ids.js';
import { decodeCursor, pageOf, sortKeyOf } from '../platform/pagination.js';
import {
  CHAT_CONNECTIONS_COLLECTION, chatConnectionSchema, chatInstallSchema, chatMessageSchema,
  type ChatConnectionDoc, type ChatInstallDoc, type ChatMessageDoc,
} from './chat-model.js';
import { ChatPlatformClient, type PlatformChannel } from './platform-client.js';

export interface ChatOwner { orgId: string; identityId: string }

/** SPEC 8: an install URL is valid for 15 minutes. */
export const INSTALL_TTL_SECONDS = 15 * 60;
/** Message subtypes that are something a person said; edits, deletions, joins and the like are not stored. */
const STORED_SUBTYPES = new Set([undefined, 'thread_broadcast', 'file_share', 'me_message']);

const tokenContext = (identityId: string) => `chat:${identityId}`;

export function presentConnection(connection: ChatConnectionDoc | null) {
  if (!connection) return { connected: false };
  return {
    connected: true, teamId: connection.teamId, teamName: connection.teamName, botUserId: connection.botUserId,
    scopes: connection.scopes, installedAt: connection.installedAt.toISOString(),
  };
}

export function presentChatMessage(message: ChatMessageDoc) {
  return {
    id: message._id, channelId: message.channelId, userId: message.userId, text: message.text, ts: message.ts,
    threadTs: message.threadTs ?? null, eventType: message.eventType, receivedAt: message.receivedAt.toISOString(),
  };
}

/** What the Events API pushes (the fields we read). */
export interface PlatformEventEnvelope {
  type: string;
  team_id?: string;
  api_app_id?: string;
  event?: {
    type: string; subtype?: string; channel?: string; user?: string; bot_id?: string; text?: string; ts?: string; thread_ts?: string;
  };
}

/**
 * One team-chat workspace per identity (SPEC 3.1, 4.3). A human installs the bot through an install URL
 * (the OAuth exchange happens between their browser, the platform and us; the agent never sees a token);
 * the agent then lists channels, sends, and polls what people wrote, which the platform pushes to us.
 */
export class ChatService {
  readonly connections: Model<ChatConnectionDoc>;
  readonly installs: Model<ChatInstallDoc>;
  readonly messages: Model<ChatMessageDoc>;
  private readonly platform: ChatPlatformClient;

  constructor(conn: Connection, private readonly config: Config, private readonly secrets: SecretBox,
    private readonly identities: IdentityService, private readonly logs: ActivityLog,
    /** Team chat is an admin preview (SPEC 1.5): only admin accounts' identities may use it. */
    private readonly isAdmin: (orgId: string) => Promise<boolean>) {
    this.connections = conn.models.ChatConnection ?? conn.model<ChatConnectionDoc>('ChatConnection', chatConnectionSchema, CHAT_CONNECTIONS_COLLECTION);
    this.installs = conn.models.ChatInstall ?? conn.model<ChatInstallDoc>('ChatInstall', chatInstallSchema, 'chat_installs');
    this.messages = conn.models.ChatMessage ?? conn.model<ChatMessageDoc>('ChatMessage', chatMessageSchema, 'chat_messages');
    this.platform = new ChatPlatformClient(config);
  }

  get enabled(): boolean {
    return !!(this.config.CHAT_CLIENT_ID && this.config.CHAT_CLIENT_SECRET && this.config.CHAT_SIGNING_SECRET);
  }

  get redirectUri(): string {
    return `${this.config.BASE_URL}/v0/chat/oauth/callback`;
  }

  private assertEnabled(): void {
    if (!this.enabled) {
      throw new AppError(503, 'chat_not_configured', 'The chat integration is not configured on this server (CHAT_CLIENT_ID, CHAT_CLIENT_SECRET, CHAT_SIGNING_SECRET)');
    }
  }

  private async log(owner: ChatOwner, action: string, description: string, metadata: Record<string, unknown> = {}, status: 'success' | 'failure' = 'success') {
    await this.logs.record({ ...owner, action, category: 'chat', description, status, metadata });
  }

  /** The gate of every agent-side call: 403 admin_preview for an org that is not an admin account. */
  private async assertAdmin(owner: ChatOwner): Promise<void> {
    if (!(await this.isAdmin(owner.orgId))) {
      throw new AppError(403, 'admin_preview', 'Team chat is an admin preview, enabled only for admin accounts; the operator makes an org an admin with `agentgate admin grant <orgId>` or ADMIN_ORG_IDS');
    }
  }

  async status(owner: ChatOwner) {
    await this.assertAdmin(owner);
    return presentConnection(await this.connections.findById(owner.identityId).lean());
  }

  /** Starts an install: a URL for a human to open within 15 minutes. */
  async connect(owner: ChatOwner): Promise<{ installUrl: string; expiresInSeconds: number; expiresAt: string }> {
    await this.assertAdmin(owner);
    this.assertEnabled();
    if (await this.connections.exists({ _id: owner.identityId })) {
      throw new AppError(409, 'already_connected', 'A chat workspace is already connected to this identity; DELETE /v0/chat/connection first to connect another');
    }
    const state = randomBytes(24).toString('base64url');
    const now = new Date();
    const expiresAt = new Date(now.getTime() + INSTALL_TTL_SECONDS * 1000);
    await this.installs.create({ _id: sha256Hex(state), ...owner, expiresAt, createdAt: now });
    this.installs.deleteMany({ expiresAt: { $lt: new Date(now.getTime() - 3600_000) } }).catch(() => {}); // housekeeping
    await this.log(owner, 'chat.connect_requested', 'Chat install URL issued', { expiresAt: expiresAt.toISOString() });
    return { installUrl: `${this.config.BASE_URL}/v0/chat/install/${state}`, expiresInSeconds: INSTALL_TTL_SECONDS, expiresAt: expiresAt.toISOString() };
  }

  /** Where the install URL sends the browser: the platform's consent page, or null when the URL is unknown or expired. */
  async authorizeUrlFor(state: string): Promise<string | null> {
    if (!this.enabled) return null;
    const install = await this.installs.exists({ _id: sha256Hex(state), expiresAt: { $gt: new Date() } });
    return install ? this.platform.authorizeUrl(state, this.redirectUri) : null;
  }

  /**
   * The platform sent the human back with a code (or a refusal). The state is consumed first, so an
   * install URL completes at most one install; the code itself is single-use at the platform too.
   */
  async completeInstall(input: { state: string; code?: string; error?: string }): Promise<{ teamName: string }> {
    this.assertEnabled();
    const install = await this.installs.findOneAndDelete({ _id: sha256Hex(input.state), expiresAt: { $gt: new Date() } }).lean();
    if (!install) throw new AppError(410, 'install_expired', 'This install link is unknown, expired or already used; ask the agent for a new one');
    const owner = { orgId: install.orgId, identityId: install.identityId };
    if (input.error || !input.code) {
      await this.log(owner, 'chat.install_declined', 'Chat install was cancelled in the browser', { error: input.error ?? 'no_code' }, 'failure');
      throw new AppError(400, 'install_declined', 'The install was cancelled; nothing was connected');
    }
    if (!(await this.identities.getLive(owner.identityId))) throw new AppError(410, 'install_expired', 'The identity this install was for no longer exists');
    const installed = await this.platform.exchangeCode(input.code, this.redirectUri);
    const previous = await this.connections.findById(owner.identityId).lean();
    const connection: ChatConnectionDoc = {
      _id: owner.identityId, orgId: owner.orgId, teamId: installed.teamId, teamName: installed.teamName, appId: installed.appId,
      botUserId: installed.botUserId, scopes: installed.scopes,
      botToken: this.secrets.seal(installed.accessToken, tokenContext(owner.identityId)), installedAt: new Date(),
    };
    await this.connections.replaceOne({ _id: owner.identityId }, connection, { upsert: true });
    if (previous) await this.platform.revoke(this.tokenOf(previous));
    await this.log(owner, 'chat.connected', `Chat workspace "${installed.teamName}" connected`, { teamId: installed.teamId, botUserId: installed.botUserId, scopes: installed.scopes });
    return { teamName: installed.teamName };
  }

  async disconnect(owner: ChatOwner) {
    await this.assertAdmin(owner);
    this.assertEnabled();
    const connection = await this.connections.findOneAndDelete({ _id: owner.identityId }).lean();
    if (!connection) throw notConnected();
    await this.platform.revoke(this.tokenOf(connection));
    await this.installs.deleteMany({ identityId: owner.identityId });
    await this.log(owner, 'chat.disconnected', `Chat workspace "${connection.teamName}" disconnected`, { teamId: connection.teamId, reason: 'requested' });
    return { connected: false };
  }

  async channels(owner: ChatOwner): Promise<PlatformChannel[]> {
    await this.assertAdmin(owner);
    return this.withToken(owner, (token) => this.platform.listChannels(token));
  }

  async send(owner: ChatOwner, input: { channel: string; text: string; threadTs?: string }): Promise<{ channel: string; ts: string }> {
    await this.assertAdmin(owner);
    try {
      const sent = await this.withToken(owner, (token) => this.platform.postMessage(token, input));
      await this.log(owner, 'chat.message_sent', `Chat message sent to ${sent.channel}`, { channel: sent.channel, ts: sent.ts, threadTs: input.threadTs ?? null, length: input.text.length });
      return sent;
    } catch (err) {
      if (err instanceof AppError && err.status !== 503) {
        await this.log(owner, 'chat.message_failed', `Chat message to ${input.channel} failed: ${err.code}`, { channel: input.channel, error: err.code }, 'failure');
      }
      throw err;
    }
  }

  /** Stored inbound messages, newest first; `since` keeps those received after it. */
  async listMessages(owner: ChatOwner, query: { channel?: string; since?: Date; limit: number; pageToken?: string }) {
    await this.assertAdmin(owner);
    const cursor = query.pageToken ? decodeCursor(query.pageToken) : undefined;
    const filter: Record<string, unknown> = { identityId: owner.identityId };
    if (query.channel) filter.channelId = query.channel;
    const range: Record<string, string> = {};
    if (query.since) range.$gt = sortKeyOf(query.since, '\uffff'); // every key of that millisecond sorts below this
    if (cursor) range.$lt = sortKeyOf(cursor.at, cursor.id);
    if (Object.keys(range).length) filter.sortKey = range;
    const rows = await this.messages.find(filter).sort({ sortKey: -1 }).limit(query.limit + 1).lean();
    return pageOf(rows, query.limit, (row) => ({ at: row.receivedAt, id: row._id }));
  }

  /**
   * One Events API callback, already verified. Messages are stored for every identity connected to the
   * workspace; a platform retry or the second event of a mention stores nothing new. An uninstall ends
   * the connections.
   */
  async ingest(envelope: PlatformEventEnvelope): Promise<{ stored: number }> {
    const event = envelope.event;
    if (envelope.type !== 'event_callback' || !event || !envelope.team_id) return { stored: 0 };
    const connections = (await this.connections.find({ teamId: envelope.team_id }).lean())
      .filter((c) => !c.appId || !envelope.api_app_id || c.appId === envelope.api_app_id);
    if (event.type === 'app_uninstalled' || event.type === 'tokens_revoked') {
      for (const connection of connections) await this.drop(connection, event.type);
      return { stored: 0 };
    }
    if ((event.type !== 'message' && event.type !== 'app_mention') || !STORED_SUBTYPES.has(event.subtype) || !event.channel || !event.ts) return { stored: 0 };
    let stored = 0;
    for (const connection of connections) {
      if (event.user && event.user === connection.botUserId) continue; // our own posts echo back
      const receivedAt = new Date();
      const id = newId('chm');
      try {
        await this.messages.create({
          _id: id, identityId: connection._id, teamId: connection.teamId, channelId: event.channel, userId: event.user ?? event.bot_id ?? '',
          text: (event.text ?? '').slice(0, 40_000), ts: event.ts, ...(event.thread_ts ? { threadTs: event.thread_ts } : {}),
          eventType: event.type, receivedAt, sortKey: sortKeyOf(receivedAt, id),
        });
        stored++;
        this.logs.recordSoon({
          orgId: connection.orgId, identityId: connection._id, action: 'chat.message_received', category: 'chat',
          description: `message from ${event.user ?? event.bot_id ?? 'someone'} in ${event.channel}${event.thread_ts ? ' (thread)' : ''}`, targetType: 'chat_message', targetId: id,
        });
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
      }
    }
    return { stored };
  }

  private tokenOf(connection: ChatConnectionDoc): string {
    return this.secrets.openText(connection.botToken, tokenContext(connection._id));
  }

  private async drop(connection: ChatConnectionDoc, reason: string): Promise<void> {
    const removed = await this.connections.deleteOne({ _id: connection._id, teamId: connection.teamId, installedAt: connection.installedAt });
    if (!removed.deletedCount) return;
    await this.log({ orgId: connection.orgId, identityId: connection._id }, 'chat.disconnected', `Chat workspace "${connection.teamName}" disconnected by the platform (${reason})`, { teamId: connection.teamId, reason });
  }

  /** Runs a platform call with the identity's bot token; a token the platform says is gone ends the connection. */
  private async withToken<T>(owner: ChatOwner, fn: (token: string) => Promise<T>): Promise<T> {
    this.assertEnabled();
    const connection = await this.connections.findById(owner.identityId).lean();
    if (!connection) throw notConnected();
    try {
      return await fn(this.tokenOf(connection));
    } catch (err) {
      if (err instanceof AppError && err.code === 'chat_token_revoked') await this.drop(connection, String(err.details.platformError));
      throw err;
    }
  }
}

const notConnected = () => new AppError(409, 'chat_not_connected', 'No chat workspace is connected: POST /v0/chat/connect and have a human open the installUrl');
