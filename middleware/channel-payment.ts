import type { HeldPayment, PaidOutcome, PaymentRequiredOutcome, PaywallOutcome, UnavailableOutcome } from './paywall-types.js';
import { unavailable } from './paywall-types.js';
import type { ChannelPayResult, Facilitator } from './facilitator.js';
import type { ChannelPaymentRequiredResponse } from './challenge.js';
import { decodeBase64Json } from './protocol/base64-json.js';
import type { Charge } from './route-pricing.js';
import { paidOutcome } from './settlement-response.js';
import type { SellerScheme, SellerSchemeDeps } from './seller-scheme.js';

// The x402 `batch-settlement` scheme on the seller's side (a route sold through a payment channel): the
// buyer's payload checked against the 402 locally, then given to the backend, which keeps the channel's
// state in its database (shared by every seller process) and accepts the voucher once, or sends the
// deposit that comes with the first one. A voucher answers in milliseconds: nothing is sent per call, the
// backend claims many calls in one transaction later. A refusal that says where the channel stands puts it
// in the 402's offer (`channelState`, `voucherState`), so the buyer's client signs the right voucher.

export class ChannelPayment implements SellerScheme {
  constructor(private readonly deps: SellerSchemeDeps) {}

  async pay(charge: Charge, paymentHeader: string): Promise<PaywallOutcome> {
    const challenge = this.deps.challenges.challengeFor(charge) as ChannelPaymentRequiredResponse & { kind: 'payment-required' };
    const requirement = challenge.requirementV2;
    const decoded = decodeBase64Json(paymentHeader);
    if (!decoded.ok) return this.deps.challenges.refuse(charge, 'invalid_payload', `the payment header is not base64 JSON (${decoded.reason})`);
    const accepted = (decoded.value as { accepted?: { scheme?: unknown; network?: unknown; amount?: unknown; payTo?: unknown } } | null)?.accepted;
    if (accepted?.scheme !== 'batch-settlement') return this.deps.challenges.refuse(charge, 'unsupported_scheme', 'this route is paid through a batch-settlement channel');
    if (accepted.network !== requirement.network) return this.deps.challenges.refuse(charge, 'network_mismatch', `payment is for network "${String(accepted.network)}", expected "${requirement.network}"`);
    if (accepted.amount !== requirement.amount) return this.deps.challenges.refuse(charge, 'amount_mismatch', `payment is for ${String(accepted.amount)}; this call costs ${requirement.amount}`);
    if (typeof accepted.payTo !== 'string' || accepted.payTo.toLowerCase() !== requirement.payTo.toLowerCase()) return this.deps.challenges.refuse(charge, 'recipient_mismatch', 'payment is to another recipient');
    const canHold = !!(this.deps.facilitator.channelCapture && this.deps.facilitator.channelRelease);
    const facilitator = this.deps.facilitator as Required<Facilitator>;
    // Charged only if the handler succeeds (default): the voucher is held while it runs, then captured or released.
    const settle = charge.route.value.config.settle ?? (canHold ? 'after-handler' : 'before-handler');
    const holdSeconds = settle === 'after-handler' ? charge.route.value.config.holdSeconds ?? 120 : undefined;
    let result;
    try {
      result = await facilitator.channelPay({ paymentHeader, version: 2, resource: charge.resource, amountAtomic: charge.amountAtomic, requirement, ...(holdSeconds ? { holdSeconds } : {}) });
    } catch (error) {
      return unavailable(error);
    }
    if (!result.ok) return this.refused(charge, result);
    if (settle === 'before-handler') return paidOutcome(charge, 2, result, 'before-handler', undefined, 'batch-settlement');
    const voucherId = result.paymentId;
    const holdMs = holdSeconds! * 1000;
    const heldAt = this.deps.now();
    const held = paidOutcome(charge, 2, result, 'after-handler', undefined, 'batch-settlement');
    let capturing: Promise<PaidOutcome | PaymentRequiredOutcome | UnavailableOutcome> | undefined;
    let releasing: Promise<void> | undefined;
    const hold: HeldPayment = {
      payment: held.payment,
      capture: () => (capturing ??= this.deps.now() - heldAt < holdMs / 2
        ? (this.captureAfterAnswer(facilitator, voucherId, heldAt + holdMs, charge.resource), Promise.resolve(held))
        : this.captureBeforeAnswer(facilitator, charge, voucherId)),
      release: () => (releasing ??= facilitator.channelRelease(voucherId).catch(() => {})),
    };
    return { kind: 'held', hold };
  }

  /**
   * The capture sent, and the paid answer given without waiting for its write (a database round trip the
   * buyer would otherwise wait for on every call): the voucher is the channel's newest and held for its
   * call, so no other call can take its amount, and a buyer whose next voucher builds on it finds it
   * captured (channels.ts). It is asked for before the answer goes out, and again while its hold lasts if
   * the backend cannot be reached; a capture that never lands leaves the call uncharged, and says so.
   */
  private captureAfterAnswer(facilitator: Required<Facilitator>, voucherId: string, holdEndsAt: number, resource: string): void {
    void (async () => {
      for (let wait = 250; ; wait *= 4) {
        try {
          const captured = await facilitator.channelCapture(voucherId);
          if (!captured.ok) this.deps.warn(`agentgate: a paid call to ${resource} was answered but its voucher could not be captured (${captured.reason}: ${captured.message}); it was not charged`);
          return;
        } catch (error) {
          if (this.deps.now() + wait >= holdEndsAt) {
            this.deps.warn(`agentgate: a paid call to ${resource} was answered but its voucher could not be captured before its hold ran out (${(error as Error).message}); it was not charged`);
            return;
          }
          await new Promise((r) => setTimeout(r, wait));
        }
      }
    })();
  }

  /** The capture written, then the answer: when the hold is past half its time, a capture after the answer could come too late. */
  private async captureBeforeAnswer(facilitator: Required<Facilitator>, charge: Charge, voucherId: string): Promise<PaidOutcome | PaymentRequiredOutcome | UnavailableOutcome> {
    let captured;
    try {
      captured = await facilitator.channelCapture(voucherId);
    } catch (error) {
      return unavailable(error);
    }
    if (!captured.ok) return this.refused(charge, captured);
    return paidOutcome(charge, 2, captured, 'after-handler', undefined, 'batch-settlement');
  }

  /** A 402 asking again; where the channel stands goes in the offer, for the buyer's client to resync. */
  private refused(charge: Charge, result: Extract<ChannelPayResult, { ok: false }>): PaymentRequiredOutcome {
    const where = { ...(result.channelState ? { channelState: result.channelState } : {}), ...(result.voucherState ? { voucherState: result.voucherState } : {}) };
    return this.deps.challenges.refuse(charge, result.reason, result.message, Object.keys(where).length ? where : undefined);
  }
}
