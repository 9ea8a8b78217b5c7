import { type DecodedPaymentHeader, type PaymentRequirementsV1, type PaymentRequirementsV2, readPaymentFlow } from 'agentgate-x402-wire';

/**
 * Cheap checks of a decoded payment against what we asked for, before any network round trip. They
 * only turn away payments that cannot succeed; the backend still verifies everything (signature,
 * balance, nonce, time window). Reason codes follow the x402 v1 ErrorReasons where one fits.
 */
export type LocalCheckResult = { ok: true } | { ok: false; reason: string; message: string };

const OK: LocalCheckResult = { ok: true };

export function checkPaymentAgainstRequirements(
  decoded: DecodedPaymentHeader,
  v1: PaymentRequirementsV1,
  v2: PaymentRequirementsV2,
  nowSeconds: number,
): LocalCheckResult {
  const authorization = decoded.payload.payload.authorization;
  if (decoded.version === 1) {
    if (decoded.payload.network !== v1.network) {
      return fail('network_mismatch', `payment is for network "${decoded.payload.network}", expected "${v1.network}"`);
    }
  } else {
    const accepted = decoded.payload.accepted;
    if (accepted.network !== v2.network) {
      return fail('network_mismatch', `payment is for network "${accepted.network}", expected "${v2.network}"`);
    }
    if (!sameAddress(accepted.asset, v2.asset)) return fail('asset_mismatch', 'payment is for another asset');
    if (!sameAddress(accepted.payTo, v2.payTo)) {
      return fail('recipient_mismatch', 'payment is to another recipient');
    }
    if (accepted.amount !== v2.amount) {
      return fail('amount_mismatch', `payment accepted amount ${accepted.amount}, price is ${v2.amount}`);
    }
    // The flow is part of what was accepted: absent reads as authorization (payment-flow.ts).
    const acceptedFlow = readPaymentFlow(accepted.extra);
    const askedFlow = readPaymentFlow(v2.extra);
    if (!acceptedFlow.ok) return fail('invalid_payload', `accepted ${acceptedFlow.message}`);
    if (askedFlow.ok && acceptedFlow.flow !== askedFlow.flow) {
      return fail('payment_flow_mismatch', `payment accepted paymentFlow ${acceptedFlow.flow}, this route settles by ${askedFlow.flow}`);
    }
  }
  if (!sameAddress(authorization.to, v1.payTo)) {
    return fail('recipient_mismatch', 'authorization pays another address');
  }
  if (BigInt(authorization.value) < BigInt(v1.maxAmountRequired)) {
    return fail(
      'amount_mismatch',
      `authorization value ${authorization.value} is below the price ${v1.maxAmountRequired}`,
    );
  }
  if (BigInt(authorization.validBefore) <= BigInt(nowSeconds)) {
    return fail('authorization_expired', 'authorization validBefore is in the past');
  }
  if (BigInt(authorization.validAfter) > BigInt(nowSeconds)) {
    return fail('authorization_not_yet_valid', 'authorization is not valid yet');
  }
  return OK;
}

/**
 * The same cheap checks for a Permit2 payment (upto, or exact through Permit2): the requirement it
 * accepted and the permit it signed against the one asked for. The permit must allow exactly the amount
 * asked (upto: the maximum; exact: the price).
 */
export function checkPermitAgainstRequirement(
  accepted: { network: string; asset: string; payTo: string; amount: string },
  permit: { permitted: { token: string; amount: string }; deadline: string; witness: { to: string } },
  requirement: { network: string; asset: string; payTo: string; amount: string },
  nowSeconds: number,
): LocalCheckResult {
  if (accepted.network !== requirement.network) return fail('network_mismatch', `payment is for network "${accepted.network}", expected "${requirement.network}"`);
  if (!sameAddress(accepted.asset, requirement.asset) || !sameAddress(permit.permitted.token, requirement.asset)) return fail('asset_mismatch', 'payment is for another asset');
  if (!sameAddress(accepted.payTo, requirement.payTo) || !sameAddress(permit.witness.to, requirement.payTo)) return fail('recipient_mismatch', 'payment is to another recipient');
  if (accepted.amount !== requirement.amount || permit.permitted.amount !== requirement.amount) {
    return fail('amount_mismatch', `the permit allows ${permit.permitted.amount}; this route asks to authorize exactly ${requirement.amount}`);
  }
  if (BigInt(permit.deadline) <= BigInt(nowSeconds)) return fail('authorization_expired', 'the permit\'s deadline is in the past');
  return OK;
}

function sameAddress(a: string, b: string): boolean {
  return a.toLowerCase() === b.toLowerCase();
}

function fail(reason: string, message: string): LocalCheckResult {
  return { ok: false, reason, message };
}
