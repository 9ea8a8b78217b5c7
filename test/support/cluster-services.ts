import { startDevChain, type DevChain } from '../../server/dev/chain/dev-chain.js';
import { provideMongoServer, type MongoServer } from '../../server/dev/database/mongo-server.js';
import type { Cluster } from './cluster.js';
import { takeMachine } from './machine-share.js';

// Apart from cluster.ts, which bench/scale-out.ts also loads: this one holds the machine through jest's
// machine-share lock, which exists only in a test run.

/** What a cluster test runs on, of its own; `stop` ends them (and the cluster, if one was started) and gives the machine back. */
export interface ClusterServices { chain: DevChain; mongo: MongoServer; stop(cluster?: Cluster): Promise<void> }

/**
 * A cluster test file's services: the machine to itself (test/support/machine-share.ts: the rest of the
 * suite waits), a chain with 1 s blocks, and a database server of its own: it is restarted mid-run, and
 * several busy processes on the suite's shared one would slow every other test file (and be slowed by them).
 */
export async function clusterServices(): Promise<ClusterServices> {
  const releaseMachine = await takeMachine();
  let chain: DevChain;
  let mongo: MongoServer;
  try {
    [chain, mongo] = await Promise.all([startDevChain({ blockTime: 1, mintAmountUsdc: '100000' }), provideMongoServer({ env: { ...process.env, MONGODB_URI: '' } })]);
  } catch (err) {
    releaseMachine(); // the rest of the suite goes on
    throw err;
  }
  return {
    chain, mongo,
    async stop(cluster) {
      await cluster?.stop();
      await chain.stop();
      await mongo.stop();
      releaseMachine();
    },
  };
}
