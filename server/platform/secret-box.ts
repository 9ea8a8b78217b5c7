import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/**
 * Envelope encryption for secrets at rest (vault items, wallet keys, bot tokens, webhook secrets).
 * Each secret gets its own random 256-bit data key; the data is sealed with AES-256-GCM under the data
 * key, and the data key is sealed with AES-256-GCM under the master key. Rotating the master key only
 * re-wraps data keys (`rewrap`), never touches the data. `keyVersion` says which master key wrapped it.
 */
export interface SealedSecret {
  v: 1;
  keyVersion: number;
  wrappedKey: string; // base64: iv(12) | ciphertext(32) | tag(16)
  iv: string;
  ciphertext: string;
  tag: string;
}

export interface MasterKeyring {
  current: { version: number; key: Buffer };
  /** Older master keys still needed to open secrets not yet re-wrapped. */
  previous?: { version: number; key: Buffer }[];
}

function gcmSeal(key: Buffer, plaintext: Buffer, aad: string): { iv: Buffer; ciphertext: Buffer; tag: Buffer } {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(aad, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return { iv, ciphertext, tag: cipher.getAuthTag() };
}

function gcmOpen(key: Buffer, iv: Buffer, ciphertext: Buffer, tag: Buffer, aad: string): Buffer {
  const decipher = createDecipheriv('aes-256-gcm', key, iv);
  decipher.setAAD(Buffer.from(aad, 'utf8'));
  decipher.setAuthTag(tag);
  return Buffer.concat([decipher.update(ciphertext), decipher.final()]);
}

export class SecretBox {
  constructor(private readonly keyring: MasterKeyring) {}

  get currentVersion(): number {
    return this.keyring.current.version;
  }

  /** `context` binds the ciphertext to its owner (e.g. "vault:id-…:github"), so a sealed value copied onto another record fails to open. */
  seal(plaintext: string | Buffer, context: string): SealedSecret {
    const dataKey = randomBytes(32);
    const data = gcmSeal(dataKey, Buffer.isBuffer(plaintext) ? plaintext : Buffer.from(plaintext, 'utf8'), context);
    const { version, key } = this.keyring.current;
    const wrap = gcmSeal(key, dataKey, `wrap:v${version}`);
    dataKey.fill(0);
    return {
      v: 1,
      keyVersion: version,
      wrappedKey: Buffer.concat([wrap.iv, wrap.ciphertext, wrap.tag]).toString('base64'),
      iv: data.iv.toString('base64'),
      ciphertext: data.ciphertext.toString('base64'),
      tag: data.tag.toString('base64'),
    };
  }

  open(sealed: SealedSecret, context: string): Buffer {
    const dataKey = this.unwrap(sealed);
    try {
      return gcmOpen(dataKey, Buffer.from(sealed.iv, 'base64'), Buffer.from(sealed.ciphertext, 'base64'), Buffer.from(sealed.tag, 'base64'), context);
    } finally {
      dataKey.fill(0);
    }
  }

  openText(sealed: SealedSecret, context: string): string {
    return this.open(sealed, context).toString('utf8');
  }

  /** Re-wraps the data key under the current master key; the data itself is not decrypted. */
  rewrap(sealed: SealedSecret): SealedSecret {
    if (sealed.keyVersion === this.keyring.current.version) return sealed;
    const dataKey = this.unwrap(sealed);
    const { version, key } = this.keyring.current;
    const wrap = gcmSeal(key, dataKey, `wrap:v${version}`);
    dataKey.fill(0);
    return { ...sealed, keyVersion: version, wrappedKey: Buffer.concat([wrap.iv, wrap.ciphertext, wrap.tag]).toString('base64') };
  }

  private unwrap(sealed: SealedSecret): Buffer {
    const master = [this.keyring.current, ...(this.keyring.previous ?? [])].find((k) => k.version === sealed.keyVersion);
    if (!master) throw new Error(`master key version ${sealed.keyVersion} is not loaded`);
    const blob = Buffer.from(sealed.wrappedKey, 'base64');
    return gcmOpen(master.key, blob.subarray(0, 12), blob.subarray(12, blob.length - 16), blob.subarray(blob.length - 16), `wrap:v${sealed.keyVersion}`);
  }
}
