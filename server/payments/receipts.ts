import { canonicalJson, type JwsReceipt, OFFER_RECEIPT_VERSION, signJwsReceipt } from 'agentgate-x402-wire';
import type { PaymentDoc, SignedReceipt } from './models.js';

/** The service key that signs receipts: the key published in `/.well-known/did.json`. */
export interface ReceiptSigner {
  did: string;
  /** The verification method id in the DID document (`<did>#key-1`): the kid of JWS receipts. */
  keyId: string;
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
    // upto: amountUsdcRaw is what was charged (possibly 0, then txHash is ""), out of at most this.
    ...(payment.scheme === 'upto' ? { scheme: 'upto', maxAmountUsdcRaw: payment.maxAmountUsdcRaw } : {}),
    // auth-capture: amountUsdcRaw is what was captured out of the authorized maximum (refunds get receipts of their own).
    ...(payment.scheme === 'auth-capture' ? { scheme: 'auth-capture', maxAmountUsdcRaw: payment.maxAmountUsdcRaw } : {}),
  };
  const signature = await signer.sign(new TextEncoder().encode(canonicalJson(body)));
  return { body, signature: Buffer.from(signature).toString('base64url'), publicKey: signer.publicKeyMultibase, did: signer.did };
}

/** What a refund's receipt names of the refund (an escrow refund's or an exact payment's, from the seller's wallet). */
export interface RefundReceiptInput { _id: string; amountRaw: string; reason?: string }

/** A refund's signed receipt: the payment, what was refunded, and the transaction that did it. */
export async function signRefundReceipt(signer: ReceiptSigner, payment: PaymentDoc, refund: RefundReceiptInput, txHash: string, at: Date): Promise<SignedReceipt> {
  const body = {
    version: RECEIPT_VERSION, kind: 'refund', refundId: refund._id, paymentId: payment._id, endpointId: payment.endpointId,
    payerAddress: payment.payerAddress, recipientAddress: payment.recipientAddress, refundedUsdcRaw: refund.amountRaw,
    network: payment.network, txHash, resourceUrl: payment.resourceUrl, reason: refund.reason ?? '', timestamp: at.toISOString(), scheme: payment.scheme ?? 'exact',
  };
  const signature = await signer.sign(new TextEncoder().encode(canonicalJson(body)));
  return { body, signature: Buffer.from(signature).toString('base64url'), publicKey: signer.publicKeyMultibase, did: signer.did };
}

/** What a batch-settlement call's receipt says (voucher-book.ts signs it when the call's voucher is accepted, or a call priced by usage when it is captured). */
export interface ChannelCallReceiptInput {
  callId: string;
  endpointId: string | null;
  payerAddress: string;
  recipientAddress: string;
  /** This call's price (atomic USDC). */
  amountUsdcRaw: string;
  /** What the channel has charged after this call (the voucher's cumulative amount, for a fixed-price call). */
  cumulativeAmountUsdcRaw: string;
  /** A call priced by usage: the voucher's cumulative amount as signed (what it allowed; the signature is over it). */
  maxClaimableAmountUsdcRaw?: string;
  channelId: string;
  /** The payer's EIP-712 voucher signature over (channelId, cumulative): anyone can check the buyer committed to it. */
  voucherSignature: string;
  network: string;
  resourceUrl: string;
  acceptedAt: Date;
}

/**
 * A channel call's receipt, in the same format and under the same key as an exact payment's (verified by
 * the same `verifyReceipt`, `agentgate receipts verify`, the console's check). It is signed when the call is
 * paid, i.e. when its voucher is accepted: no transaction exists yet (`txHash` is "", as for an upto zero
 * charge), since the value is claimed later with many other calls. Which claim transaction carried it is
 * on the call's record (read from the claim actions), not in this signed body, which never changes.
 */
export async function signChannelCallReceipt(signer: ReceiptSigner, call: ChannelCallReceiptInput): Promise<SignedReceipt> {
  const body = {
    version: RECEIPT_VERSION,
    paymentId: call.callId,
    endpointId: call.endpointId,
    payerAddress: call.payerAddress,
    recipientAddress: call.recipientAddress,
    amountUsdcRaw: call.amountUsdcRaw,
    network: call.network,
    txHash: '',
    resourceUrl: call.resourceUrl,
    timestamp: call.acceptedAt.toISOString(),
    scheme: 'batch-settlement',
    channelId: call.channelId,
    cumulativeAmountUsdcRaw: call.cumulativeAmountUsdcRaw,
    ...(call.maxClaimableAmountUsdcRaw !== undefined ? { maxClaimableAmountUsdcRaw: call.maxClaimableAmountUsdcRaw } : {}),
    voucherSignature: call.voucherSignature,
  };
  const signature = await signer.sign(new TextEncoder().encode(canonicalJson(body)));
  return { body, signature: Buffer.from(signature).toString('base64url'), publicKey: signer.publicKeyMultibase, did: signer.did };
}

/**
 * The same settlement as the x402 offer-receipt extension's JWS receipt, which the official extension's
 * verifier checks by resolving the kid through our DID document. The transaction is included: the buyer
 * already holds it in the settlement response, and it makes the receipt checkable on chain.
 */
export function signOfferReceipt(signer: ReceiptSigner, payment: PaymentDoc & { txHash: string; settledAt: Date }): Promise<JwsReceipt> {
  return signJwsReceipt({
    version: OFFER_RECEIPT_VERSION,
    network: `eip155:${payment.chainId}`,
    resourceUrl: payment.resourceUrl,
    payer: payment.payerAddress,
    issuedAt: Math.floor(payment.settledAt.getTime() / 1000),
    transaction: payment.txHash,
    ...(payment.scheme === 'upto' ? { amount: payment.amountUsdcRaw, maxAmount: payment.maxAmountUsdcRaw } : {}),
  }, { kid: signer.keyId, sign: (message) => signer.sign(message) });
}
