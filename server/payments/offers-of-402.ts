import { z } from 'zod';
import { decodeBase64Json, toCaip2Network } from 'agentgate-x402-wire';

// What a 402 offers, whatever the x402 generation that speaks it: the v1 JSON body's `accepts` and the v2
// `PAYMENT-REQUIRED` header's. A route of a v2-only scheme (upto, batch-settlement, auth-capture, exact
// through Permit2) makes its offer in the header alone and answers the v1 body with `accepts: []`.

/** One payment a 402 offers: its scheme, where, in what, to whom and how much (atomic units). */
export interface OfferedPayment {
  x402Version: 1 | 2;
  scheme: string;
  /** CAIP-2 (`eip155:84532`), also for a v1 offer, whose network name is translated. */
  network: string;
  asset: string;
  payTo: string;
  amount: bigint;
}

const Atomic = z.string().regex(/^\d{1,78}$/);
const Common = { scheme: z.string().min(1), network: z.string().min(1), asset: z.string().min(1), payTo: z.string().min(1) };
const V1Offer = z.object({ ...Common, maxAmountRequired: Atomic });
const V2Offer = z.object({ ...Common, amount: Atomic });
const V1Body = z.object({ x402Version: z.literal(1), accepts: z.array(z.unknown()).max(64) });
const V2Required = z.object({ x402Version: z.literal(2), accepts: z.array(z.unknown()).max(64) });

/** The body and headers of a 402 as the endpoint check fetched them. */
export interface Fetched402 { bodyText: string; headers: Record<string, string | string[] | undefined> }

/**
 * Every well-formed offer of a 402, from both generations. An offer that does not parse is left out (the
 * check then says what is missing); `spoken` says which generations the 402 spoke at all.
 */
export function offersOf402(response: Fetched402): { offers: OfferedPayment[]; spoken: Array<1 | 2> } {
  const offers: OfferedPayment[] = [];
  const spoken: Array<1 | 2> = [];
  let body: unknown;
  try { body = JSON.parse(response.bodyText); } catch { body = undefined; }
  const v1 = V1Body.safeParse(body);
  if (v1.success) {
    spoken.push(1);
    for (const raw of v1.data.accepts) {
      const offer = V1Offer.safeParse(raw);
      if (offer.success) offers.push({ x402Version: 1, ...common(offer.data), amount: BigInt(offer.data.maxAmountRequired) });
    }
  }
  const header = response.headers['payment-required'];
  const decoded = typeof header === 'string' ? decodeBase64Json(header) : undefined;
  const v2 = decoded?.ok ? V2Required.safeParse(decoded.value) : undefined;
  if (v2?.success) {
    spoken.push(2);
    for (const raw of v2.data.accepts) {
      const offer = V2Offer.safeParse(raw);
      if (offer.success) offers.push({ x402Version: 2, ...common(offer.data), amount: BigInt(offer.data.amount) });
    }
  }
  return { offers, spoken };
}

function common(offer: { scheme: string; network: string; asset: string; payTo: string }) {
  return { scheme: offer.scheme, network: toCaip2Network(offer.network), asset: offer.asset, payTo: offer.payTo };
}
