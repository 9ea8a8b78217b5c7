import { parseGwei, type Address } from 'viem';
import type { Connection } from 'mongoose';
import type { ChainService } from '../chain/chain-service.js';
import type { Config } from '../platform/config.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import { BlockClock } from './block-clock.js';
import { RelayerLeases } from './relayer-leases.js';
import { RelayerPool } from './relayer-pool.js';
import { GAS_BASE, GAS_PER_TRANSFER, Settler } from './settler.js';

/** The settlement engine of one process: the chain's clock, this process's share of the relayer pool, the settler. */
export interface Settling {
  clock: BlockClock;
  relayers: RelayerPool;
  settler: Settler;
}

/**
 * Builds the engine from configuration. Nothing starts here: a server calls `relayers.start()` to take its
 * share of the pool (a worker or a CLI command never does, so it never holds a relayer account).
 */
export function createSettling(db: Connection, config: Config, chain: ChainService, log: Logger, metrics: Metrics): Settling {
  const settlementLog = log.child({ area: 'settlement' });
  let settler: Settler | undefined;
  const clock = new BlockClock(chain.publicClient, { busyPollMs: config.CHAIN_POLL_MS, idlePollMs: config.CHAIN_POLL_MS * 10, busy: () => settler?.busy() ?? false });
  const leaseTimes = { ttlMs: config.RELAYER_LEASE_TTL_MS, skewMs: Math.min(2_000, Math.floor(config.RELAYER_LEASE_TTL_MS / 5)) };
  const relayers = new RelayerPool(chain, clock, {
    accounts: chain.relayerAccounts,
    leases: new RelayerLeases(db, leaseTimes),
    heartbeatMs: Math.floor(config.RELAYER_LEASE_TTL_MS / 3),
    lane: {
      pipelineDepth: config.SETTLEMENT_PIPELINE_DEPTH,
      stuckBlocks: config.SETTLEMENT_STUCK_BLOCKS,
      maxFeePerGas: config.RELAYER_MAX_FEE_GWEI === undefined ? undefined : parseGwei(String(config.RELAYER_MAX_FEE_GWEI)),
      reserveGas: GAS_BASE + GAS_PER_TRANSFER * BigInt(config.SETTLEMENT_BATCH_MAX),
    },
    log: settlementLog,
    metrics,
  });
  settler = new Settler(chain, relayers, clock, {
    maxBatch: config.SETTLEMENT_BATCH_MAX,
    multicall: config.MULTICALL3_ADDRESS as Address,
    sendMarginMs: config.SETTLEMENT_SEND_MARGIN_MS,
    validityMarginSeconds: config.PAYMENT_VALIDITY_MARGIN_SECONDS,
  }, settlementLog, metrics);
  return { clock, relayers, settler };
}
