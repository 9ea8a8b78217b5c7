import { toCaip2Network, toV1Network } from './networks.js';
import type { Facilitator } from './facilitator.js';
import { decodeBase64Json, encodeBase64Json } from './protocol/base64-json.js';
import type { PaidOutcome, PaymentRequiredOutcome } from './paywall-types.js';
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

/** A 402 with extensions added to its v2 PAYMENT-REQUIRED header (v1 has none). */
export function withExtensions(outcome: PaymentRequiredOutcome, extensions: Record<string, unknown>): PaymentRequiredOutcome {
  const header = outcome.headers['PAYMENT-REQUIRED'];
  if (header === undefined) return outcome;
  const decoded = decodeBase64Json(header, Infinity);
  if (!decoded.ok) return outcome;
  const required = decoded.value as { extensions?: Record<string, unknown> };
  const extended = { ...required, extensions: { ...required.extensions, ...extensions } };
  return { ...outcome, headers: { ...outcome.headers, 'PAYMENT-REQUIRED': encodeBase64Json(extended) } };
}

/**
 * ERC-8021 builder codes: the seller's app code declared in the 402 (`builder-code` extension), which the
 * buyer's client echoes into its payment and the facilitator appends to the settlement transaction.
 */
export function builderCodeDeclaration(appCode: string) {
  return {
    'builder-code': {
      info: { a: appCode },
      schema: {
        $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', additionalProperties: false,
        properties: {
          a: { type: 'string', pattern: '^[a-z0-9_]{1,32}$' },
          w: { type: 'string', pattern: '^[a-z0-9_]{1,32}$' },
          s: { type: 'array', maxItems: 11, items: { type: 'string', pattern: '^[a-z0-9_]{1,32}$' } },
        },
      },
    },
  };
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
