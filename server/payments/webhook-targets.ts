import type { Model } from 'mongoose';
import type { SecretBox } from '../platform/secret-box.js';
import type { DeliveryTargets } from '../webhooks/webhook-service.js';
import { webhookSecretContext, type EndpointDoc } from './models.js';

/**
 * Where deliveries to a seller's endpoint go: its webhookUrl, signed with its secret. Read at every
 * attempt, so a rotated secret or a corrected URL applies to the retries that follow; an endpoint deleted
 * or stripped of its webhook since the event fails the delivery, saying so. Undefined: no such endpoint.
 */
export function endpointWebhookTargets(endpoints: Model<EndpointDoc>, secrets: SecretBox): DeliveryTargets {
  return async (endpointId) => {
    const endpoint = await endpoints.findById(endpointId).lean();
    if (!endpoint) return undefined;
    if (endpoint.deletedAt) return { error: 'endpoint_deleted: the endpoint was deleted' };
    if (!endpoint.webhookUrl || !endpoint.webhookSecret) return { error: 'webhook_removed: the endpoint no longer has a webhookUrl' };
    return { url: endpoint.webhookUrl, secret: secrets.openText(endpoint.webhookSecret, webhookSecretContext(endpoint._id)) };
  };
}
