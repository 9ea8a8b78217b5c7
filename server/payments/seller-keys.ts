import type { ApiKeyService, IssuedKey } from '../platform/auth/api-keys.js';
import type { ActivityLog } from '../platform/activity-log.js';
import { notFound } from '../platform/errors.js';

// Seller keys are issued and revoked from two doors (POST/DELETE /v0/payments/seller-keys and the
// console); both go through here so the activity log says the same whichever was used.

export interface SellerKeyServices { keys: ApiKeyService; logs: ActivityLog }

export async function issueSellerKey({ keys, logs }: SellerKeyServices, orgId: string, name: string): Promise<IssuedKey> {
  const key = await keys.issue('seller', { orgId, name });
  await logs.record({ orgId, action: 'payments.seller_key_created', category: 'payments', description: `Seller key ${key.prefix}… created`, targetType: 'api_key', targetId: key.keyId });
  return key;
}

export async function revokeSellerKey({ keys, logs }: SellerKeyServices, orgId: string, keyId: string): Promise<void> {
  const key = await keys.findOwned(keyId, orgId, 'seller');
  if (!key || key.revokedAt) throw notFound('Seller key not found');
  await keys.revoke(keyId);
  await logs.record({ orgId, action: 'payments.seller_key_revoked', category: 'payments', severity: 'warning', description: `Seller key ${key.prefix}… revoked`, targetType: 'api_key', targetId: keyId });
}
