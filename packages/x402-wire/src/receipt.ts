import { verifyAsync } from '@noble/ed25519';
import { canonicalJson } from './canonical-json.js';
import { decodeBase64Url, parseEd25519PublicKey } from './multikey.js';

/**
 * Offline verification of a payment receipt signed by the backend.
 * Format: `signature` = base64url (RFC 4648 §5, no padding) of the 64-byte Ed25519 signature over the
 * UTF-8 bytes of `canonicalJson(body)`. `publicKey` and `did` in the receipt say who claims to have
 * signed; the verifier supplies the key it trusts (raw, hex, base64url, multibase, or the signer's
 * DID document), never the receipt's own `publicKey`.
 */

export interface Receipt {
  readonly body: Readonly<Record<string, unknown>>;
  readonly signature: string;
  readonly publicKey: string;
  readonly did: string;
}

export interface DidDocument {
  readonly id: string;
  readonly verificationMethod?: ReadonlyArray<{ readonly id: string; readonly publicKeyMultibase?: string }>;
  readonly assertionMethod?: ReadonlyArray<string | { readonly id: string; readonly publicKeyMultibase?: string }>;
}

export type TrustedKey = Uint8Array | string | DidDocument;

export type ReceiptVerification =
  | { readonly ok: true }
  | {
      readonly ok: false;
      readonly reason: 'malformed_receipt' | 'bad_signature_encoding' | 'bad_public_key' | 'did_mismatch' | 'signature_mismatch';
    };

export async function verifyReceipt(receipt: Receipt, trusted: TrustedKey): Promise<ReceiptVerification> {
  if (typeof receipt !== 'object' || receipt === null || typeof receipt.body !== 'object' || receipt.body === null) {
    return { ok: false, reason: 'malformed_receipt' };
  }
  const signature = typeof receipt.signature === 'string' ? decodeBase64Url(receipt.signature) : undefined;
  if (signature?.length !== 64) return { ok: false, reason: 'bad_signature_encoding' };

  let keys: Uint8Array[];
  if (typeof trusted === 'object' && !(trusted instanceof Uint8Array)) {
    if (receipt.did !== trusted.id) return { ok: false, reason: 'did_mismatch' };
    keys = keysOf(trusted);
  } else {
    const key = parseEd25519PublicKey(trusted);
    keys = key ? [key] : [];
  }
  if (keys.length === 0) return { ok: false, reason: 'bad_public_key' };

  let message: Uint8Array;
  try {
    message = new TextEncoder().encode(canonicalJson(receipt.body));
  } catch {
    return { ok: false, reason: 'malformed_receipt' };
  }
  for (const key of keys) {
    try {
      if (await verifyAsync(signature, message, key)) return { ok: true };
    } catch {
      // A key that is not a valid curve point just does not verify.
    }
  }
  return { ok: false, reason: 'signature_mismatch' };
}

/** Keys a DID document allows for assertions (signing), falling back to all its verification methods. */
function keysOf(document: DidDocument): Uint8Array[] {
  // Ids may be relative ("#key-1") or absolute ("did:web:x#key-1"); compare them absolute.
  const absolute = (id: string) => (id.startsWith('#') ? document.id + id : id);
  const methods = document.verificationMethod ?? [];
  const byId = new Map(methods.map((m) => [absolute(m.id), m]));
  const asserting = (document.assertionMethod ?? []).map((entry) =>
    typeof entry === 'string' ? byId.get(absolute(entry)) : entry,
  );
  const candidates = asserting.length > 0 ? asserting : methods;
  const keys: Uint8Array[] = [];
  for (const method of candidates) {
    const key = method?.publicKeyMultibase ? parseEd25519PublicKey(method.publicKeyMultibase) : undefined;
    if (key) keys.push(key);
  }
  return keys;
}
