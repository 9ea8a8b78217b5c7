import { isAddressEqual, type Address } from 'viem';
import { ExactSvmRequirementsV2Schema, type ExactSvmRequirementsV2, type AuthCaptureCollectPayload, type AuthCaptureRequirements, AuthCaptureRequirementsSchema, type BatchSettlementRequirementsV2Buyer, BatchSettlementRequirementsV2Schema, CHANNEL_WITHDRAW_DELAY, ChannelStandingSchema, decodeBase64Json, encodeBase64Json, type ExactEvmPayload, type ExactPermit2Authorization, type JwsReceipt, JwsReceiptSchema, OFFER_RECEIPT, parseJsonWithin, type PaymentRequirementsV1, PaymentRequirementsV1Schema, type PaymentRequirementsV2, PaymentRequirementsV2Schema, readPaymentFlow, type ResourceInfo, ResourceInfoSchema, toCaip2Network, toV1Network, type UptoPermit2Authorization, type UptoRequirementsV2, UptoRequirementsV2Schema } from 'agentgate-x402-wire';
import type { GuardedResponse } from '../platform/ssrf.js';

/** How deep a seller's JSON may nest before we treat it as text: we walk it, store parts and answer with it. */
export const MAX_REMOTE_JSON_DEPTH = 64;

/** One way to pay, as the seller offered it; `raw` is echoed back verbatim in a v2 payment. */
export type Offer =
  | { version: 1; scheme: 'exact'; requirement: PaymentRequirementsV1; raw: unknown }
  | { version: 2; scheme: 'exact'; requirement: PaymentRequirementsV2; raw: unknown; resource: ResourceInfo }
  /** x402 `upto`: the amount is the most the seller may charge; it names the facilitator the permit binds. */
  | { version: 2; scheme: 'upto'; requirement: UptoRequirementsV2; raw: unknown; resource: ResourceInfo }
  /** x402 `auth-capture`: the amount is authorized into escrow; the seller captures it (or voids it) and may refund it. */
  | { version: 2; scheme: 'auth-capture'; requirement: AuthCaptureRequirements; raw: unknown; resource: ResourceInfo }
  /** x402 `batch-settlement`: the price of one call, paid by a voucher on a channel the wallet deposits into. */
  | { version: 2; scheme: 'batch-settlement'; requirement: BatchSettlementRequirementsV2Buyer; raw: unknown; resource: ResourceInfo };

/** A channel's withdrawal delay we accept: the longest a seller that vanished can keep the wallet's deposit locked. */
const MAX_CHANNEL_WITHDRAW_DELAY = 86_400;

/** A seller's `exact` offer on a Solana network, as its 402 named it (`raw` is echoed back in the payment). */
export interface SolanaOffer { requirement: ExactSvmRequirementsV2; raw: unknown; resource: ResourceInfo }

export interface Challenge {
  /** Every `accepts` entry in the 402, parsed or not (to tell "not our network" from "not x402"). */
  entries: Array<{ version: 1 | 2; scheme: unknown; network: unknown; asset: unknown }>;
  offers: Offer[];
  /** `exact` offers on Solana networks (v2): paid from the identity's Solana wallet (schemes/exact/svm/payer.ts). */
  solanaOffers: SolanaOffer[];
}

/** A network the wallet pays on (every scheme), and its USDC. */
export interface OurAsset {
  network: string;
  caip2: string;
  usdc: Address;
}

export interface PayableOffer { ok: true; offer: Offer; amount: bigint; payTo: Address; maxTimeoutSeconds: number; resourceUrl: string; network: OurAsset }

export type OfferChoice =
  | PayableOffer
  | { ok: false; code: 'network_unsupported' | 'asset_unsupported'; message: string };

const header = (res: GuardedResponse, name: string): string | undefined => {
  const value = res.headers[name];
  return Array.isArray(value) ? value[0] : value;
};

