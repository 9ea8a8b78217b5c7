import { verifyJwsReceipt, verifyReceipt } from 'agentgate-x402-wire';
import type { DidDocument } from '../did/did-document.js';
import type { PaymentDoc } from '../payments/models.js';

export interface ReceiptCheck {
  valid: boolean;
  /** The verification method that the signature holds under, or the one it was checked against. */
  keyId: string;
  reason?: string;
}

/**
 * Checks a payment's receipts the way a buyer or auditor would: against the service's published DID
 * document, never against the key a receipt names itself. Each verification method is tried on its own,
 * so the page can say which key id the signature holds under.
 */
export async function checkSignedReceipt(payment: Pick<PaymentDoc, 'signedReceipt'>, document: DidDocument): Promise<ReceiptCheck | undefined> {
  const receipt = payment.signedReceipt;
  if (!receipt) return undefined;
  const methods = document.verificationMethod ?? [];
  if (receipt.did !== document.id) return { valid: false, keyId: methods[0]?.id ?? document.id, reason: `signed as ${receipt.did}, not ${document.id}` };
  let reason = 'no verification method in the DID document';
  for (const method of methods) {
    if (!method.publicKeyMultibase) continue;
    const result = await verifyReceipt(receipt, method.publicKeyMultibase);
    if (result.ok) return { valid: true, keyId: method.id };
    reason = result.reason;
  }
  return { valid: false, keyId: methods[0]?.id ?? document.id, reason };
}

export async function checkOfferReceipt(payment: PaymentDoc, document: DidDocument): Promise<ReceiptCheck | undefined> {
  if (!payment.offerReceipt) return undefined;
  const result = await verifyJwsReceipt(payment.offerReceipt, document);
  if (result.ok) return { valid: true, keyId: result.kid };
  return { valid: false, keyId: result.kid ?? document.verificationMethod?.[0]?.id ?? document.id, reason: result.reason };
}
