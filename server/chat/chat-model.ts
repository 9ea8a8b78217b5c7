import { Schema } from 'mongoose';
import type { SealedSecret } from '../platform/secret-box.js';

export const CHAT_CONNECTIONS_COLLECTION = 'chat_connections';

/** One identity's installed workspace (one per identity). The bot token is sealed and never returned. */
export interface ChatConnectionDoc {
  _id: string; // identityId
  orgId: string;
  teamId: string;
  teamName: string;
  appId?: string;
  botUserId: string;
  scopes: string[];
  botToken: SealedSecret;
  installedAt: Date;
}

export const chatConnectionSchema = new Schema<ChatConnectionDoc>({
  _id: String,
  orgId: { type: String, required: true },
  teamId: { type: String, required: true },
  teamName: { type: String, default: '' },
  appId: String,
  botUserId: { type: String, required: true },
  scopes: [String],
  botToken: { type: Schema.Types.Mixed, required: true },
  installedAt: { type: Date, required: true },
}, { versionKey: false });
// Events arrive per workspace; every identity connected to it gets its copy.
chatConnectionSchema.index({ teamId: 1 });

export const chatSealedFields = [{ collection: CHAT_CONNECTIONS_COLLECTION, path: 'botToken' }];

/**
 * A pending install: the unguessable state of one install URL, stored as its SHA-256 only. It is used at
 * most once (deleted by the callback that consumes it) and only before `expiresAt` (checked in the query).
 * Expired ones are swept when new ones are made (FerretDB 1.x has no TTL indexes).
 */
export interface ChatInstallDoc {
  _id: string; // sha256(state)
  orgId: string;
  identityId: string;
  expiresAt: Date;
  createdAt: Date;
}

export const chatInstallSchema = new Schema<ChatInstallDoc>({
  _id: String,
  orgId: { type: String, required: true },
  identityId: { type: String, required: true },
  expiresAt: { type: Date, required: true },
  createdAt: { type: Date, required: true },
}, { versionKey: false });
chatInstallSchema.index({ expiresAt: 1 });

/** An inbound message as stored for one identity (SPEC 2.6 plus our id, event type and arrival time). */
export interface ChatMessageDoc {
  _id: string;
  identityId: string;
  teamId: string;
  channelId: string;
  userId: string;
  text: string;
  ts: string;
  threadTs?: string;
  eventType: string;
  receivedAt: Date;
  /** sortKeyOf(receivedAt, _id): newest-first order and the page cursor in one indexed field. */
  sortKey: string;
}

export const chatMessageSchema = new Schema<ChatMessageDoc>({
  _id: String,
  identityId: { type: String, required: true },
  teamId: { type: String, required: true },
  channelId: { type: String, required: true },
  userId: { type: String, default: '' },
  text: { type: String, default: '' },
  ts: { type: String, required: true },
  threadTs: String,
  eventType: { type: String, required: true },
  receivedAt: { type: Date, required: true },
  sortKey: { type: String, required: true },
}, { versionKey: false });
// A platform retry, or the `message` and `app_mention` events of one mention, store one message.
chatMessageSchema.index({ identityId: 1, channelId: 1, ts: 1 }, { unique: true });
chatMessageSchema.index({ identityId: 1, sortKey: -1 });