/**
 * Reads a 402 the way the official v2 client does: the `PAYMENT-REQUIRED` header first, then an x402 v1
 * JSON body. Returns undefined when neither is there (the URL is not x402).
 */
export function readChallenge(res: GuardedResponse): Challenge | undefined {
  const challenge: Challenge = { entries: [], offers: [], solanaOffers: [] };
  const v2Header = header(res, 'payment-required');
  if (v2Header) {
    const decoded = decodeBase64Json(v2Header, 64 * 1024, MAX_REMOTE_JSON_DEPTH);
    const value = decoded.ok ? (decoded.value as { x402Version?: unknown; accepts?: unknown; resource?: unknown }) : undefined;
    const resource = ResourceInfoSchema.safeParse(value?.resource);
    if (value?.x402Version === 2 && Array.isArray(value.accepts) && resource.success) {
      for (const raw of value.accepts as Array<Record<string, unknown>>) {
        challenge.entries.push({ version: 2, scheme: raw?.scheme, network: raw?.network, asset: raw?.asset });
        const parsed = PaymentRequirementsV2Schema.safeParse(raw);
        if (parsed.success) challenge.offers.push({ version: 2, scheme: 'exact', requirement: parsed.data, raw, resource: resource.data });
        const upto = UptoRequirementsV2Schema.safeParse(raw);
        if (upto.success && upto.data.extra.facilitatorAddress) challenge.offers.push({ version: 2, scheme: 'upto', requirement: upto.data, raw, resource: resource.data });
        const escrow = AuthCaptureRequirementsSchema.safeParse(raw);
        if (escrow.success && payableAuthCaptureOffer(escrow.data)) challenge.offers.push({ version: 2, scheme: 'auth-capture', requirement: escrow.data, raw, resource: resource.data });
        const channel = BatchSettlementRequirementsV2Schema.safeParse(raw);
        if (channel.success && payableBatchSettlementOffer(channel.data)) challenge.offers.push({ version: 2, scheme: 'batch-settlement', requirement: channel.data, raw, resource: resource.data });
        const solana = ExactSvmRequirementsV2Schema.safeParse(raw);
        if (solana.success) challenge.solanaOffers.push({ requirement: solana.data, raw, resource: resource.data });
      }
    }
  }
  let body: { x402Version?: unknown; accepts?: unknown } | undefined;
  body = parseJsonWithin(res.bodyText, MAX_REMOTE_JSON_DEPTH) as typeof body;
  if (body?.x402Version === 1 && Array.isArray(body.accepts)) {
    for (const raw of body.accepts as Array<Record<string, unknown>>) {
      challenge.entries.push({ version: 1, scheme: raw?.scheme, network: raw?.network, asset: raw?.asset });
      const parsed = PaymentRequirementsV1Schema.safeParse(raw);
      if (parsed.success) challenge.offers.push({ version: 1, scheme: 'exact', requirement: parsed.data, raw });
    }
  }
  return challenge.entries.length > 0 ? challenge : undefined;
}

const onOurNetwork = (offer: { version: 1 | 2; network: unknown }, ours: OurAsset) =>
  typeof offer.network === 'string' &&
  (offer.version === 1 ? toV1Network(offer.network) === ours.network : toCaip2Network(offer.network) === ours.caip2);

const isOurUsdc = (asset: unknown, ours: OurAsset) =>
  typeof asset === 'string' && /^0x[0-9a-fA-F]{40}$/.test(asset) && isAddressEqual(asset as Address, ours.usdc);

/** An offer's x402 v2 payment flow (v1 offers name none: authorization), or undefined when we cannot pay by it. */
function flowOf(offer: Offer): 'authorization' | 'upfront' | 'escrow' | 'channel' | undefined {
  if (offer.scheme === 'batch-settlement') return 'channel';
  // auth-capture's flow is escrow (authorized into the escrow, captured later), checked with its offer
  // (payableAuthCaptureOffer).
  if (offer.scheme === 'auth-capture') return 'escrow';
  const read = readPaymentFlow(offer.requirement.extra);
  // exact and upto settle by authorization or upfront; escrow is another scheme's.
  return read.ok && read.flow !== 'escrow' ? read.flow : undefined;
}

