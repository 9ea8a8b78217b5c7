import type { HeldPayment, PaidOutcome, PaymentRequiredOutcome, PaywallOutcome, UnavailableOutcome } from '../../../paywall-types.js';
import { unavailable } from '../../../paywall-types.js';
import type { CaptureUsage, ChannelPayResult, Facilitator, PaymentResponse } from '../../../facilitator.js';
import { type BatchSettlementPaymentRequiredResponse, decodeBase64Json, parseCharge, type Price } from 'agentgate-x402-wire';
import type { Charge } from '../../../route-pricing.js';
import { paidOutcome } from '../../../settlement-response.js';
import type { SellerScheme, SellerSchemeDeps } from '../../seller-scheme.js';

// The x402 `batch-settlement` scheme on the seller's side (a route sold through a payment channel): the
// buyer's payload checked against the 402 locally, then given to the backend, which keeps the channel's
// state in its database (shared by every seller process) and accepts the voucher once, or sends the
// deposit that comes with the first one. A voucher answers in milliseconds: nothing is sent per call, the
// backend claims many calls in one transaction later. A refusal that says where the channel stands puts it
// in the 402's offer (`channelState`, `voucherState`), so the buyer's client signs the right voucher.
// A route priced by usage ({ upto }) asks for its maximum: the voucher allows the channel's charged total
// plus that, the handler reports what it used (`payment.charge(...)`), and the call is charged that, so
// the answer says the charged amount and total, on which the buyer's client bases its next voucher.

export class BatchSettlementPayment implements SellerScheme {
  constructor(private readonly deps: SellerSchemeDeps) {}

  async pay(charge: Charge, paymentHeader: string): Promise<PaywallOutcome> {
    const decoded = decodeBase64Json(paymentHeader);
    if (!decoded.ok) return this.deps.challenges.refuse(charge, 'invalid_payload', `the payment header is not base64 JSON (${decoded.reason})`);
    const accepted = (decoded.value as { accepted?: { scheme?: unknown; network?: unknown; amount?: unknown; payTo?: unknown } } | null)?.accepted;
    if (accepted?.scheme !== 'batch-settlement') return this.deps.challenges.refuse(charge, 'unsupported_scheme', 'this route is paid through a batch-settlement channel');
    // The offer on the network the buyer chose (the default network's for one the route does not offer: refused below).
    const challenge = this.deps.challenges.challengeOn(charge, accepted.network) as BatchSettlementPaymentRequiredResponse & { kind: 'payment-required' };
    const requirement = challenge.requirementV2;
    if (accepted.network !== requirement.network) return this.deps.challenges.refuse(charge, 'network_mismatch', `payment is for network "${String(accepted.network)}", expected "${requirement.network}"`);
    if (accepted.amount !== requirement.amount) return this.deps.challenges.refuse(charge, 'amount_mismatch', `payment is for ${String(accepted.amount)}; this call costs ${requirement.amount}`);
    if (typeof accepted.payTo !== 'string' || accepted.payTo.toLowerCase() !== requirement.payTo.toLowerCase()) return this.deps.challenges.refuse(charge, 'recipient_mismatch', 'payment is to another recipient');
    const canHold = !!(this.deps.facilitator.channelCapture && this.deps.facilitator.channelRelease);
    const facilitator = this.deps.facilitator as Required<Facilitator>;
    // Charged only if the handler succeeds (default): the voucher is held while it runs, then captured or released.
    const settle = charge.route.value.config.settle ?? (canHold ? 'after-handler' : 'before-handler');
    const holdSeconds = settle === 'after-handler' ? charge.route.value.config.holdSeconds ?? 120 : undefined;
    const usage = charge.route.value.usage;
    let result;
    try {
      result = await facilitator.channelPay({ paymentHeader, version: 2, resource: charge.resource, amountAtomic: charge.amountAtomic, requirement, ...(holdSeconds ? { holdSeconds } : {}), ...(usage ? { byUsage: true } : {}) });
    } catch (error) {
      return unavailable(error);
    }
    if (!result.ok) return this.refused(charge, result);
    if (settle === 'before-handler') return paidOutcome(charge, 2, result, 'before-handler', undefined, 'batch-settlement');
    const voucherId = result.paymentId;
    const holdMs = holdSeconds! * 1000;
    const heldAt = this.deps.now();
    const held = paidOutcome(charge, 2, result, 'after-handler', undefined, 'batch-settlement');
    const acceptedCall = result;
    let reported: bigint | undefined;
    /** A call priced by usage: what the capture charges, fixed when it starts. */
    let used: CaptureUsage | undefined;
    const payment = usage ? {
      ...held.payment, amountAtomic: usage.max, maxAmountAtomic: usage.max,
      charge: (price: Price) => {
        if (used !== undefined) throw new Error('this payment is already being settled: report usage before the response is sent');
        const amount = parseCharge(price);
        if (amount > usage.max) throw new RangeError(`charge ${String(price)} is above this route's maximum of ${usage.max} atomic units: the buyer did not allow it`);
        reported = amount;
      },
    } : held.payment;
    let capturing: Promise<PaidOutcome | PaymentRequiredOutcome | UnavailableOutcome> | undefined;
    let releasing: Promise<void> | undefined;
    const hold: HeldPayment = {
      payment,
      capture: () => (capturing ??= (() => {
        if (usage) used = { amountAtomic: reported ?? usage.unreported };
        if (this.deps.now() - heldAt >= holdMs / 2) return this.captureBeforeAnswer(facilitator, charge, voucherId, used);
        this.captureAfterAnswer(facilitator, voucherId, used, heldAt + holdMs, charge.resource);
        // The answer computed here as the capture writes it: the call charged what it used, the channel's total after it.
        return Promise.resolve(used ? paidOutcome({ ...charge, amountAtomic: used.amountAtomic }, 2, chargedFor(acceptedCall, usage!.max, used.amountAtomic), 'after-handler', undefined, 'batch-settlement') : held);
      })()),
      release: () => (releasing ??= facilitator.channelRelease(voucherId).catch(() => {})),
    };
    return { kind: 'held', hold };
  }

