import type { Address, Hex } from 'viem';
import type { ChainService } from '../../../../chain/chain-service.js';
import { blockBefore } from '../../../../chain/authorization-events.js';
import type { SendTools } from '../../../../settlement/work.js';
import type { SettleOutcome } from '../../../../settlement/settler.js';
import { RelayerUnavailableError, shortReason } from '../../../../settlement/relayer-lane.js';
import type { PaymentDoc } from '../../../models.js';
import { AUTH_CAPTURE, authCaptureReason as R } from 'agentgate-x402-wire';
import { AUTH_CAPTURE_ESCROW_ADDRESS, authCaptureEscrowAbi, escrowCalldata, escrowState, paymentInfoOfStored } from './chain.js';
import { simulateEscrow } from './verify.js';

// Settling an x402 auth-capture payment's first step: the escrow's authorize, sent by the operator (the
// offer's captureAuthorizer) from its own relayer lane. Capture, void and refund follow by the seller's
// hand (operations.ts).

/** Gas of the escrow's authorize (the simulation says whether it would succeed). */
const AUTHORIZE_GAS = 450_000n;

/**
 * The escrow's authorize from the operator's lane: run again (a lane taken over), the escrow says whether
 * it was collected, and then that is the answer.
 */
export async function sendAuthorize(chain: ChainService, payment: PaymentDoc, tools: SendTools): Promise<SettleOutcome> {
  const escrow = payment.escrow!;
  const info = paymentInfoOfStored(escrow.paymentInfo);
  // Run again (a lane taken over), the escrow says whether it was collected: then that is the answer.
  const state = await escrowState(chain.publicClient, escrow.hash as Hex);
  if (state.hasCollectedPayment) {
    const txHash = await findAuthorizeTx(chain, payment);
    return txHash ? { ok: true, txHash, batchSize: 1 } : { ok: false, reason: R('payment_already_collected'), message: 'the escrow payment was already collected, not by this authorization' };
  }
  const data = escrowCalldata.authorize(info, info.maxAmount, escrow.collector as Address, payment.signature as Hex);
  const simulated = await simulateEscrow(chain, info.operator, data);
  if (!simulated.ok) return { ok: false, reason: simulated.reason, message: simulated.message };
  let sent;
  try {
    sent = await tools.submitFrom(info.operator, { to: AUTH_CAPTURE_ESCROW_ADDRESS, data, gas: AUTHORIZE_GAS }, { scheme: AUTH_CAPTURE, operation: 'authorize', paymentIds: [payment._id] });
  } catch (err) {
    const message = err instanceof RelayerUnavailableError ? err.message : `the authorization could not be sent: ${shortReason(err)}`;
    return { ok: false, reason: 'relayer_unavailable', message, unavailable: true };
  }
  const fate = await sent.fate;
  if (fate.kind === 'mined' && fate.receipt.status === 'success') return { ok: true, txHash: fate.receipt.transactionHash, batchSize: 1 };
  if (fate.kind === 'mined') return { ok: false, reason: R('transaction_reverted'), message: `the authorize transaction ${fate.receipt.transactionHash} reverted`, txHash: fate.receipt.transactionHash };
  const why = fate.kind === 'replaced' ? 'was replaced by another transaction' : `was not confirmed (${fate.reason})`;
  return { ok: false, reason: 'settle_unconfirmed', message: `the authorize transaction ${sent.hash} ${why}`, txHash: sent.hash, unconfirmed: true };
}

/** The transaction that authorized the payment: on its record, or found from the escrow's events. */
export async function findAuthorizeTx(chain: ChainService, payment: PaymentDoc): Promise<Hex | undefined> {
  if (payment.escrow?.authorizeTx) return payment.escrow.authorizeTx as Hex;
  const logs = await chain.publicClient.getContractEvents({ address: AUTH_CAPTURE_ESCROW_ADDRESS, abi: authCaptureEscrowAbi, eventName: 'PaymentAuthorized', args: { paymentInfoHash: payment.escrow!.hash as Hex }, fromBlock: await blockBefore(chain, payment.createdAt), toBlock: 'latest' });
  return logs[0]?.transactionHash;
}
