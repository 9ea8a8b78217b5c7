import { verifyAsync } from '@noble/ed25519';
import { z } from 'zod';
import { canonicalJson } from './canonical-json.js';
import { decodeBase64Url, encodeBase64Url, parseEd25519PublicKey } from './multikey.js';
import type { DidDocument } from './receipt.js';

/**
 * The x402 `offer-receipt` extension's receipt in its JWS form: a compact JWS whose protected header is
 * `{alg: "EdDSA", kid: "<did:web>#key-1"}` and whose payload is the RFC 8785 canonical JSON of
 * `{version, network, resourceUrl, payer, issuedAt, transaction?}`. The backend signs it with the same
 * service key as its own `signedReceipt`; any verifier resolves the kid through the DID document.
 * It travels in the settlement response as `extensions["offer-receipt"].info.receipt`.
 */

export const OFFER_RECEIPT = 'offer-receipt';
export const OFFER_RECEIPT_VERSION = 1;

export interface OfferReceiptPayload {
  readonly version: number;
  /** CAIP-2, e.g. "eip155:8453". */
  readonly network: string;
  readonly resourceUrl: string;
  readonly payer: string;
  /** Unix seconds. */
  readonly issuedAt: number;
  readonly transaction?: string;
  /**
   * Ours, for the `upto` scheme only (an exact receipt has neither): the atomic amount charged and the
   * most the buyer allowed. Extra claims in the payload; verifiers that do not know them ignore them.
   */
  readonly amount?: string;
  readonly maxAmount?: string;
}

/** `{format: "jws", signature: "<header>.<payload>.<signature>"}`, as the extension names it. */
export const JwsReceiptSchema = z.object({
  format: z.literal('jws'),
  signature: z.string().max(8192).regex(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/, 'must be a compact JWS'),
});
export type JwsReceipt = z.infer<typeof JwsReceiptSchema>;

/** The settlement response's `extensions` entry that carries a receipt. */
export const offerReceiptExtension = (receipt: JwsReceipt) => ({ [OFFER_RECEIPT]: { info: { receipt } } });

const utf8 = (text: string) => new TextEncoder().encode(text);

/** Signs a receipt payload as a compact JWS with an Ed25519 key whose verification method id is `kid`. */
export async function signJwsReceipt(payload: OfferReceiptPayload, signer: { kid: string; sign(message: Uint8Array): Promise<Uint8Array> }): Promise<JwsReceipt> {
  const header = encodeBase64Url(utf8(JSON.stringify({ alg: 'EdDSA', kid: signer.kid })));
  const body = encodeBase64Url(utf8(canonicalJson(payload)));
  const signature = await signer.sign(utf8(`${header}.${body}`));
  return { format: 'jws', signature: `${header}.${body}.${encodeBase64Url(signature)}` };
}

export type JwsReceiptVerification =
  | { readonly ok: true; readonly kid: string; readonly payload: OfferReceiptPayload }
  | {
    readonly ok: false;
    readonly reason: 'malformed_receipt' | 'unsupported_algorithm' | 'unknown_key' | 'signature_mismatch';
    /** The key the receipt names, when its header could be read. */
    readonly kid?: string;
  };

/**
 * Checks a JWS receipt against a DID document the verifier trusts: the header's kid must name one of the
 * document's verification methods (so a receipt cannot bring its own key), and the Ed25519 signature over
 * `header.payload` must hold under that method's key.
 */
export async function verifyJwsReceipt(receipt: unknown, document: DidDocument): Promise<JwsReceiptVerification> {
  const parsed = JwsReceiptSchema.safeParse(receipt);
  if (!parsed.success) return { ok: false, reason: 'malformed_receipt' };
  const [headerPart, payloadPart, signaturePart] = parsed.data.signature.split('.') as [string, string, string];
  let header: { alg?: unknown; kid?: unknown };
  let payload: OfferReceiptPayload;
  try {
    header = JSON.parse(new TextDecoder().decode(decodeBase64Url(headerPart)));
    payload = JSON.parse(new TextDecoder().decode(decodeBase64Url(payloadPart)));
  } catch {
    return { ok: false, reason: 'malformed_receipt' };
  }
  const kid = typeof header.kid === 'string' ? header.kid : undefined;
  if (header.alg !== 'EdDSA') return { ok: false, reason: 'unsupported_algorithm', ...(kid ? { kid } : {}) };
  if (!kid) return { ok: false, reason: 'unknown_key' };
  const absolute = (id: string) => (id.startsWith('#') ? document.id + id : id);
  const method = (document.verificationMethod ?? []).find((m) => absolute(m.id) === kid);
  const key = method?.publicKeyMultibase ? parseEd25519PublicKey(method.publicKeyMultibase) : undefined;
  if (!key) return { ok: false, reason: 'unknown_key', kid };
  const signature = decodeBase64Url(signaturePart);
  if (signature?.length !== 64) return { ok: false, reason: 'malformed_receipt', kid };
  try {
    if (await verifyAsync(signature, utf8(`${headerPart}.${payloadPart}`), key)) return { ok: true, kid, payload };
  } catch {
    // A key that is not a valid curve point just does not verify.
  }
  return { ok: false, reason: 'signature_mismatch', kid };
}
