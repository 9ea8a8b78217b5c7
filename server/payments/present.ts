import { formatUsdc } from '../../middleware/price.js';
import type { EndpointDoc, PaymentDoc } from './models.js';

export function presentPayment(p: PaymentDoc, detail = false) {
  return {
    id: p._id,
    direction: p.direction ?? 'in',
    endpointId: p.endpointId,
    network: p.network,
    payerAddress: p.payerAddress,
    recipientAddress: p.recipientAddress,
    amountUsdcRaw: p.amountUsdcRaw,
    amountUsdc: formatUsdc(BigInt(p.amountUsdcRaw)),
    txHash: p.txHash ?? null,
    status: p.status,
    resourceUrl: p.resourceUrl,
    failureReason: p.failureReason ?? null,
    createdAt: p.createdAt.toISOString(),
    settledAt: p.settledAt?.toISOString() ?? null,
    ...(detail ? { authorizationNonce: p.authorizationNonce, x402Version: p.x402Version, signedReceipt: p.signedReceipt ?? null } : {}),
  };
}

export function presentEndpoint(e: EndpointDoc) {
  return {
    id: e._id,
    url: e.url,
    priceUsdc: e.priceUsdc,
    description: e.description,
    webhookUrl: e.webhookUrl ?? null,
    createdAt: e.createdAt.toISOString(),
    updatedAt: e.updatedAt.toISOString(),
  };
}
