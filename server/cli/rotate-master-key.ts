import type { AppContext } from '../context.js';
import type { SealedSecret } from '../platform/secret-box.js';
import { vaultSealedFields } from '../vault/credential-model.js';
import { serviceKeySealedFields } from '../did/service-key.js';
import { identityKeySealedFields } from '../did/identity-key-model.js';
import { calendarSealedFields } from '../calendar/calendar-model.js';
import { chatSealedFields } from '../chat/chat-model.js';
import { receiverAuthorizerSealedFields } from '../payments/schemes/batch-settlement/evm/receiver-authorizer.js';
import { idempotencySealedFields } from '../platform/idempotency.js';

/**
 * A place where an area keeps `SealedSecret` values: a collection and the dotted path of one sealed
 * value in each document. An area that seals something adds its list here (one import, one spread).
 */
export interface SealedFieldLocation {
  collection: string;
  path: string;
}

export const SEALED_FIELDS: SealedFieldLocation[] = [
  ...vaultSealedFields,
  ...serviceKeySealedFields,
  ...identityKeySealedFields,
  ...calendarSealedFields,
  ...chatSealedFields,
  ...receiverAuthorizerSealedFields,
  ...idempotencySealedFields,
  // Declared here for their areas until they export their own lists (wallet owner keys, webhook signing secrets).
  { collection: 'wallets', path: 'ownerKey' },
  { collection: 'endpoints', path: 'webhookSecret' },
];

export interface RotationReport {
  currentVersion: number;
  rewrapped: number;
  /** Sealed values still wrapped by an older key (should be 0; anything else means: run again before retiring the old key). */
  remaining: number;
  byLocation: Array<SealedFieldLocation & { rewrapped: number }>;
}

const valueAt = (doc: Record<string, unknown>, path: string): unknown =>
  path.split('.').reduce<unknown>((value, key) => (value && typeof value === 'object' ? (value as Record<string, unknown>)[key] : undefined), doc);

/**
 * Re-wraps every sealed value's data key under the current master key (`app.secrets` must have the new key
 * as current and the old ones as previous). Only data keys are unwrapped, each once; the data is never
 * decrypted. Each value is swapped by a conditional update on its old wrapped key, so a value rewritten
 * meanwhile (sealed afresh under the current key by a normal write) is left alone rather than clobbered.
 * Safe to run again: values already under the current key are skipped.
 */
export async function rotateMasterKey(app: AppContext, options: { locations?: SealedFieldLocation[]; batchSize?: number } = {}): Promise<RotationReport> {
  const current = app.secrets.currentVersion;
  const locations = options.locations ?? SEALED_FIELDS;
  const batchSize = options.batchSize ?? 200;
  const report: RotationReport = { currentVersion: current, rewrapped: 0, remaining: 0, byLocation: [] };
  for (const location of locations) {
    const collection = app.db.collection(location.collection);
    const stale = { [`${location.path}.keyVersion`]: { $exists: true, $ne: current } };
    let rewrapped = 0;
    let lastId: unknown = null;
    for (;;) {
      const filter: Record<string, unknown> = lastId === null ? stale : { ...stale, _id: { $gt: lastId } };
      const batch = await collection.find(filter, { projection: { [location.path]: 1 } }).sort({ _id: 1 }).limit(batchSize).toArray();
      if (batch.length === 0) break;
      for (const doc of batch) {
        lastId = doc._id;
        const sealed = valueAt(doc, location.path) as SealedSecret | undefined;
        if (!sealed?.wrappedKey) continue;
        const next = app.secrets.rewrap(sealed);
        const result = await collection.updateOne(
          { _id: doc._id, [`${location.path}.wrappedKey`]: sealed.wrappedKey },
          { $set: { [location.path]: next } },
        );
        if (result.modifiedCount === 1) rewrapped++;
      }
    }
    report.rewrapped += rewrapped;
    report.remaining += await collection.countDocuments(stale);
    report.byLocation.push({ ...location, rewrapped });
  }
  return report;
}
