import { z } from 'zod';
import { toolDefiner, type ToolDefinition } from '../platform/mcp-tool.js';
import type { PaymentRefunds } from './refunds.js';
import { idParam, refundBody } from './routes.js';

/** What the payments tools use. */
export interface PaymentToolDeps {
  payments: { refunds: PaymentRefunds };
}

const defineTool = toolDefiner<PaymentToolDeps>();

/**
 * MCP tools of the seller side: an agent that sells refunds a payment of its
 * org the way POST /v0/payments/{id}/refund does, with the same schema.
 */
export const paymentTools: ToolDefinition<PaymentToolDeps>[] = [
  defineTool({
    name: 'payments_refund',
    title: 'Refund a payment received',
    description:
      'Refunds a payment this org received: an auth-capture one from the escrow, or an exact one whose payTo is an agentgate wallet of this org, from ' +
      'that wallet under its identity\'s mandate. `amount` in USDC as a decimal string (e.g. "0.25"; absent: all that is left), at most what was paid, ' +
      'with a `reason`. The money goes back to the buyer on chain; the answer carries the refund\'s signed receipt. Give the same `idempotencyKey` when ' +
      'retrying so the refund happens once. An exact payment to any other address is refused (refund_not_possible: refund it from that address). ' +
      'Same as POST /v0/payments/{id}/refund.',
    scope: 'payments:spend',
    input: idParam.extend(refundBody.shape).extend({ idempotencyKey: z.string().regex(/^[\x21-\x7e]{1,128}$/).optional() }).strict(),
    run: (deps, principal, input) => deps.payments.refunds.refund(principal.orgId, input.id, {
      reason: input.reason, ...(input.amount !== undefined ? { amount: input.amount } : {}), ...(input.idempotencyKey ? { idempotencyKey: input.idempotencyKey } : {}),
    }),
  }),
];