/**
 * Every offer in our USDC on one of our networks, best first: `batch-settlement` first (a channel;
 * deposited into by ERC-3009 before Permit2, which needs an approval first), then `auth-capture`, then
 * `exact`, then `upto` (a maximum, of which the seller charges what the request used); within a scheme the
 * `authorization` flow before `upfront` (the spec's advice: a failed handler then charges nothing), then
 * v2 before v1, as the official client prefers it; then the order of our networks (the default one first).
 */
export function payableOffers(challenge: Challenge, ours: OurAsset | readonly OurAsset[]): PayableOffer[] {
  const networks = Array.isArray(ours) ? ours : [ours as OurAsset];
  // A channel first (a voucher per call: no transaction, no block to wait for), then auth-capture (the
  // money can be given back).
  const rank = (o: Offer) => (o.scheme === 'batch-settlement' ? 300 : o.scheme === 'auth-capture' ? 200 : o.scheme === 'exact' ? 100 : 0) + (depositsByErc3009(o) ? 50 : 0) + (flowOf(o) === 'authorization' ? 10 : 0) + o.version;
  const usable = challenge.offers.flatMap((offer) => {
    if (flowOf(offer) === undefined) return [];
    const index = networks.findIndex((n) => onOurNetwork({ version: offer.version, network: offer.requirement.network }, n) && isOurUsdc(offer.requirement.asset, n));
    return index < 0 ? [] : [{ offer, index }];
  }).sort((a, b) => rank(b.offer) - rank(a.offer) || a.index - b.index);
  return usable.map(({ offer, index }) => ({
    ok: true as const, offer, network: networks[index]!,
    amount: BigInt(offer.version === 1 ? offer.requirement.maxAmountRequired : offer.requirement.amount),
    payTo: offer.requirement.payTo as Address, maxTimeoutSeconds: offer.requirement.maxTimeoutSeconds,
    resourceUrl: offer.version === 1 ? offer.requirement.resource : offer.resource.url,
  }));
}

/** The best offer we can pay (payableOffers), or why there is none. */
export function chooseOffer(challenge: Challenge, ours: OurAsset | readonly OurAsset[]): OfferChoice {
  const [best] = payableOffers(challenge, ours);
  return best ?? whyNoOffer(challenge, Array.isArray(ours) ? ours : [ours as OurAsset]);
}

/** Why no offer of a challenge is payable: a network we pay on with another token, or no network of ours. */
export function whyNoOffer(challenge: Challenge, ours: readonly OurAsset[], solana: ReadonlyArray<{ network: string; caip2: string }> = []): Extract<OfferChoice, { ok: false }> {
  const offered = [...new Set(challenge.entries.map((e) => `${String(e.scheme)} on ${String(e.network)}`))].join(', ');
  const known = ['exact', 'upto', 'auth-capture', 'batch-settlement'];
  const onOurs = ours.find((n) => challenge.entries.some((e) => known.includes(e.scheme as string) && onOurNetwork(e, n)));
  if (onOurs) return { ok: false, code: 'asset_unsupported', message: `the seller asks for a token other than USDC (${onOurs.usdc}) on ${onOurs.network}` };
  const where = ours.map((n) => `${n.network} (${n.caip2})`).join(', ');
  const onSolana = solana.length ? `, and USDC by exact on ${solana.map((n) => `${n.network} (${n.caip2})`).join(', ')}` : '';
  return { ok: false, code: 'network_unsupported', message: `the seller accepts ${offered}; this wallet pays USDC (exact through ERC-3009 or Permit2, upto, auth-capture through ERC-3009, batch-settlement through ERC-3009 or Permit2) on ${where || 'no EVM network'}${onSolana}` };
}

