import { formatUsdc } from 'agentgate-x402-wire';
import type { ChannelCall, ChannelSummary } from './calls.js';
import { callChargeOf, chargedCumulativeOf } from './voucher-amounts.js';

// Channels and their calls as the API, the CLI and the webhooks show them. A call reads like a payment
// (GET /v0/payments/{id} answers it, `scheme: 'batch-settlement'`): its receipt is checked the same way.

export function presentChannel(s: ChannelSummary) {
  const c = s.channel;
  return {
    id: c._id,
    network: `eip155:${c.chainId}`,
    payerAddress: c.payer,
    recipientAddress: c.receiver,
    state: s.state,
    depositedUsdcRaw: s.depositedUsdcRaw,
    acceptedUsdcRaw: s.acceptedUsdcRaw,
    acceptedUsdc: formatUsdc(BigInt(s.acceptedUsdcRaw)),
    claimedUsdcRaw: s.claimedUsdcRaw,
    refundedUsdcRaw: s.refundedUsdcRaw,
    /** The chain's balance when a call last read it (deposits less refunds and withdrawals). */
    balanceUsdcRaw: c.balance,
    balanceSyncedAt: new Date(c.syncedAt).toISOString(),
    withdrawRequestedAt: c.withdrawRequestedAt ? new Date(c.withdrawRequestedAt * 1000).toISOString() : null,
    callCount: s.callCount,
    lastCallAt: s.lastCallAt?.toISOString() ?? null,
    createdAt: c.createdAt.toISOString(),
  };
}

export function presentChannelCall(call: ChannelCall, detail = false) {
  const v = call.voucher;
  return {
    id: call.callId,
    direction: 'in' as const,
    scheme: 'batch-settlement' as const,
    channelId: call.channel._id,
    endpointId: v.endpointId ?? null,
    network: `eip155:${call.channel.chainId}`,
    payerAddress: call.channel.payer,
    recipientAddress: call.channel.receiver,
    /** What the call was charged (a call priced by usage: what its handler reported; its maximum while held). */
    amountUsdcRaw: callChargeOf(v).toString(),
    amountUsdc: formatUsdc(callChargeOf(v)),
    /** What the channel has charged after this call. */
    cumulativeAmountUsdcRaw: chargedCumulativeOf(v).toString(),
    /** A call priced by usage: the most it could be charged (the 402's amount); null for a fixed price. */
    maxAmountUsdcRaw: v.byUsage ? v.price : null,
    resourceUrl: v.resource,
    /** held: the seller's handler is running; accepted: paid, not claimed yet; claimed: its value is on chain with the seller's. */
    status: call.status,
    /** The claim transaction that carried the call's value (null until claimed). */
    txHash: call.claim?.txHash ?? null,
    createdAt: v.createdAt.toISOString(),
    acceptedAt: v.createdAt.toISOString(),
    claimedAt: call.claim?.claimedAt.toISOString() ?? null,
    claimId: call.claim?.actionId ?? null,
    ...(detail ? { voucherSignature: v.signature, signedReceipt: v.signedReceipt ?? null } : {}),
  };
}
