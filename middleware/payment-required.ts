import { buildAuthCapturePaymentRequired, buildBatchSettlementPaymentRequired, buildExactSvmPaymentRequired, isSolanaNetwork, buildPaymentRequired, buildPermit2PaymentRequired, buildUptoPaymentRequired, challengeResponse, decodeBase64Json, encodeBase64Json, findNetwork, networkByName, settingsOnEveryNetwork, type PaymentRequiredBody, type SellerSettings } from 'agentgate-x402-wire';
import type { PaymentRequiredOutcome } from './paywall-types.js';
import type { Charge } from './route-pricing.js';

// The 402s a paywall answers: the challenge for a charge (built by challenge.ts, kept per route so an
// unpaid request costs a cache hit), and the refusal of a payment, which asks again and says why. A
// refusal that means the seller must fix something (an unregistered URL) is also told to the seller, once.

const CHALLENGE_CACHE_LIMIT = 64;
/** auth-capture defaults: the capture window after the buyer may pay, and the refund window. */
export const DEFAULT_CAPTURE_SECONDS = 600;
export const DEFAULT_REFUND_SECONDS = 7 * 86_400;

/** Each scheme's 402 builder. */
const BUILDERS = { exact: buildPaymentRequired, upto: buildUptoPaymentRequired, 'batch-settlement': buildBatchSettlementPaymentRequired } as const;
/** A route's 402 builder: its scheme's, or exact's through Permit2 when an exact route asks for it (a channel's offer names its deposit method itself). */
const builderOf = (route: Charge['route']) => (route.value.scheme === 'exact' && route.value.config.assetTransferMethod === 'permit2' ? buildPermit2PaymentRequired : BUILDERS[route.value.scheme as keyof typeof BUILDERS]);

export class PaymentChallenges {
  /** Resource URLs already warned about, so a busy unregistered route logs once (bounded: URLs are client-chosen). */
  private readonly warnedUnregistered = new Set<string>();

  constructor(private readonly settings: SellerSettings, private readonly warn: (message: string) => void, private readonly now: () => number = Date.now) {}

  /** The 402 asking for this charge, built once per resource (and per amount and payee when those vary). */
  challengeFor(charge: Charge): PaymentRequiredOutcome {
    const { route, resource } = charge;
    // An escrow offer's deadlines are absolute times: built for each request.
    if (route.value.scheme === 'auth-capture') return this.declared(charge, { kind: 'payment-required', ...offerEveryNetwork(this.networksOf(charge).map((settings) => buildAuthCapturePaymentRequired(settings, this.offer(charge), this.windows(charge)))) });
    const cache = route.value.challenges;
    // A fixed price and payee: one challenge per resource. Otherwise per amount and payee too.
    const key = route.value.fixedAmount !== undefined && typeof route.value.config.payTo !== 'function' ? resource : `${resource}\n${charge.amountAtomic}\n${charge.payTo}`;
    let challenge = cache.get(key);
    if (challenge === undefined) {
      const build = builderOf(route);
      const offer = this.offer(charge);
      challenge = Object.freeze(this.declared(charge, { kind: 'payment-required' as const, ...offerEveryNetwork([...this.networksOf(charge).map((settings) => build(settings, offer)), ...this.solanaOf(charge).map((solana) => buildExactSvmPaymentRequired(solana, offer))]) }));
      if (cache.size >= CHALLENGE_CACHE_LIMIT) cache.clear();
      cache.set(key, challenge);
    }
    return challenge;
  }

  /** The Solana networks an `exact` route is offered on besides its EVM ones (a Permit2 route is EVM only). */
  private solanaOf(charge: Charge) {
    const { scheme, config } = charge.route.value;
    return scheme === 'exact' && config.assetTransferMethod !== 'permit2' ? this.settings.solanaNetworks ?? [] : [];
  }

