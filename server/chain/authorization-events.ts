import { parseEventLogs, type Address, type Hex } from 'viem';
import { usdcAbi } from './usdc.js';
import type { ChainService } from './chain-service.js';

/** The transaction that used this EIP-3009 authorization on chain, if any (the token's AuthorizationUsed event). */
export async function findSettlementTx(chain: ChainService, authorizer: Address, nonce: Hex, fromBlock: bigint): Promise<Hex | undefined> {
  const logs = await chain.publicClient.getContractEvents({
    address: chain.usdc.address,
    abi: usdcAbi,
    eventName: 'AuthorizationUsed',
    args: { authorizer, nonce },
    fromBlock,
    toBlock: 'latest',
  }).catch(async () => {
    // Some nodes refuse indexed-argument filters over long ranges: fall back to decoding every log.
    const raw = await chain.publicClient.getLogs({ address: chain.usdc.address, fromBlock, toBlock: 'latest' });
    return parseEventLogs({ abi: usdcAbi, logs: raw, eventName: 'AuthorizationUsed' })
      .filter((l) => (l.args as { authorizer: Address }).authorizer.toLowerCase() === authorizer.toLowerCase() && (l.args as { nonce: Hex }).nonce === nonce);
  });
  return logs[0]?.transactionHash ?? undefined;
}

/**
 * A block a little before `when`, to search events from (nodes refuse log queries over long ranges):
 * estimated from the head and a block 1,000 back, with a day's margin on slow chains' side.
 */
export async function blockBefore(chain: ChainService, when: Date): Promise<bigint> {
  const head = await chain.publicClient.getBlock({ blockTag: 'latest' });
  if (head.number < 1_000n) return 0n;
  const earlier = await chain.publicClient.getBlock({ blockNumber: head.number - 1_000n });
  const secondsPerBlock = Math.max(0.05, Number(head.timestamp - earlier.timestamp) / 1_000);
  const secondsAgo = Math.max(0, Number(head.timestamp) - when.getTime() / 1000) + 600;
  const back = BigInt(Math.ceil(secondsAgo / secondsPerBlock));
  return head.number > back ? head.number - back : 0n;
}
