import { formatUsdc } from 'agentgate-x402-wire';
import type { EndpointDoc, PaymentDoc } from './models.js';

/** What money in and money out have in common; both lists, and the merged activity feed, show it alike. */
export interface TransferFields {
  network: string;
  payerAddress: string;
  recipientAddress: string;
  amountUsdcRaw: string;
  txHash?: string;
  status: string;
  resourceUrl: string;
  failureReason?: string;
  createdAt: Date;
  settledAt?: Date;
}

export function presentTransfer(p: TransferFields) {
  return {
    network: p.network,
    payerAddress: p.payerAddress,
    recipientAddress: p.recipientAddress,
    amountUsdcRaw: p.amountUsdcRaw,
    amountUsdc: formatUsdc(BigInt(p.amountUsdcRaw)),
    txHash: p.txHash || null, // an upto zero charge has no transaction ("")
    status: p.status,
    resourceUrl: p.resourceUrl,
    failureReason: p.failureReason ?? null,
    createdAt: p.createdAt.toISOString(),
    settledAt: p.settledAt?.toISOString() ?? null,
  };
}

export function presentPayment(p: PaymentDoc, detail = false) {
  return {
    id: p._id,
    direction: p.direction ?? 'in',
    endpointId: p.endpointId,
    ...presentTransfer(p),
    // upto: amountUsdcRaw is the charge; this is the most the buyer allowed. exact: the same as amountUsdcRaw.
    scheme: p.scheme ?? 'exact',
    maxAmountUsdcRaw: p.maxAmountUsdcRaw ?? p.amountUsdcRaw,
    // How the money moved: Permit2 for upto and for exact paid through Permit2, EIP-3009 otherwise (auth-capture: its escrow's collector; Solana: an SPL TransferChecked).
    assetTransferMethod: p.svm ? 'spl-transfer-checked' : p.assetTransferMethod ?? (p.scheme === 'upto' ? 'permit2' : p.scheme === 'auth-capture' ? p.escrow?.method ?? 'eip3009' : 'eip3009'),
    ...(p.scheme === 'auth-capture' ? { refundedUsdcRaw: p.refundedUsdcRaw ?? '0' } : {}),
    ...(detail ? { authorizationNonce: p.authorizationNonce, x402Version: p.x402Version, signedReceipt: p.signedReceipt ?? null, offerReceipt: p.offerReceipt ?? null } : {}),
  };
}

export function presentEndpoint(e: EndpointDoc) {
  return {
    id: e._id,
    url: e.url,
    priceUsdc: e.priceUsdc,
    pricing: e.pricing ?? 'fixed',
    description: e.description,
    webhookUrl: e.webhookUrl ?? null,
    discoverable: e.discoverable ?? false,
    inputSchema: e.inputSchemaJson ? JSON.parse(e.inputSchemaJson) as unknown : null,
    outputSchema: e.outputSchemaJson ? JSON.parse(e.outputSchemaJson) as unknown : null,
    createdAt: e.createdAt.toISOString(),
    updatedAt: e.updatedAt.toISOString(),
  };
}
