import type { IdentityDoc } from '../identities/identity-model.js';
import type { WalletService } from './wallet-service.js';

/**
 * Adds `wallet: {address, network}` to whoami and the platform identity view. The wallet is created here
 * if it does not exist yet (its address is counterfactual, nothing is deployed); when the chain is not
 * configured or unreachable the identity shows `wallet: null` rather than failing.
 */
export function walletDetail(wallets: WalletService) {
  return async (identity: IdentityDoc): Promise<Record<string, unknown>> => {
    if (!wallets.available) return {};
    try {
      const wallet = await wallets.forIdentity({ orgId: identity.orgId, identityId: identity._id });
      return { wallet: { address: wallet.address, network: wallet.network } };
    } catch {
      return {};
    }
  };
}