/** The request header that carries the payment, in the version of the offer. */
export function paymentHeaderFor(offer: Offer, payload: ExactEvmPayload | { signature: string; permit2Authorization: UptoPermit2Authorization | ExactPermit2Authorization } | AuthCaptureCollectPayload | Record<string, unknown>): { name: string; value: string } {
  if (offer.version === 1) {
    return { name: 'X-PAYMENT', value: encodeBase64Json({ x402Version: 1, scheme: 'exact', network: offer.requirement.network, payload }) };
  }
  return { name: 'PAYMENT-SIGNATURE', value: encodeBase64Json({ x402Version: 2, resource: offer.resource, accepted: offer.raw, payload }) };
}

export interface SettlementResponse {
  success?: boolean;
  transaction?: string;
  network?: string;
  payer?: string;
  errorReason?: string;
  /** upto: the atomic amount the seller charged. */
  amount?: string;
  /** The seller's signed receipt (x402 offer-receipt extension), when it sent one in the JWS form. */
  offerReceipt?: JwsReceipt;
  /** batch-settlement: what this call was charged and where the channel stands (extra.chargedAmount, extra.channelState). */
  channel?: { chargedAmount?: string; chargedCumulativeAmount?: string; channelId?: string; balance?: string };
}

/** A batch-settlement answer's extra, each field only in its exact shape. */
function channelOf(extra: unknown): Pick<SettlementResponse, 'channel'> {
  const e = extra as { chargedAmount?: unknown; channelState?: { chargedCumulativeAmount?: unknown; channelId?: unknown; balance?: unknown } } | undefined;
  if (!e || typeof e !== 'object') return {};
  const amount = (v: unknown) => (typeof v === 'string' && /^\d{1,39}$/.test(v) ? v : undefined);
  const channel = {
    ...(amount(e.chargedAmount) ? { chargedAmount: amount(e.chargedAmount) } : {}),
    ...(amount(e.channelState?.chargedCumulativeAmount) ? { chargedCumulativeAmount: amount(e.channelState?.chargedCumulativeAmount) } : {}),
    ...(typeof e.channelState?.channelId === 'string' && /^0x[0-9a-fA-F]{64}$/.test(e.channelState.channelId) ? { channelId: e.channelState.channelId.toLowerCase() } : {}),
    ...(amount(e.channelState?.balance) ? { balance: amount(e.channelState?.balance) } : {}),
  };
  return Object.keys(channel).length ? { channel } : {};
}

/** `extensions["offer-receipt"].info.receipt`, kept only in its exact JWS shape. */
function offerReceiptOf(extensions: unknown): { offerReceipt?: JwsReceipt } {
  const entry = (extensions as Record<string, { info?: { receipt?: unknown } }> | undefined)?.[OFFER_RECEIPT];
  const receipt = JwsReceiptSchema.safeParse(entry?.info?.receipt);
  return receipt.success ? { offerReceipt: receipt.data } : {};
}

/** The seller's settlement header (`PAYMENT-RESPONSE` in v2, `X-Payment-Response` in v1), decoded. */
export function readSettlement(res: GuardedResponse): SettlementResponse | undefined {
  const value = header(res, 'payment-response') ?? header(res, 'x-payment-response');
  if (!value) return undefined;
  const decoded = decodeBase64Json(value, 16 * 1024, MAX_REMOTE_JSON_DEPTH);
  if (!decoded.ok || !decoded.value || typeof decoded.value !== 'object') return undefined;
  // Only the fields the x402 spec names, each of its type: the seller chose these bytes, and we store
  // and return them (a key such as "$set" would make the database refuse the whole record).
  const raw = decoded.value as Record<string, unknown>;
  const text = (v: unknown) => (typeof v === 'string' ? v.slice(0, 512) : undefined);
  const settlement: SettlementResponse = {
    ...(typeof raw.success === 'boolean' ? { success: raw.success } : {}),
    ...(text(raw.transaction) !== undefined ? { transaction: text(raw.transaction) } : {}),
    ...(text(raw.network) !== undefined ? { network: text(raw.network) } : {}),
    ...(text(raw.payer) !== undefined ? { payer: text(raw.payer) } : {}),
    ...(text(raw.errorReason) !== undefined ? { errorReason: text(raw.errorReason) } : {}),
    ...(typeof raw.amount === 'string' && /^\d{1,78}$/.test(raw.amount) ? { amount: raw.amount } : {}),
    ...offerReceiptOf(raw.extensions),
    ...channelOf(raw.extra),
  };
  return settlement;
}

