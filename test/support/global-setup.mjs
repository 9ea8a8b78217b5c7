// Starts the real services the suite talks to, once for all test files:
//  - a MongoDB-wire server (MONGODB_URI, else FerretDB on a throw-away PostgreSQL of our own, see
//    server/dev/database/mongo-server.ts); each test file then uses its own database;
//  - a local chain (anvil) with Circle's USDC (FiatTokenV2_2 behind its proxy) and test USDC minted to dev
//    accounts 1..9, which act as per-worker treasuries (see test/support/chain.ts).
// Plain ESM loading our TypeScript through tsx: jest's module mapper does not apply to global setup.
import { tsImport } from 'tsx/esm/api';
import { statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export default async function globalSetup() {
  const log = (line) => process.stderr.write(`[test services] ${line}\n`);
  const { provideMongoServer } = await tsImport('../../server/dev/database/mongo-server.ts', import.meta.url);
  const { startDevChain } = await tsImport('../../server/dev/chain/dev-chain.ts', import.meta.url);
  const [mongo, chain] = await Promise.all([
    provideMongoServer({ log }),
    startDevChain({ mintAmountUsdc: '1000000' }),
  ]);
  log(`anvil on ${chain.rpcUrl} (chain ${chain.chainId}), USDC at ${chain.usdcAddress}`);
  // The official Python SDK, installed once per machine (~/.cache/agentgate) before any test opens a
  // connection: the install blocks its process for minutes, and done inside a test file (as it was on a
  // fresh machine) it stalled that file's own servers past their keep-alive timeouts and failed its next
  // request with ECONNRESET. Without Python the suite still runs; the Python tests say what is missing.
  const { x402Python } = await tsImport('./python-sdk.ts', import.meta.url);
  try {
    x402Python((line) => log(`python sdk: ${line}`));
  } catch (err) {
    log(`the official Python SDK is not installed (${err.message}); the Python interop tests will fail`);
  }
  process.env.AGENTGATE_TEST_MONGODB_URI = mongo.uri;
  process.env.AGENTGATE_TEST_RPC_URL = chain.rpcUrl;
  process.env.AGENTGATE_TEST_USDC = chain.usdcAddress;
  process.env.AGENTGATE_TEST_FACTORY = chain.factoryAddress;
  // Where test files take turns on the machine (test/support/machine-share.ts): one folder per run.
  process.env.AGENTGATE_TEST_LOCKS = join(tmpdir(), `agentgate-test-locks-${process.pid}-${Date.now()}`);
  const services = { mongo, chain, stopping: false };
  globalThis.__AGENTGATE_SERVICES__ = services;
  // A database that stops in the middle of the run fails every test after it: say so once, with why it
  // stopped and how much disk was left, so the failure names its cause (one CI run lost its PostgreSQL).
  mongo.exited?.then((reason) => {
    if (services.stopping) return;
    let free = 'unknown';
    try { const s = statfsSync(tmpdir()); free = `${Math.round((s.bavail * s.bsize) / 1048576)} MiB`; } catch { /* no statfs */ }
    log(`the test database stopped in the middle of the run (${reason}); free space in ${tmpdir()}: ${free}`);
  });
}
