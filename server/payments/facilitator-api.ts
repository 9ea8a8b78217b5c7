import { z } from 'zod';
import { isAddressEqual, type Address } from 'viem';
import type { SellerAccountDoc } from './models.js';
import { normalizeResource } from './resource-url.js';
import { readPaymentFlow, type PaymentFlow } from 'agentgate-x402-wire';

// The standard x402 facilitator API's request and answer shapes (`/verify`, `/settle`), shared by the
// route (facilitator-routes.ts) and every scheme's facilitator (schemes/<scheme>/evm/facilitator.ts), which
// reads a request of its own kind and answers in its own reason codes.

export const facilitatorBody = z.object({
  x402Version: z.union([z.literal(1), z.literal(2)]),
  paymentPayload: z.record(z.string(), z.unknown()),
  paymentRequirements: z.record(z.string(), z.unknown()),
}).strict();

export type FacilitatorRequest = z.output<typeof facilitatorBody>;

/** An answer of /verify or /settle: the JSON body, and its status when not 200. */
export interface FacilitatorAnswer { status?: number; body: Record<string, unknown> }

/** Why a request cannot be verified or settled, in our reason codes (a scheme names them the spec's way). */
export interface Refusal { reason: string; message: string; payer?: string; txHash?: string }

/** Our reason code as the scheme's spec names it. */
export type SpecReasons = (reason: string) => string;

export function verifyRefused(specReason: SpecReasons, refusal: Refusal): Record<string, unknown> {
  return { isValid: false, invalidReason: specReason(refusal.reason), invalidMessage: refusal.message };
}

export function settleRefused(specReason: SpecReasons, network: string, refusal: Refusal): Record<string, unknown> {
  return {
    success: false, errorReason: specReason(refusal.reason), errorMessage: refusal.message,
    transaction: refusal.txHash ?? '', network, ...(refusal.payer ? { payer: refusal.payer } : {}),
  };
}

/** A requirements schema's first issue, as the refusal names it. */
export function requirementsIssue(error: z.ZodError): Refusal {
  return { reason: 'invalid_payment_requirements', message: `paymentRequirements: ${error.issues[0]?.path.join('.') || 'body'} ${error.issues[0]?.message ?? 'is invalid'}` };
}

/**
 * The requirements come from the seller, but they may only pay this seller's own accepting address (or
 * one of its payees), so nobody spends our relayer's gas on transfers to someone else.
 */
export function payeeRefusal(seller: SellerAccountDoc, payTo: string): Refusal | undefined {
  const payees = [seller.payTo, ...(seller.payees ?? [])];
  if (payees.some((p) => isAddressEqual(payTo as Address, p as Address))) return undefined;
  return { reason: 'invalid_payment_requirements', message: `payTo must be this seller's accepting address ${seller.payTo}${seller.payees?.length ? ' or one of its payees' : ''}` };
}

/** The resource a payment names, normalized as registration does; "unknown" when it names none. */
export function resourceOf(raw: string | undefined): string {
  let resource = 'unknown';
  try { if (raw) resource = normalizeResource(raw); } catch { resource = String(raw).slice(0, 2048); }
  return resource;
}

/**
 * The v2 `paymentFlow` of the requirements (`extra.paymentFlow`, absent = authorization) must be one the
 * scheme settles by, and the payload's `accepted` must name the same: the flow is part of what was agreed.
 * The facilitator's part is the same for both flows we take (verify, settle); only the seller's order differs.
 */
export function paymentFlowRefusal(requirementsExtra: unknown, acceptedExtra: unknown, scheme: string, supported: readonly PaymentFlow[]): Refusal | undefined {
  const asked = readPaymentFlow(requirementsExtra);
  if (!asked.ok) return { reason: 'invalid_payment_requirements', message: `paymentRequirements.${asked.message}` };
  if (!supported.includes(asked.flow)) return { reason: 'invalid_payment_requirements', message: `${scheme} settles with paymentFlow ${supported.join(' or ')}, not ${asked.flow}` };
  const accepted = readPaymentFlow(acceptedExtra);
  if (!accepted.ok || accepted.flow !== asked.flow) return { reason: 'invalid_payment_requirements', message: `the payload was accepted for another paymentFlow than the requirements' ${asked.flow}` };
  return undefined;
}
