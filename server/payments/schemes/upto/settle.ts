import { getAddress, type Hex } from 'viem';
import type { ChainService } from '../../../chain/chain-service.js';
import { usdcAbi } from '../../../chain/usdc.js';
import { UPTO_PROXY_ADDRESS, uptoPermitOf, uptoSettlementAmount, type Eip2612Permit, type UptoPermit } from '../../../chain/permit2.js';
import type { PaymentDoc } from '../../models.js';
import { RelayerUnavailableError, shortReason } from '../../../settlement/relayer-lane.js';
import type { SettleOutcome } from '../../../settlement/settler.js';
import type { SendTools } from '../../../settlement/work.js';
import { permit2NonceUsed } from '../../../chain/permit2.js';
import { blockBefore } from '../../../chain/authorization-events.js';
import { simulateUptoSettle, uptoSettleCalldata } from './verify.js';

/**
 * Sends one x402 `upto` settlement: the proxy's `settle(permit, amount, owner, witness, signature)` from
 * the facilitator account the buyer named (the proxy accepts no other sender, so upto settlements are
 * never batched through Multicall3). The amount is the seller's charge, at most the permit's maximum; a
 * zero charge sends nothing (the scheme says the permit then simply expires), and the caller records it.
 *
 * It is simulated first with the actual amount, so a permit that can no longer settle (allowance
 * withdrawn, funds moved, nonce cancelled) is refused with its reason before any gas is spent.
 */
/** Gas for one settle: Permit2's signature check (ERC-1271 for smart accounts) and the token transfer. */
export const UPTO_SETTLE_GAS = 250_000n;

export interface UptoSettlementRequest {
  permit: UptoPermit; signature: Hex; amount: bigint; paymentId?: string; permit2612?: Eip2612Permit;
  /** The record being settled: to find its settlement if the permit was used already. */
  payment?: PaymentDoc;
}

export async function sendUptoSettlement(chain: ChainService, tools: Pick<SendTools, 'submitFrom'>, request: UptoSettlementRequest): Promise<SettleOutcome> {
  const { permit, signature, amount } = request;
  if (amount > permit.maxAmount) return { ok: false, reason: 'settlement_exceeds_amount', message: `the charge ${amount} is above the permit's maximum ${permit.maxAmount}` };
  // With the buyer's EIP-2612 permit, as long as Permit2 still lacks the allowance (settleWithPermit
  // carries on when the permit was already used, so a resend after a crash is safe either way).
  const permit2612 = request.permit2612;
  const simulated = await simulateUptoSettle(chain, permit, amount, signature, permit2612);
  if (!simulated.ok) {
    // Run again after a lane changed hands, the permit may have been settled already by its last holder:
    // then the answer is that settlement, not a refusal.
    if (request.payment && await permit2NonceUsed(chain.publicClient, permit.from, permit.nonce)) {
      const txHash = await findUptoSettlementTx(chain, request.payment, await blockBefore(chain, request.payment.createdAt));
      if (txHash) return { ok: true, txHash, batchSize: 1 };
    }
    return { ok: false, reason: simulated.reason, message: simulated.message };
  }
  const data = uptoSettleCalldata(permit, amount, signature, permit2612);
  let sent;
  try {
    sent = await tools.submitFrom(permit.facilitator, { to: UPTO_PROXY_ADDRESS, data, gas: UPTO_SETTLE_GAS }, { scheme: 'upto', ...(request.paymentId ? { paymentIds: [request.paymentId] } : {}) });
  } catch (err) {
    // Nothing reached the chain: the claim may be released and the same payment presented again.
    const message = err instanceof RelayerUnavailableError ? err.message : `the settlement could not be sent: ${shortReason(err)}`;
    return { ok: false, reason: 'relayer_unavailable', message, unavailable: true };
  }
  const fate = await sent.fate;
  if (fate.kind === 'mined' && fate.receipt.status === 'success') return { ok: true, txHash: fate.receipt.transactionHash, batchSize: 1 };
  if (fate.kind === 'mined') {
    // Reverted on chain though the simulation passed: the state changed in between. Replay it for the reason.
    const again = await simulateUptoSettle(chain, permit, amount, signature, permit2612).catch(() => undefined);
    const reason = again && !again.ok ? again.reason : 'settle_reverted';
    return { ok: false, reason, message: `the settlement transaction ${fate.receipt.transactionHash} reverted${again && !again.ok ? `: ${again.message}` : ''}`, txHash: fate.receipt.transactionHash };
  }
  // Replaced, or the lane stopped: the chain decides, reconciliation asks it.
  const why = fate.kind === 'replaced' ? 'was replaced by another transaction' : `was not confirmed (${fate.reason})`;
  return { ok: false, reason: 'settle_unconfirmed', message: `the settlement transaction ${sent.hash} ${why}`, txHash: sent.hash, unconfirmed: true };
}

/** The permit of an upto payment record. */
export const uptoPermitOfRecord = (payment: Pick<PaymentDoc, 'permit2Authorization'>): UptoPermit => uptoPermitOf(payment.permit2Authorization!);

/** The EIP-2612 permit a record keeps (eip2612GasSponsoring), if any. */
export function eip2612PermitOfRecord(payment: Pick<PaymentDoc, 'eip2612Permit'>): Eip2612Permit | undefined {
  const p = payment.eip2612Permit;
  return p ? { value: BigInt(p.value), deadline: BigInt(p.deadline), v: p.v, r: p.r as Hex, s: p.s as Hex } : undefined;
}

/**
 * Where an upto payment whose Permit2 nonce is used moved its money: the record's transaction if it did,
 * else the token's Transfer of the charged amount from the payer to the payee in a transaction sent to
 * the proxy, searched from `fromBlock`. Undefined: the nonce was used without paying this record (the
 * buyer cancelled it on Permit2).
 */
export async function findUptoSettlementTx(chain: ChainService, payment: PaymentDoc, fromBlock: bigint): Promise<Hex | undefined> {
  const payer = getAddress(payment.payerAddress);
  const payee = getAddress(payment.recipientAddress);
  const amount = BigInt(payment.amountUsdcRaw);
  const permit = { owner: payer, to: payee, nonce: BigInt(payment.permit2Authorization!.nonce) };
  const paysThis = async (hash: Hex) => (await uptoSettlementAmount(chain.publicClient, chain.usdc.address, hash, permit)) === amount;
  if (payment.txHash && await paysThis(payment.txHash as Hex)) return payment.txHash as Hex;
  const logs = await chain.publicClient.getContractEvents({ address: chain.usdc.address, abi: usdcAbi, eventName: 'Transfer', args: { from: payer, to: payee }, fromBlock, toBlock: 'latest' });
  for (const log of logs) if ((log.args as { value: bigint }).value === amount && await paysThis(log.transactionHash)) return log.transactionHash;
  return undefined;
}
