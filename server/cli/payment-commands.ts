import { randomUUID } from 'node:crypto';
import { backendUrl, callBackend, commandKey } from './backend.js';
import type { CommandIO } from './account-commands.js';

/**
 * `agentgate payments refund <payment id> --reason TEXT [--amount USDC]`: refunds a payment (auth-capture,
 * or exact paid to an agentgate wallet of the org)
 * (all of what is left, or `--amount`) through POST /v0/payments/{id}/refund, with an Idempotency-Key
 * (`--idempotency-key`, else a fresh one) so a retry of the same command line refunds once.
 */
export async function paymentsRefundCommand(io: CommandIO, paymentId: string | undefined, options: { url?: string; key?: string; amount?: string; reason?: string; 'idempotency-key'?: string; json?: boolean }): Promise<number> {
  if (!paymentId || !/^pay_[a-z0-9]{1,64}$/.test(paymentId)) {
    io.out('agentgate payments refund: name the payment (pay_...), e.g. agentgate payments refund pay_123 --reason "not delivered"');
    return 2;
  }
  if (!options.reason?.trim()) {
    io.out('agentgate payments refund: --reason is required (the buyer and your records see it)');
    return 2;
  }
  const url = backendUrl(io.env, options.url);
  const key = commandKey(io.env, url, options.key, (saved) => saved.platformKey);
  if ('missing' in key) {
    io.out(key.missing.replace('pass --key', 'pass --key <platform or seller key>'));
    return 2;
  }
  const idempotencyKey = options['idempotency-key'] ?? randomUUID();
  const res = await callBackend(`${url}/v0/payments/${encodeURIComponent(paymentId)}/refund`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
    body: JSON.stringify({ reason: options.reason.trim(), ...(options.amount !== undefined ? { amount: options.amount } : {}) }),
  });
  const body = await res.json().catch(() => undefined) as any;
  if (res.status !== 200) {
    io.out(`refund refused: ${res.status} ${body?.error ?? ''}: ${body?.message ?? ''}`.trim());
    return 1;
  }
  if (options.json) io.out(JSON.stringify(body, null, 2));
  else io.out(`${body.status === 'refunded' ? 'refunded' : `refund ${body.status}:`} ${body.amountUsdc} USDC of ${paymentId} (${body.id}), transaction ${body.txHash ?? 'pending'}; ${Number(body.payment.refundedUsdcRaw) / 1e6} of ${Number(body.payment.capturedUsdcRaw) / 1e6} USDC refunded so far (Idempotency-Key ${idempotencyKey})`);
  return body.status === 'failed' ? 1 : 0;
}
