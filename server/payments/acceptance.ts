import { getAddress } from 'viem';
import type { Connection, Model } from 'mongoose';
import { AppError } from '../platform/errors.js';
import { TtlCache } from '../platform/ttl-cache.js';
import type { ChangeFeed } from '../platform/change-feed.js';
import type { ActivityLog } from '../platform/activity-log.js';
import type { ChainService } from '../chain/chain-service.js';
import { sellerAccountSchema, type SellerAccountDoc } from './models.js';
import { isSolanaNetwork } from 'agentgate-x402-wire';
import { requireChain } from './chain-required.js';

// Whether an org accepts payments, and where they go: set by its platform key, read on every paid
// request (from memory), and turned into the settings a seller's middleware builds its 402s from.

/** Whether a payment may go to `address`: the seller's payTo, one of its payees, or its payTo on another network. */
export function acceptsPayee(seller: Pick<SellerAccountDoc, 'payTo' | 'payees' | 'payToByNetwork'>, address: string): boolean {
  const a = address.toLowerCase();
  return seller.payTo.toLowerCase() === a || [...(seller.payees ?? []), ...Object.values(seller.payToByNetwork ?? {})].some((p) => p.toLowerCase() === a);
}

/** What a 402 for this seller names (the schemes' own settings aside: settingsFor adds them). */
export function offerSettings(chain: ChainService, seller: SellerAccountDoc) {
  return {
    network: chain.network, chainId: chain.chainId, asset: chain.usdc.address, payTo: seller.payTo,
    assetName: chain.usdc.name, assetVersion: chain.usdc.version, maxTimeoutSeconds: 60,
  };
}

/**
 * Seller acceptance settings, served from memory (SELLER_CACHE_TTL_MS); a change in any process reaches
 * this one's cache within a poll of the change feed.
 */
export class SellerAcceptance {
  readonly sellers: Model<SellerAccountDoc>;
  /** orgId -> acceptance; null caches "none". */
  private readonly cache: TtlCache<SellerAccountDoc | null>;

  constructor(
    conn: Connection,
    private readonly chain: ChainService | undefined,
    private readonly changes: ChangeFeed,
    private readonly logs: ActivityLog,
    cacheTtlMs: number,
    /** What the payment schemes add to a seller's settings (the upto facilitator), asked when they are read. */
    private readonly schemeSettings: () => Promise<Record<string, unknown>>,
    /** The deployment's other networks as a seller's routes offer them (their token, their upto facilitator). */
    private readonly otherNetworks: () => Promise<Array<Record<string, unknown>>> = async () => [],
    /** The Solana networks the deployment settles on, as a seller's routes offer them (with a fee payer of its pool). */
    private readonly solanaNetworks: () => Array<{ network: string; caip2: string; asset: string; feePayer: string }> = () => [],
  ) {
    this.sellers = conn.models.SellerAccount ?? conn.model<SellerAccountDoc>('SellerAccount', sellerAccountSchema, 'seller_accounts');
    this.cache = new TtlCache(cacheTtlMs);
    changes.on('seller', (orgId) => this.cache.delete(orgId));
    changes.onReset(() => this.cache.deleteWhere(() => true));
  }

  async set(orgId: string, input: { enabled: boolean; payTo: string; payees?: string[]; payToByNetwork?: Record<string, string>; channelClaimEverySeconds?: number }): Promise<SellerAccountDoc> {
    const payTo = getAddress(input.payTo);
    const payees = [...new Set((input.payees ?? []).map((a) => getAddress(a)))].filter((a) => a !== payTo);
    // Keys are v1 names (routes.ts reads either spelling); only another network this backend settles on.
    const others = [...(await this.otherNetworks()).map((n) => n.network as string), ...this.solanaNetworks().map((n) => n.network)];
    for (const network of Object.keys(input.payToByNetwork ?? {})) {
      if (!others.includes(network)) throw new AppError(422, 'network_not_served', `payToByNetwork names ${network}, which is not one of this backend's other networks (${others.join(', ') || 'none'}); payTo is the default network's`);
    }
    // A Solana address is case-sensitive base58 (kept as given); an EVM one is checksummed.
    const payToByNetwork = Object.fromEntries(Object.entries(input.payToByNetwork ?? {}).map(([network, address]) => [network, isSolanaNetwork(network) ? address : getAddress(address)]));
    // A PUT: what it leaves out goes back to the default.
    const fields = { enabled: input.enabled, payTo, payees, payToByNetwork, updatedAt: new Date() };
    const every = input.channelClaimEverySeconds;
    const update = every === undefined ? { $set: fields, $unset: { channelClaimEverySeconds: '' } } : { $set: { ...fields, channelClaimEverySeconds: every } };
    const doc = await this.sellers.findOneAndUpdate({ _id: orgId }, update, { upsert: true, returnDocument: 'after' }).lean();
    await this.changes.publish('seller', orgId);
    await this.logs.record({ orgId, action: 'payments.acceptance_updated', category: 'payments', description: `Payment acceptance ${input.enabled ? 'enabled' : 'disabled'}`, targetType: 'org', targetId: orgId, metadata: { payTo, payees, payToByNetwork, channelClaimEverySeconds: input.channelClaimEverySeconds ?? null } });
    return doc!;
  }

  /** The org's acceptance as stored (enabled or not), read from the database. */
  async get(orgId: string): Promise<SellerAccountDoc | null> {
    return this.sellers.findById(orgId).lean();
  }

  /** The seller account of a seller key's org, if it accepts payments (served from memory). */
  async accepting(orgId: string): Promise<SellerAccountDoc | null> {
    const seller = await this.cache.through(orgId, () => this.get(orgId));
    return seller?.enabled ? seller : null;
  }

  /** What a seller's middleware caches at start-up to build challenges locally. */
  async settingsFor(orgId: string) {
    const seller = await this.get(orgId);
    if (!seller?.enabled) throw new AppError(409, 'payments_not_enabled', 'Payment acceptance is not turned on for this org (PUT /v0/payments/acceptance)');
    const others = (await this.otherNetworks()).map((n) => {
      const payTo = seller.payToByNetwork?.[n.network as string];
      return payTo ? { ...n, payTo } : n;
    });
    // A Solana network is offered only where the seller has an address there (its EVM payTo is not one).
    const solana = this.solanaNetworks().flatMap((n) => {
      const payTo = seller.payToByNetwork?.[n.network];
      return payTo ? [{ network: n.caip2, asset: n.asset, feePayer: n.feePayer, payTo }] : [];
    });
    return { ...offerSettings(requireChain(this.chain), seller), ...await this.schemeSettings(), ...(others.length ? { networks: others } : {}), ...(solana.length ? { solanaNetworks: solana } : {}) };
  }
}
