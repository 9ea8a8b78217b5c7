import type { ChainService } from '../chain/chain-service.js';
import { AppError } from '../platform/errors.js';

// Without CHAIN_RPC_URL the backend still serves everything else; every payment route answers 503 through here.

export function requireChain(chain: ChainService | undefined): ChainService {
  if (!chain) throw new AppError(503, 'payments_unavailable', 'Payments are not configured on this server (CHAIN_RPC_URL)');
  return chain;
}
