import { toCaip2Network, toV1Network } from 'agentgate-x402-wire';
import type { Facilitator } from './facilitator.js';
import type { PaidOutcome, PaymentRequiredOutcome } from './paywall-types.js';
import { withExtensions } from './payment-required.js';
import type { Charge, SignInWithXOptions } from './route-pricing.js';
import { exactCharge } from './settlement-response.js';

// Sign-In-With-X on a seller's route (x402's `sign-in-with-x` extension): the 402 carries a challenge
// (domain, uri, a fresh nonce, issuedAt, the chains it accepts); a buyer who paid for the resource before
// signs it with the paying wallet and sends it in the `SIGN-IN-WITH-X` header; the backend checks the
// signature, that this wallet paid for this resource, and that the nonce was never used (a unique insert,
// shared by every process), and the request is served as paid, charging nothing.

export const SIWX_KEY = 'sign-in-with-x';
/** Request header names are lower-case here (PaywallRequest). */
export const SIWX_HEADER = 'sign-in-with-x';

/** The JSON Schema the extension declares for the buyer's answer. */
const SCHEMA = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  properties: Object.fromEntries(['domain', 'address', 'statement', 'uri', 'version', 'chainId', 'type', 'nonce', 'issuedAt', 'expirationTime', 'notBefore', 'requestId', 'signature'].map((k) => [k, { type: 'string' }])),
  required: ['domain', 'address', 'uri', 'version', 'chainId', 'type', 'nonce', 'issuedAt', 'signature'],
};

/** The extension's challenge for one 402 of `resource`: per request (nonce and issuedAt are fresh). */
export function signInChallenge(resource: string, network: string, options: SignInWithXOptions, now = Date.now()) {
  const url = new URL(resource);
  return {
    info: {
      domain: url.host,
      uri: resource,
      version: '1',
      nonce: Array.from(globalThis.crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join(''),
      issuedAt: new Date(now).toISOString(),
      expirationTime: new Date(now + (options.expirationSeconds ?? 300) * 1000).toISOString(),
      resources: [resource],
      ...(options.statement ? { statement: options.statement } : {}),
    },
    supportedChains: [{ chainId: toCaip2Network(network), type: 'eip191' }],
    schema: SCHEMA,
  };
}

/** The route's 402 with the challenge added to the v2 PAYMENT-REQUIRED header's extensions. */
export function withSignInChallenge(outcome: PaymentRequiredOutcome, resource: string, network: string, options: SignInWithXOptions): PaymentRequiredOutcome {
  return withExtensions(outcome, { [SIWX_KEY]: signInChallenge(resource, network, options) });
}

/**
 * The buyer's signed answer, asked of the facilitator: the paid outcome (the payment that bought the
 * access, nothing charged now) or undefined (not signed in: the route asks for payment as usual).
 */
export async function signIn(facilitator: Facilitator, header: string, charge: Charge, network: string): Promise<PaidOutcome | undefined> {
  if (!facilitator.signIn) return undefined;
  const result = await facilitator.signIn({ header, resource: charge.resource });
  if (!result.ok) return undefined;
  return {
    kind: 'paid',
    responseHeaders: { 'Cache-Control': 'private, no-store' },
    payment: {
      version: 2,
      scheme: charge.route.value.scheme,
      charge: exactCharge(charge.route.pattern),
      paymentId: result.paymentId,
      payer: result.payer,
      transaction: result.transaction,
      settle: 'before-handler',
      network: toV1Network(network),
      amountAtomic: 0n,
      payTo: charge.payTo,
      resource: charge.resource,
      pattern: charge.route.pattern,
      signedInWithX: true,
    },
  };
}
