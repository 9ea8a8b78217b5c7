import { x402Client } from '@x402/core/client';
import { BatchSettlementEvmScheme as ChannelClientScheme, InMemoryClientChannelStorage } from '@x402/evm/batch-settlement/client';
import { toClientEvmSigner } from '@x402/evm';
import { wrapFetchWithPayment } from '@x402/fetch';
import type { PrivateKeyAccount } from 'viem/accounts';
import { testChain } from './chain.js';

/** The dev chain as the official clients name it (it answers as Base Sepolia). */
export const CHANNEL_NETWORK = 'eip155:84532';

/**
 * The official batch-settlement buyer of `buyer` (`@x402/fetch` with `@x402/evm`'s channel client, its
 * in-memory channel storage, deposits of `depositMultiplier` calls), allowed to pay our dev USDC: `paying` is its fetch,
 * `sent` every PAYMENT-SIGNATURE header it sent, `scheme` the client scheme (its channel config). `chain`:
 * the suite's dev chain unless a test runs its own (`network`: the CAIP-2 id it pays on, the dev chain's by default).
 */
export function officialChannelClient(buyer: PrivateKeyAccount, depositMultiplier = 10, chain: { publicClient: unknown; usdc: string; network?: `eip155:${number}` } = testChain()) {
  const storage = new InMemoryClientChannelStorage();
  const scheme = new ChannelClientScheme(toClientEvmSigner(buyer, chain.publicClient as never), { depositPolicy: { depositMultiplier }, storage });
  const network = chain.network ?? CHANNEL_NETWORK;
  const sent: string[] = [];
  const recording: typeof fetch = async (input, init) => {
    const header = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined)).get('payment-signature');
    if (header) sent.push(header);
    return fetch(input, init);
  };
  const paying = wrapFetchWithPayment(recording, new x402Client().register(network, scheme)
    .setSpendControls({ allowedAssets: [{ network, asset: chain.usdc, maxAmountPerPayment: '1000000' }] }));
  return { scheme, paying, storage, sent };
}
