import type { Address } from 'viem';
import type { Model } from 'mongoose';
import type { ActivityLog } from '../../platform/activity-log.js';
import type { WalletService } from '../../wallet/wallet-service.js';
import type { WalletDoc } from '../../wallet/wallet-model.js';
import type { MandateOwner, MandateService, Reservation } from '../mandate-service.js';
import type { MandateDoc } from '../mandate-model.js';
import type { Offer, SettlementResponse } from '../challenge.js';
import type { OutgoingPaymentDoc } from '../outgoing-payment-model.js';
import type { PayRefusal } from '../pay-result.js';
import { contentOf, type OutgoingRequest, type PayFetch } from '../seller-answer.js';

/**
 * What every scheme's payer takes and answers. payments_pay (pay-service.ts) does what all schemes share
 * (fetch, challenge, offer, caps, reservation, balance, dry run) and hands the call to the payer of the
 * offer's scheme: `schemes/<scheme>/evm/payer.ts`, one per scheme, as the backend keeps its side in
 * `server/payments/schemes/<scheme>/evm/`.
 */

/**
 * Whether the call's reservation goes back when the payer returns: 'held' until a signature may have
 * reached the seller, 'in_flight' after, 'done' once the payer settled the reservation itself.
 */
export interface HoldState { hold: 'held' | 'in_flight' | 'done' }

export interface PayCall<S extends Offer['scheme'] = Offer['scheme']> {
  owner: MandateOwner;
  /** The URL as the caller gave it (the seller's 402 may name its resource differently: resourceUrl). */
  url: string;
  request: OutgoingRequest;
  method: string;
  wallet: WalletDoc;
  /** The wallets on the offer's network: what signs and sends for this call. */
  wallets: WalletService;
  offer: Extract<Offer, { scheme: S }>;
  /** The price, or the most a usage-priced offer may charge: what the mandate reserved. */
  amount: bigint;
  payTo: Address;
  resourceUrl: string;
  maxTimeoutSeconds: number;
  reservation: Reservation;
  mandate: MandateDoc;
  cost: Record<string, unknown>;
  state: HoldState;
}

/** The seller's answer as payments_pay hands it back (none when the paid request got no response). */
export type SellerContent = ReturnType<typeof contentOf> | { status: 0; contentType: null };

export const contentOrNone = (paid: Awaited<ReturnType<PayFetch>>): SellerContent => (paid.ok ? contentOf(paid.response) : { status: 0, contentType: null });

/** A paid call as payments_pay answers it, whatever the scheme. */
export type Paid = SellerContent & {
  ok: true; paid: true; paymentId: string; cost: Record<string, unknown>; txHash: string | null; payer: Address; recipient: Address; resource: string;
  mandate: Awaited<ReturnType<MandateService['present']>> | null; paymentResponse: SettlementResponse | null;
};

export interface SchemePayer<S extends Offer['scheme']> {
  pay(call: PayCall<S>): Promise<Paid | PayRefusal>;
}

/** What a payer needs: the wallet that signs, the mandates that cap it, the records it keeps, the fetch that sends. */
export interface PayerDeps {
  wallets: WalletService;
  mandates: MandateService;
  logs: ActivityLog;
  outgoing: Model<OutgoingPaymentDoc>;
  fetch: PayFetch;
}

/** Signatures live no longer than this, whatever the seller asks, so a stray one expires soon. */
const MAX_VALIDITY_SECONDS = 300;
const MIN_VALIDITY_SECONDS = 30;

/** How long a signature for this offer stays valid: the seller's timeout, within our bounds. */
export const validitySeconds = (maxTimeoutSeconds: number): number => Math.min(MAX_VALIDITY_SECONDS, Math.max(MIN_VALIDITY_SECONDS, maxTimeoutSeconds));
