import { randomBytes } from 'node:crypto';
import { Schema, type Connection, type Model } from 'mongoose';
import { z } from 'zod';
import type { Config } from '../platform/config.js';
import type { SecretBox, SealedSecret } from '../platform/secret-box.js';
import type { ActivityLog } from '../platform/activity-log.js';
import { AppError, notFound } from '../platform/errors.js';
import { assertAllowedUrl, outboundPolicy } from '../platform/ssrf.js';
import { randomHex } from '../platform/ids.js';
import type { DeliveryQueue, DeliveryTarget, WebhookService } from '../webhooks/webhook-service.js';
import { MAIL_EVENT_TYPES, presentEvent, type MailEventDoc, type MailEventType } from './mail-events.js';
import { DOMAIN_EVENT_TYPES, type DomainEventDoc, type DomainEventType } from './domains/models.js';

/** What a mail webhook can subscribe to: its identity's mail events, and its org's domain events. */
export const MAIL_WEBHOOK_EVENTS = [...MAIL_EVENT_TYPES, ...DOMAIN_EVENT_TYPES] as const;
type MailWebhookEvent = MailEventType | DomainEventType;

export const MAX_WEBHOOKS_PER_IDENTITY = 10;

export const createMailWebhookBody = z.object({
  url: z.string().trim().max(2048).pipe(z.url({ protocol: /^https?$/, message: 'must be an http(s) URL' })),
  events: z.array(z.enum(MAIL_WEBHOOK_EVENTS, { message: `must be among ${MAIL_WEBHOOK_EVENTS.join(', ')}` })).min(1).max(MAIL_WEBHOOK_EVENTS.length)
    .transform((events) => [...new Set(events)]),
}).strict();
/** A mail webhook's id: `mwh_` and 24 hex characters. */
const MAIL_WEBHOOK_ID = /^mwh_[0-9a-f]{24}$/;

export const mailWebhookParams = z.object({ webhookId: z.string().regex(MAIL_WEBHOOK_ID, 'must be a webhook id (mwh_ and 24 hex characters)') });

interface MailWebhookDoc {
  _id: string;
  orgId: string;
  identityId: string;
  url: string;
  events: MailWebhookEvent[];
  secret: SealedSecret;
  createdAt: Date;
}

const schema = new Schema<MailWebhookDoc>({
  _id: String,
  orgId: { type: String, required: true },
  identityId: { type: String, required: true, index: true },
  url: { type: String, required: true },
  events: { type: [String], required: true },
  secret: { type: Schema.Types.Mixed, required: true },
  createdAt: { type: Date, required: true },
}, { versionKey: false });
// Domain events go to every webhook of the org subscribed to them.
schema.index({ orgId: 1, events: 1 });

const secretContext = (id: string) => `mail-webhook-secret:${id}`;

export function presentMailWebhook(hook: MailWebhookDoc) {
  return { webhookId: hook._id, url: hook.url, events: hook.events, createdAt: hook.createdAt.toISOString() };
}

/**
 * An identity's webhooks for its mail events (`POST /v0/webhooks {url, events}`). Each event the identity's
 * event log records becomes one delivery per subscribed webhook (`dispatch`, the event log's onEvent), sent
 * by the webhook engine as payment.received is (HMAC-SHA256 `X-Service-Signature`, the event id as `X-Service-Idempotency-Key`, retries
 * after 1 s, 4 s, 16 s, 64 s and 300 s, the SSRF guard, every attempt on record). The secret is shown
 * once and kept sealed under the master key.
 */
export class MailWebhooks {
  readonly hooks: Model<MailWebhookDoc>;

  constructor(conn: Connection, private readonly config: Config, private readonly secrets: SecretBox,
    private readonly webhooks: DeliveryQueue & Pick<WebhookService, 'listForEndpoint'>, private readonly logs: ActivityLog) {
    this.hooks = conn.models.MailWebhook ?? conn.model<MailWebhookDoc>('MailWebhook', schema, 'mail_webhooks');
  }

