import { type Address } from 'viem';
import type { Config } from '../../server/platform/config.js';
import { createChainService, type ChainService } from '../../server/chain/chain-service.js';
import { BlockClock } from '../../server/settlement/block-clock.js';
import { RelayerPool } from '../../server/settlement/relayer-pool.js';
import { GAS_BASE, GAS_PER_TRANSFER, Settler } from '../../server/settlement/settler.js';
import { createLogger } from '../../server/platform/logger.js';
import { Metrics } from '../../server/platform/metrics.js';

/**
 * A Settler built as a server builds it (clock, pool, settler) from a test config, but using every relayer
 * account of the config without leases: one process alone, as the unit tests of the settler need.
 */
export async function standaloneSettler(config: Config): Promise<{ settler: Settler; chain: ChainService; pool: RelayerPool; stop(): Promise<void> }> {
  const chain = (await createChainService(config))!;
  const log = createLogger({ level: (process.env.LOG_LEVEL as 'info' | undefined) ?? 'silent' });
  const metrics = new Metrics({ defaultMetrics: false });
  let settler: Settler | undefined;
  const clock = new BlockClock(chain.publicClient, { busyPollMs: config.CHAIN_POLL_MS, busy: () => settler?.busy() ?? false });
  const pool = new RelayerPool(chain, clock, {
    accounts: chain.relayerAccounts,
    heartbeatMs: 5_000,
    lane: { pipelineDepth: config.SETTLEMENT_PIPELINE_DEPTH, stuckBlocks: config.SETTLEMENT_STUCK_BLOCKS, reserveGas: GAS_BASE + GAS_PER_TRANSFER * BigInt(config.SETTLEMENT_BATCH_MAX) },
    log, metrics,
  });
  settler = new Settler(chain, pool, clock, {
    maxBatch: config.SETTLEMENT_BATCH_MAX, multicall: config.MULTICALL3_ADDRESS as Address,
    sendMarginMs: config.SETTLEMENT_SEND_MARGIN_MS, validityMarginSeconds: config.PAYMENT_VALIDITY_MARGIN_SECONDS,
  }, log, metrics);
  await pool.start();
  return { settler, chain, pool, stop: () => pool.stop() };
}
