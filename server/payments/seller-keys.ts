import type { AppContext } from '../context.js';
import type { IssuedKey } from '../platform/auth/api-keys.js';
import { notFound } from '../platform/errors.js';

// Seller keys are issued and revoked from two doors (POST/DELETE /v0/payments/seller-keys and the
// console); both go through here so the activity log says the same whichever was used.

export async function issueSellerKey(app: AppContext, orgId: string, name: string): Promise<IssuedKey> {
  const key = await app.keys.issue('seller', { orgId, name });
  await app.logs.record({ orgId, action: 'payments.seller_key_created', category: 'payments', description: `Seller key ${key.prefix}… created`, targetType: 'api_key', targetId: key.keyId });
  return key;
}

export async function revokeSellerKey(app: AppContext, orgId: string, keyId: string): Promise<void> {
  const key = await app.keys.findOwned(keyId, orgId, 'seller');
  if (!key || key.revokedAt) throw notFound('Seller key not found');
  await app.keys.revoke(keyId);
  await app.logs.record({ orgId, action: 'payments.seller_key_revoked', category: 'payments', severity: 'warning', description: `Seller key ${key.prefix}… revoked`, targetType: 'api_key', targetId: keyId });
}
