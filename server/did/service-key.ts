import { getPublicKeyAsync, utils } from '@noble/ed25519';
import { createPrivateKey, sign as signNative, type KeyObject } from 'node:crypto';
import { Schema, type Connection } from 'mongoose';
import type { Config } from '../platform/config.js';
import type { Logger } from '../platform/logger.js';
import type { SealedSecret, SecretBox } from '../platform/secret-box.js';
import { ed25519ToMultibase } from '../../middleware/multikey.js';
import { isDuplicateKey } from '../platform/errors.js';

/** The service's own did:web key: published at /.well-known/did.json, signs payment receipts. */
export interface ServiceKey {
  did: string;
  /** The verification method id, `<did>#key-1`. */
  keyId: string;
  publicKey: Uint8Array;
  publicKeyMultibase: string;
  sign(message: Uint8Array): Promise<Uint8Array>;
}

interface ServiceKeyDoc { _id: 'service-key'; seed: SealedSecret; createdAt: Date }
const schema = new Schema<ServiceKeyDoc>({ _id: String, seed: { type: Schema.Types.Mixed, required: true }, createdAt: Date }, { versionKey: false });
const SEAL_CONTEXT = 'service-signing-key';

/**
 * SERVICE_SIGNING_KEY in production. In dev mode without it, a key is generated once and kept in the
 * database (sealed under the master key), so receipts stay verifiable across restarts.
 */
export async function loadServiceKey(conn: Connection, config: Config, secrets: SecretBox, log: Logger): Promise<ServiceKey> {
  let seed: Uint8Array;
  if (config.SERVICE_SIGNING_KEY) {
    seed = Uint8Array.from(Buffer.from(config.SERVICE_SIGNING_KEY, 'hex'));
  } else if (config.mode === 'dev') {
    const model = conn.models.ServiceKey ?? conn.model<ServiceKeyDoc>('ServiceKey', schema, 'service_keys');
    const fresh = secrets.seal(Buffer.from(utils.randomSecretKey()), SEAL_CONTEXT);
    // Two processes starting at once both upsert; the first write wins and both read it back.
    await model.updateOne({ _id: 'service-key' }, { $setOnInsert: { seed: fresh, createdAt: new Date() } }, { upsert: true }).catch((err) => {
      if (!isDuplicateKey(err)) throw err;
    });
    const stored = await model.findById('service-key').lean();
    try {
      seed = Uint8Array.from(secrets.open(stored!.seed, SEAL_CONTEXT));
    } catch (err) {
      // Another process sealed it under a master key this one does not hold. Dev mode only: carry on with a
      // key of this process (its receipts will not match the stored DID key) rather than refuse to start.
      log.warn({ err }, 'dev: the stored service signing key cannot be opened with this MASTER_KEY; using a temporary key for this process. Set SERVICE_SIGNING_KEY or share MASTER_KEY to keep one key.');
      seed = utils.randomSecretKey();
    }
  } else {
    throw new Error('configuration error: SERVICE_SIGNING_KEY is required in production');
  }
  const publicKey = await getPublicKeyAsync(seed);
  const did = `did:web:${config.DID_DOMAIN}`;
  return {
    did,
    keyId: `${did}#key-1`,
    publicKey,
    publicKeyMultibase: ed25519ToMultibase(publicKey),
    sign: ed25519Signer(seed),
  };
}

/** PKCS#8 DER of an Ed25519 private key, up to the 32-byte seed (RFC 8410). */
const PKCS8_ED25519_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

/**
 * Signs with OpenSSL through node:crypto: a receipt is signed twice per paid request, and @noble/ed25519's
 * signAsync (SHA-512 through WebCrypto, a thread-pool round trip per hash) costs about 0.6 ms of the event
 * loop per signature on a small machine, native signing 0.04 ms. Ed25519 signatures are deterministic
 * (RFC 8032): the bytes are the same either way, and verifiers (ours use @noble/ed25519) see no change.
 */
export function ed25519Signer(seed: Uint8Array): (message: Uint8Array) => Promise<Uint8Array> {
  const key: KeyObject = createPrivateKey({ key: Buffer.concat([PKCS8_ED25519_PREFIX, seed]), format: 'der', type: 'pkcs8' });
  return async (message) => new Uint8Array(signNative(null, message, key));
}

/** Where the sealed seed lives, for `rotate-master-key`. */
export const serviceKeySealedFields = [{ collection: 'service_keys', path: 'seed' }];
