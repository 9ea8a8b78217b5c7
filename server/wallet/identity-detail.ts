import type { IdentityDoc } from '../identities/identity-model.js';
import { TtlCache } from '../platform/ttl-cache.js';
import type { WalletService } from './wallet-service.js';

/**
 * Adds `wallet: {address, network}` to whoami and the platform identity view. The wallet is created here
 * if it does not exist yet (its address is counterfactual, nothing is deployed); when the chain is not
 * configured or unreachable the identity shows `wallet: null` rather than failing.
 */
export function walletDetail(wallets: WalletService) {
  // A wallet's address never changes once created, so whoami need not look it up again.
  const known = new TtlCache<{ address: string; network: string }>(10 * 60_000);
  return async (identity: IdentityDoc): Promise<Record<string, unknown>> => {
    if (!wallets.available) return {};
    try {
      const cached = known.get(identity._id);
      if (cached) return { wallet: cached };
      const wallet = await wallets.forIdentity({ orgId: identity.orgId, identityId: identity._id });
      known.set(identity._id, { address: wallet.address, network: wallet.network });
      return { wallet: { address: wallet.address, network: wallet.network } };
    } catch {
      return {};
    }
  };
}