/**
 * An auth-capture offer this wallet pays: ERC-3009 to the collector (a smart account's USDC signature),
 * the delegated operator without a receiver authorizer or policy (collect only: `authorize`), in escrow
 * no longer than a day (what is held is the buyer's money), refundable at least until it can be captured.
 */
function payableAuthCaptureOffer(r: AuthCaptureRequirements): boolean {
  const zero = (a: string | undefined) => a === undefined || /^0x0{40}$/i.test(a);
  const now = Math.floor(Date.now() / 1000);
  return (r.extra.assetTransferMethod ?? 'eip3009') === 'eip3009' && (r.extra.operatorType ?? 'delegated') === 'delegated' && (r.extra.paymentFlow ?? 'escrow') === 'escrow'
    && zero(r.extra.receiverAuthorizer) && zero(r.extra.policy) && r.extra.captureDeadline <= now + 86_400 && r.extra.refundDeadline >= r.extra.captureDeadline
    && r.extra.minFeeBps <= r.extra.maxFeeBps;
}

/**
 * A batch-settlement offer this wallet pays: deposits by ERC-3009 (the default) or Permit2 (the wallet
 * approves Permit2 once, relayer-paid, as for upto), and a withdrawal delay of at most a day (how long a
 * deposit stays locked if the seller disappears). chooseOffer prefers an ERC-3009 one when a route offers both.
 */
function payableBatchSettlementOffer(r: BatchSettlementRequirementsV2Buyer): boolean {
  return ['eip3009', 'permit2'].includes(r.extra.assetTransferMethod ?? 'eip3009') && (r.extra.withdrawDelay ?? CHANNEL_WITHDRAW_DELAY) <= MAX_CHANNEL_WITHDRAW_DELAY;
}

/** A channel offer deposited into by ERC-3009: no Permit2 approval to send first. */
const depositsByErc3009 = (o: Offer) => o.scheme === 'batch-settlement' && (o.requirement.extra.assetTransferMethod ?? 'eip3009') === 'eip3009';

/**
 * A seller's 402 refusing a voucher: its reason and, when it says so, the cumulative amount it has charged
 * on the channel (extra.channelState of its batch-settlement offer), for the buyer to sign the next one from.
 */
export function readChannelRefusal(res: GuardedResponse): { error?: string; channelId?: string; charged?: bigint } | undefined {
  const value = header(res, 'payment-required');
  if (!value) return undefined;
  const decoded = decodeBase64Json(value, 64 * 1024, MAX_REMOTE_JSON_DEPTH);
  if (!decoded.ok) return undefined;
  const body = decoded.value as { error?: unknown; accepts?: unknown };
  const error = typeof body?.error === 'string' ? body.error.slice(0, 200) : undefined;
  const offer = Array.isArray(body?.accepts) ? (body.accepts as Array<{ scheme?: unknown; extra?: unknown }>).find((a) => a?.scheme === 'batch-settlement') : undefined;
  const standing = ChannelStandingSchema.safeParse(offer?.extra);
  if (!standing.success) return { error };
  return { error, channelId: standing.data.channelState.channelId.toLowerCase(), charged: BigInt(standing.data.channelState.chargedCumulativeAmount) };
}
