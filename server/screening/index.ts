import type { Connection } from 'mongoose';
import type { Address } from 'viem';
import type { ChainService } from '../chain/chain-service.js';
import type { ActivityLog } from '../platform/activity-log.js';
import type { Config } from '../platform/config.js';
import type { Logger } from '../platform/logger.js';
import type { Metrics } from '../platform/metrics.js';
import { AddressList } from './address-list.js';
import { SanctionsOracles } from './oracle-source.js';
import { ScreeningProvider } from './provider-source.js';
import { Screening } from './screening.js';
import { SharedVerdicts } from './shared-verdicts.js';
import type { ScreeningSource } from './sources.js';

export { Screening } from './screening.js';
export type { Party, ScreeningAt, ScreeningRefusal } from './screening.js';
export type { ScreenedNetwork } from './sources.js';

/**
 * The operator's list file (SCREENING_LIST_FILE), read and then watched; undefined: none configured. Read
 * before anything is opened: a file that cannot be read fails the start, as any configuration error.
 */
export async function loadScreeningList(config: Config, log: Logger): Promise<AddressList | undefined> {
  if (!config.SCREENING_LIST_FILE) return undefined;
  const list = new AddressList(config.SCREENING_LIST_FILE, log.child({ area: 'screening' }), config.SCREENING_LIST_RELOAD_MS);
  await list.start().catch((err) => { throw new Error(`SCREENING_LIST_FILE ${config.SCREENING_LIST_FILE} cannot be read: ${(err as Error).message}`); });
  return list;
}

/** The screening the configuration asks for: the list loaded by loadScreeningList, each EVM network's oracle (`configOf(chain).SANCTIONS_ORACLE_ADDRESS`), the provider. */
export function createScreening(deps: {
  conn: Connection; config: Config; list: AddressList | undefined; chains: readonly ChainService[]; configOf: (chain: ChainService) => Config;
  logs: ActivityLog; log: Logger; metrics: Metrics;
}): Screening {
  const { config, log, list } = deps;
  const sources: ScreeningSource[] = list ? [list] : [];
  if (list) {
    deps.metrics.onCollect(() => {
      deps.metrics.screeningListAddresses.set(list.size);
      deps.metrics.screeningListModified.set(list.modifiedAtMs / 1000);
    });
  }
  const oracles = new Map(deps.chains.flatMap((chain) => {
    const address = deps.configOf(chain).SANCTIONS_ORACLE_ADDRESS;
    return address ? [[chain.network, { client: chain.publicClient as never, address: address as Address }] as const] : [];
  }));
  if (oracles.size) sources.push(new SanctionsOracles(oracles));
  if (config.SCREENING_PROVIDER_URL) {
    sources.push(new ScreeningProvider({ url: config.SCREENING_PROVIDER_URL, ...(config.SCREENING_PROVIDER_TOKEN ? { token: config.SCREENING_PROVIDER_TOKEN } : {}), timeoutMs: config.SCREENING_PROVIDER_TIMEOUT_MS }));
  }
  if (sources.length) log.info({ sources: sources.map((s) => s.name), oracles: [...oracles.keys()], listed: list?.size, onError: config.SCREENING_ON_ERROR }, 'sanctions screening on');
  const verdicts = new SharedVerdicts(deps.conn, config.SCREENING_CACHE_TTL_MS);
  return new Screening(sources, verdicts, config.SCREENING_ON_ERROR, { logs: deps.logs, log: log.child({ area: 'screening' }), metrics: deps.metrics });
}