  /**
   * The capture sent, and the paid answer given without waiting for its write (a database round trip the
   * buyer would otherwise wait for on every call): the voucher is the channel's newest and held for its
   * call, so no other call can take its amount, and a buyer whose next voucher builds on it finds it
   * captured (the backend's voucher-book.ts). It is asked for before the answer goes out, and again while its hold lasts if
   * the backend cannot be reached; a capture that never lands leaves the call uncharged, and says so.
   */
  private captureAfterAnswer(facilitator: Required<Facilitator>, voucherId: string, usage: CaptureUsage | undefined, holdEndsAt: number, resource: string): void {
    void (async () => {
      for (let wait = 250; ; wait *= 4) {
        try {
          const captured = await facilitator.channelCapture(voucherId, usage);
          if (!captured.ok) this.deps.warn(`agentgate: a paid call to ${resource} was answered but its voucher could not be captured (${captured.reason}: ${captured.message}); it was not charged`);
          return;
        } catch (error) {
          if (this.deps.now() + wait >= holdEndsAt) {
            this.deps.warn(`agentgate: a paid call to ${resource} was answered but its voucher could not be captured while its hold lasted (${(error as Error).message}); it was not charged`);
            return;
          }
          await new Promise((r) => setTimeout(r, wait));
        }
      }
    })();
  }

  /** The capture written, then the answer: when the hold is past half its time, a capture after the answer could come too late. */
  private async captureBeforeAnswer(facilitator: Required<Facilitator>, charge: Charge, voucherId: string, usage: CaptureUsage | undefined): Promise<PaidOutcome | PaymentRequiredOutcome | UnavailableOutcome> {
    let captured;
    try {
      captured = await facilitator.channelCapture(voucherId, usage);
    } catch (error) {
      return unavailable(error);
    }
    if (!captured.ok) return this.refused(charge, captured);
    return paidOutcome(usage ? { ...charge, amountAtomic: usage.amountAtomic } : charge, 2, captured, 'after-handler', undefined, 'batch-settlement');
  }

  /** A 402 asking again; where the channel stands goes in the offer, for the buyer's client to resync. */
  private refused(charge: Charge, result: Extract<ChannelPayResult, { ok: false }>): PaymentRequiredOutcome {
    const where = { ...(result.channelState ? { channelState: result.channelState } : {}), ...(result.voucherState ? { voucherState: result.voucherState } : {}) };
    return this.deps.challenges.refuse(charge, result.reason, result.message, Object.keys(where).length ? where : undefined);
  }
}

/**
 * A held call priced by usage as its capture charges it: the accepted voucher's answer said the maximum
 * (`chargedAmount`) and the voucher's total (`chargedCumulativeAmount`, the channel's charged total before
 * the call plus that maximum); charged `used`, the call says `used` and the total before it plus `used`,
 * as the backend writes it (voucher-book.ts usageCharge).
 */
function chargedFor(accepted: Extract<ChannelPayResult, { ok: true }>, max: bigint, used: bigint): Extract<ChannelPayResult, { ok: true }> {
  const extra = (accepted.paymentResponse.extra ?? {}) as { channelState?: Record<string, unknown> };
  const signed = BigInt(String(extra.channelState?.chargedCumulativeAmount ?? max));
  const paymentResponse: PaymentResponse = {
    ...accepted.paymentResponse,
    extra: { ...extra, chargedAmount: used.toString(), channelState: { ...extra.channelState, chargedCumulativeAmount: (signed - max + used).toString() } },
  };
  return { ...accepted, paymentResponse };
}
