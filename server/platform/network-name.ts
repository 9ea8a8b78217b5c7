import { z } from 'zod';
import { findNetwork, findSolanaNetwork } from 'agentgate-x402-wire';

/**
 * An EVM network of the table named by v1 name ("polygon-amoy") or CAIP-2 id ("eip155:80002"), read as
 * the v1 name that payment records, wallets and configuration carry. For every input that names a network.
 */
export const networkName = z.string().max(64).transform((name, ctx) => {
  const network = findNetwork(name);
  if (network) return network.name;
  ctx.addIssue({ code: 'custom', message: 'must be an EVM network by v1 name or CAIP-2 id (polygon-amoy, eip155:80002)' });
  return z.NEVER;
});

/** An EVM or a Solana network by v1 name or CAIP-2 id, read as its v1 name ("solana-devnet"). */
export const anyNetworkName = z.string().max(64).transform((name, ctx) => {
  const network = findNetwork(name) ?? findSolanaNetwork(name);
  if (network) return network.name;
  ctx.addIssue({ code: 'custom', message: 'must be a network by v1 name or CAIP-2 id (polygon-amoy, eip155:80002, solana-devnet)' });
  return z.NEVER;
});
