import type { Hex } from 'viem';
import type { PaymentService } from './payment-service.js';
import { authorizationOf, findSettlementTx } from './settlement.js';
import { authorizationState } from '../chain/usdc.js';

/**
 * Finishes payments left in `verified` by a crash between claiming the nonce and recording the result.
 * The chain is the source of truth: a transaction that used the authorization is recorded as settled
 * (found by its hash or by the AuthorizationUsed event); an unused authorization that is still valid is
 * submitted again (it can only ever move money once, the token enforces the nonce); an expired one
 * is marked failed. Only records older than `olderThanMs` are touched, so a live settlement in another
 * process is left alone.
 */
export async function reconcilePayments(service: PaymentService, options: { olderThanMs: number }): Promise<{ settled: number; failed: number }> {
  const chain = service.chain;
  if (!chain) return { settled: 0, failed: 0 };
  const stale = await service.payments.find({ status: 'verified', createdAt: { $lt: new Date(Date.now() - options.olderThanMs) } }).limit(100).lean();
  let settled = 0;
  let failed = 0;
  for (const payment of stale) {
    const endpoint = payment.endpointId ? await service.endpoints.findById(payment.endpointId).lean() : null;
    const fail = async (reason: string) => {
      await service.payments.updateOne({ _id: payment._id, status: 'verified' }, { $set: { status: 'failed', failureReason: reason } });
      failed++;
    };
    if (payment.txHash) {
      const receipt = await chain.publicClient.getTransactionReceipt({ hash: payment.txHash as Hex }).catch(() => undefined);
      if (receipt?.status === 'success') { await service.markSettled(payment, payment.txHash, endpoint); settled++; continue; }
      if (receipt?.status === 'reverted') { await fail('settle_reverted'); continue; }
    }
    const auth = authorizationOf(payment);
    const used = await authorizationState({ client: chain.publicClient, token: chain.usdc.address, authorizer: auth.from, nonce: auth.nonce });
    if (used) {
      const txHash = await findSettlementTx(chain, auth.from, auth.nonce, 0n);
      if (txHash) { await service.markSettled(payment, txHash, endpoint); settled++; } else await fail('authorization_canceled');
      continue;
    }
    if (auth.validBefore <= BigInt(Math.floor(Date.now() / 1000) + 6)) { await fail('authorization_expired'); continue; }
    const outcome = await service.settler!.settle({ authorization: auth, signature: payment.signature as Hex });
    if (outcome.ok) { await service.markSettled(payment, outcome.txHash, endpoint); settled++; } else if (!outcome.unconfirmed) await fail(outcome.reason);
  }
  return { settled, failed };
}

/**
 * Runs reconciliation at start-up and then every `everyMs` in a worker process. A settlement in flight
 * takes at most ~2 minutes (the receipt wait), so only records older than that are considered stale.
 */
export function startReconciler(service: PaymentService, everyMs = 60_000): { stop(): Promise<void> } {
  let running: Promise<unknown> = Promise.resolve();
  const tick = () => {
    running = reconcilePayments(service, { olderThanMs: 150_000 }).catch((err) => {
      console.error('[agentgate] payment reconciliation failed:', (err as Error).message);
    });
  };
  tick();
  const timer = setInterval(tick, everyMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
