/**
 * When a paid route's payment is settled:
 * - `after-handler` (the default): the payment is verified and held, the handler runs with its response
 *   held back, and the payment is settled only if the handler answers below 400; otherwise nothing is
 *   charged. The buyer receives nothing of the response before the settlement succeeded.
 * - `before-handler` (the x402 v1 spec's order): settled first, then the handler runs. For handlers that must
 *   not run unpaid at all (side effects that cannot be undone).
 */
export type SettleMode = 'after-handler' | 'before-handler';

/**
 * x402 v2 payment flows: where verify and settle sit around the resource handler, named per accept in
 * `accepts[].extra.paymentFlow` (x402 specs, scheme_exact.md "Payment Flow"; the official core's
 * paymentFlow.ts). Absent means `authorization`, and `authorization` is never written:
 * - `authorization` (the default): verify, then the handler, then settle; a failed handler is not charged.
 * - `upfront`: settle, then the handler; the payment commits first.
 * - `escrow`: settle (deposit), the handler, settle (charge). No scheme of ours uses it.
 *
 * Our settle modes are the first two: `after-handler` is `authorization` (the payment held while the
 * handler runs, captured only for an answer below 400) and `before-handler` is `upfront`. An
 * `after-handler` route whose facilitator cannot hold payments settles before the handler, so it is
 * `upfront` on the wire too: the 402 says what will happen, not what was configured.
 */
export const PAYMENT_FLOWS = ['authorization', 'upfront', 'escrow'] as const;
export type PaymentFlow = (typeof PAYMENT_FLOWS)[number];
export const DEFAULT_PAYMENT_FLOW: PaymentFlow = 'authorization';

/** The flow a settle mode is, given whether the facilitator can hold a payment while the handler runs. */
export function paymentFlowOf(settle: SettleMode, canHold: boolean): 'authorization' | 'upfront' {
  return settle === 'after-handler' && canHold ? 'authorization' : 'upfront';
}

/** An accept's flow as the spec reads it: absent (or null) is `authorization`; anything not a flow name is refused. */
export function readPaymentFlow(extra: unknown): { ok: true; flow: PaymentFlow } | { ok: false; message: string } {
  const value = extra && typeof extra === 'object' ? (extra as { paymentFlow?: unknown }).paymentFlow : undefined;
  if (value === undefined || value === null) return { ok: true, flow: DEFAULT_PAYMENT_FLOW };
  if (typeof value === 'string' && (PAYMENT_FLOWS as readonly string[]).includes(value)) return { ok: true, flow: value as PaymentFlow };
  return { ok: false, message: `extra.paymentFlow must be one of ${PAYMENT_FLOWS.join(', ')}, not ${JSON.stringify(value)?.slice(0, 40)}` };
}

/** `extra` with the flow written as the spec says: `paymentFlow` only when it is not `authorization`. */
export function withPaymentFlow<E extends Record<string, unknown>>(extra: E, flow: PaymentFlow): E & { paymentFlow?: PaymentFlow } {
  const { paymentFlow: _dropped, ...rest } = extra as E & { paymentFlow?: unknown };
  return (flow === DEFAULT_PAYMENT_FLOW ? rest : { ...rest, paymentFlow: flow }) as E & { paymentFlow?: PaymentFlow };
}