  async create(owner: { orgId: string; identityId: string }, input: { url: string; events: MailWebhookEvent[] }) {
    try {
      await assertAllowedUrl(input.url, outboundPolicy(this.config));
    } catch (err) {
      throw new AppError(400, 'url_not_allowed', `body.url: ${(err as Error).message}`);
    }
    if ((await this.hooks.countDocuments({ identityId: owner.identityId })) >= MAX_WEBHOOKS_PER_IDENTITY) {
      throw new AppError(409, 'too_many_webhooks', `An identity can have at most ${MAX_WEBHOOKS_PER_IDENTITY} webhooks; delete one first`);
    }
    const id = `mwh_${randomHex(12)}`;
    const secret = `whsec_${randomBytes(32).toString('base64url')}`;
    const hook: MailWebhookDoc = { _id: id, ...owner, url: input.url, events: input.events, secret: this.secrets.seal(secret, secretContext(id)), createdAt: new Date() };
    await this.hooks.create(hook);
    await this.logs.record({
      orgId: owner.orgId, identityId: owner.identityId, action: 'webhooks.mail_created', category: 'webhooks',
      description: `Mail webhook for ${input.events.join(', ')} added`, targetType: 'mail_webhook', targetId: id, metadata: { events: input.events, host: new URL(input.url).host },
    });
    return { ...presentMailWebhook(hook), secret };
  }

  async list(identityId: string) {
    return (await this.hooks.find({ identityId }).lean()).sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime());
  }

  async get(identityId: string, id: string) {
    const hook = await this.hooks.findOne({ _id: id, identityId }).lean();
    if (!hook) throw notFound('Webhook not found');
    return hook;
  }

  async remove(owner: { orgId: string; identityId: string }, id: string): Promise<void> {
    const result = await this.hooks.deleteOne({ _id: id, identityId: owner.identityId });
    if (!result.deletedCount) throw notFound('Webhook not found');
    await this.logs.record({ orgId: owner.orgId, identityId: owner.identityId, action: 'webhooks.mail_deleted', category: 'webhooks', description: 'Mail webhook removed', targetType: 'mail_webhook', targetId: id });
  }

  async deliveries(identityId: string, id: string, limit: number) {
    await this.get(identityId, id);
    return this.webhooks.listForEndpoint(id, limit);
  }

  /** One delivery per webhook of the identity subscribed to the event's type; idempotent per event. */
  async dispatch(event: MailEventDoc): Promise<void> {
    const hooks = (await this.hooks.find({ identityId: event.identityId }).lean()).filter((h) => h.events.includes(event.type));
    if (!hooks.length) return;
    const body = JSON.stringify(presentEvent(event));
    const data = event.data as { message?: { messageId?: string }; messageId?: string };
    for (const hook of hooks) {
      await this.webhooks.enqueue({
        // One delivery per event and webhook; its id is the idempotency key the receiver sees on every retry.
        eventId: `${event.identityId}.${event.seq}.${hook._id}`, event: event.type, orgId: event.orgId, endpointId: hook._id,
        identityId: event.identityId, subjectId: data.message?.messageId ?? data.messageId, body,
      });
    }
  }

  /**
   * A domain's change of standing (domain.verified, domain.failing), one delivery per webhook of its org
   * subscribed to it; idempotent per event.
   */
  async dispatchDomainEvent(event: DomainEventDoc): Promise<void> {
    const hooks = await this.hooks.find({ orgId: event.orgId, events: event.type }).lean();
    if (!hooks.length) return;
    const body = JSON.stringify({ eventId: event._id, event: event.type, orgId: event.orgId, createdAt: event.at.toISOString(), data: event.data });
    for (const hook of hooks) {
      await this.webhooks.enqueue({
        eventId: `${event._id}.${hook._id}`, event: event.type, orgId: event.orgId, endpointId: hook._id,
        identityId: hook.identityId, subjectId: event.domainId, body,
      });
    }
  }

  /** Where a mail webhook's deliveries go; undefined for an id that is not a mail webhook's. */
  async target(id: string): Promise<DeliveryTarget | undefined> {
    if (!MAIL_WEBHOOK_ID.test(id)) return undefined;
    const hook = await this.hooks.findById(id).lean();
    if (!hook) return { error: 'webhook_deleted: the webhook was deleted' };
    return { url: hook.url, secret: this.secrets.openText(hook.secret, secretContext(hook._id)) };
  }
}