  /**
   * The challenge on the network a payment names (v1 name or CAIP-2 id), whose requirement the payment is
   * checked against; the challenge itself (its requirement: the default network's) for the default network
   * or one this route does not offer, which the checks then refuse as another network.
   */
  challengeOn(charge: Charge, network: unknown): PaymentRequiredOutcome {
    if (isSolanaNetwork(network)) {
      const solana = this.solanaOf(charge).find((s) => s.network === network);
      if (!solana) return this.challengeFor(charge);
      const cache = charge.route.value.challenges;
      const key = `${charge.resource}\n${charge.amountAtomic}\n${solana.network}`;
      let challenge = cache.get(key);
      if (challenge === undefined) {
        challenge = Object.freeze(this.declared(charge, { kind: 'payment-required' as const, ...buildExactSvmPaymentRequired(solana, this.offer(charge)) }));
        if (cache.size >= CHALLENGE_CACHE_LIMIT) cache.clear();
        cache.set(key, challenge);
      }
      return challenge;
    }
    const others = this.networksOf(charge).slice(1);
    const chainId = typeof network === 'string' ? findNetwork(network)?.chainId : undefined;
    const chosen = others.find((s) => s.chainId === chainId);
    if (!chosen) return this.challengeFor(charge);
    if (charge.route.value.scheme === 'auth-capture') return this.declared(charge, { kind: 'payment-required', ...buildAuthCapturePaymentRequired(chosen, this.offer(charge), this.windows(charge)) });
    const cache = charge.route.value.challenges;
    const key = `${charge.resource}\n${charge.amountAtomic}\n${charge.payTo}\n${chosen.network}`;
    let challenge = cache.get(key);
    if (challenge === undefined) {
      challenge = Object.freeze(this.declared(charge, { kind: 'payment-required' as const, ...builderOf(charge.route)(chosen, this.offer(charge)) }));
      if (cache.size >= CHALLENGE_CACHE_LIMIT) cache.clear();
      cache.set(key, challenge);
    }
    return challenge;
  }

  /**
   * The settings of each network this charge is offered on: the default network first; every other network
   * of the backend (its token, its upto facilitator) for an exact or upto route, and for an auth-capture or
   * batch-settlement route each one where the backend names its escrow operator or channel receiver authorizer.
   */
  private networksOf(charge: Charge): SellerSettings[] {
    const main = this.settingsFor(charge);
    const scheme = charge.route.value.scheme;
    if (scheme === 'auth-capture') return settingsOnEveryNetwork(main).filter((s, i) => i === 0 || s.authCaptureOperator);
    if (scheme === 'batch-settlement') return settingsOnEveryNetwork(main).filter((s, i) => i === 0 || s.channelReceiverAuthorizer);
    return settingsOnEveryNetwork(main);
  }

  /** A 402 that says why the payment was refused, asking again for what this route takes. */
  refuse(charge: Charge, reason: string, message: string, extra?: Readonly<Record<string, unknown>>): PaymentRequiredOutcome {
    if (reason === 'resource_not_registered' && !this.warnedUnregistered.has(charge.resource) && this.warnedUnregistered.size < CHALLENGE_CACHE_LIMIT) {
      this.warnedUnregistered.add(charge.resource);
      this.warn(`agentgate-x402: the backend refused a payment for ${charge.resource} (resource_not_registered): no endpoint of this seller is registered at that URL, so every buyer gets 402. Register it with syncEndpoints({ backendUrl, platformKey, publicOrigin, routes }) at start-up, or POST /v0/payments/endpoints with this exact URL (publicOrigin sets the origin buyers use).`);
    }
    if (charge.route.value.scheme === 'auth-capture') return this.declared(charge, { kind: 'payment-required', ...offerEveryNetwork(this.networksOf(charge).map((settings) => buildAuthCapturePaymentRequired(settings, this.offer(charge), this.windows(charge), { reason, message }))) });
    const build = builderOf(charge.route);
    // An upto refusal names the maximum to authorize again, whatever was being charged.
    const offer = charge.route.value.usage ? { ...this.offer(charge), amountAtomic: charge.route.value.usage.max } : this.offer(charge);
    return this.declared(charge, { kind: 'payment-required', ...offerEveryNetwork([...this.networksOf(charge).map((settings) => build(settings, offer, { reason, message }, extra)), ...this.solanaOf(charge).map((solana) => buildExactSvmPaymentRequired(solana, offer, { reason, message }))]) });
  }

