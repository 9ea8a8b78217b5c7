import { canonicalJson } from '../../middleware/canonical-json.js';
import type { PaymentDoc, SignedReceipt } from './models.js';

/** The service key that signs receipts: the key published in `/.well-known/did.json`. */
export interface ReceiptSigner {
  did: string;
  /** Multibase (`z…`) Ed25519 public key, as in the DID document. */
  publicKeyMultibase: string;
  sign(message: Uint8Array): Promise<Uint8Array>;
}

export const RECEIPT_VERSION = 1;

/** An Ed25519 signature over the canonical JSON of the receipt body (see middleware/receipt.ts to verify). */
export async function signReceipt(signer: ReceiptSigner, payment: PaymentDoc & { txHash: string; settledAt: Date }): Promise<SignedReceipt> {
  const body = {
    version: RECEIPT_VERSION,
    paymentId: payment._id,
    endpointId: payment.endpointId,
    payerAddress: payment.payerAddress,
    recipientAddress: payment.recipientAddress,
    amountUsdcRaw: payment.amountUsdcRaw,
    network: payment.network,
    txHash: payment.txHash,
    resourceUrl: payment.resourceUrl,
    timestamp: payment.settledAt.toISOString(),
  };
  const signature = await signer.sign(new TextEncoder().encode(canonicalJson(body)));
  return { body, signature: Buffer.from(signature).toString('base64url'), publicKey: signer.publicKeyMultibase, did: signer.did };
}