  /**
   * The extensions the route declares in every 402 it answers, the challenge (built once, cached) and the
   * refusals alike: its ERC-8021 app code (`builderCode`), which the buyer's client echoes into its payment.
   */
  private declared(charge: Charge, outcome: PaymentRequiredOutcome): PaymentRequiredOutcome {
    const code = charge.route.value.config.builderCode;
    return code ? withExtensions(outcome, builderCodeDeclaration(code)) : outcome;
  }

  /** An auth-capture route's capture and refund windows, from now. */
  readonly windows = (charge: Charge) => {
    const { config } = charge.route.value;
    return { nowSeconds: Math.floor(this.now() / 1000), captureSeconds: config.captureSeconds ?? DEFAULT_CAPTURE_SECONDS, refundSeconds: config.refundSeconds ?? DEFAULT_REFUND_SECONDS };
  };

  /** The settings this charge is offered with: a payee the route picked is paid on every network (over payToByNetwork). */
  private settingsFor(charge: Charge): SellerSettings {
    if (charge.payTo === this.settings.payTo) return this.settings;
    return { ...this.settings, payTo: charge.payTo, ...(this.settings.networks ? { networks: this.settings.networks.map(({ payTo: _perNetwork, ...network }) => network) } : {}) };
  }

  private offer(charge: Charge) {
    const { config } = charge.route.value;
    return {
      amountAtomic: charge.amountAtomic,
      resource: charge.resource,
      description: config.description,
      mimeType: config.mimeType,
      maxTimeoutSeconds: config.maxTimeoutSeconds,
      outputSchema: config.outputSchema,
      paymentFlow: charge.route.value.paymentFlow,
      ...(config.assetTransferMethod ? { assetTransferMethod: config.assetTransferMethod } : {}),
    };
  }
}

/**
 * One 402 offering the same charge on several networks: the first network's (its requirement is the one
 * `requirementV1`/`requirementV2` name), with every network's requirement in the v2 header's `accepts` and,
 * in the v1 body's, those of networks the official x402 1.x client knows by name (one it does not know
 * makes it refuse the whole body).
 */
function offerEveryNetwork<T extends { headers: Readonly<Record<string, string>>; body: PaymentRequiredBody }>(challenges: T[]): T {
  const [first, ...others] = challenges;
  if (!others.length) return first!;
  const decoded = challenges.map((c) => decodeBase64Json(c.headers['PAYMENT-REQUIRED']!, Infinity)).map((d) => (d.ok ? d.value as { accepts?: unknown[] } : {}));
  const v2 = { ...decoded[0], accepts: decoded.flatMap((d) => d.accepts ?? []) };
  const v1Accepts = [...first!.body.accepts, ...others.flatMap((c) => c.body.accepts.filter((a) => networkByName(a.network)?.knownToOfficialV1Client))];
  const merged = challengeResponse(v2, { ...first!.body, accepts: v1Accepts });
  return { ...first!, headers: Object.freeze({ ...first!.headers, 'PAYMENT-REQUIRED': merged.headers['PAYMENT-REQUIRED'] }), body: merged.body, bodyText: merged.bodyText };
}

/** A 402 with extensions added to its v2 PAYMENT-REQUIRED header (v1 has none). */
export function withExtensions(outcome: PaymentRequiredOutcome, extensions: Record<string, unknown>): PaymentRequiredOutcome {
  const header = outcome.headers['PAYMENT-REQUIRED'];
  if (header === undefined) return outcome;
  const decoded = decodeBase64Json(header, Infinity);
  if (!decoded.ok) return outcome;
  const required = decoded.value as { extensions?: Record<string, unknown> };
  const extended = { ...required, extensions: { ...required.extensions, ...extensions } };
  return { ...outcome, headers: Object.freeze({ ...outcome.headers, 'PAYMENT-REQUIRED': encodeBase64Json(extended) }) };
}

/**
 * ERC-8021 builder codes: the seller's app code declared in the 402 (`builder-code` extension), which the
 * buyer's client echoes into its payment and the facilitator appends to the settlement transaction.
 */
function builderCodeDeclaration(appCode: string) {
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
