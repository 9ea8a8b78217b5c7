/**
 * x402 `exact` on Solana, side by side with the official x402 stack in one run, on one machine, one local
 * Solana (LiteSVM behind the JSON-RPC API, slots every 400 ms) and one load generator: buyers paying with
 * the official client (`@x402/fetch` with `@x402/svm`'s exact client scheme), in a worker thread
 * (bench/support/paying-buyers.ts), each buyer one call at a time.
 *
 *   npm run bench -- solana        (SOLANA_ROUNDS=3 SOLANA_WINDOW_MS=4000 to change sizes; SOLANA_MODES=arrival or slot
 *                                   for one chain mode; SOLANA_CONCURRENCIES=1,16)
 *
 * The official stack: `@x402/express` with `@x402/svm`'s exact server scheme over the official SVM
 * facilitator in the same process (its own fee payer, no database). Ours: our Express middleware with a
 * price, offering the seller's Solana address, over our backend in the bench's process (as in
 * bench/middleware.ts): the seller asks the backend to redeem, the backend checks the transaction,
 * co-signs it, claims it by a unique insert, sends it with the node's preflight (the simulation), waits
 * for its status and records the payment with its receipt. Closed loops of 1 and 16 buyers; SOLANA_ROUNDS rounds, the stacks' order
 * alternating, each run starting at an arbitrary moment; each run SOLANA_RAMP_MS of ramp-up, then
 * SOLANA_WINDOW_MS measured (SOLANA_SLOT_WINDOW_MS, 12000, on the chain with slots). Target: our paid req/s at least the official stack's.
 *
 * Two chains: transactions landing on arrival (LiteSVM's own way, the instant tests want: what each
 * stack itself costs), and landing when their 400 ms slot closes, as on Solana (what a buyer waits for).
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type Express } from 'express';
import { createKeyPairSignerFromPrivateKeyBytes, generateKeyPairSigner, getBase58Decoder } from '@solana/kit';
import { x402Facilitator } from '@x402/core/facilitator';
import { x402ResourceServer, type FacilitatorClient } from '@x402/core/server';
import { paymentMiddleware as officialPaymentMiddleware } from '@x402/express';
import { toFacilitatorSvmSigner } from '@x402/svm';
import { ExactSvmScheme as OfficialSvmFacilitator } from '@x402/svm/exact/facilitator';
import { ExactSvmScheme as OfficialSvmServer } from '@x402/svm/exact/server';
import type { Hex } from 'viem';
import { paymentMiddleware } from '../adapters/express.js';
import { startDevChain } from '../server/dev/chain/dev-chain.js';
import { DEV_ACCOUNTS } from '../server/dev/chain/dev-accounts.js';
import { DEV_USDC_NAME, DEV_USDC_VERSION } from '../server/dev/chain/dev-chain.js';
import { provideMongoServer } from '../server/dev/database/mongo-server.js';
import { devSolanaSecretKey, devSolanaSigner, startDevSolana, type DevSolana } from '../server/dev/solana/dev-solana.js';
import { loadConfig } from '../server/platform/config.js';
import { freePort } from '../server/platform/net.js';
import { startServer } from '../server/server.js';
import { backendCaller, closeBackend } from './support/backend-calls.js';
import { startBuyers, type RunResult } from './support/paying-buyers.js';

const ROUNDS = Number(process.env.SOLANA_ROUNDS ?? 3);
const RAMP_MS = Number(process.env.SOLANA_RAMP_MS ?? 1_000);
const WINDOW_MS = Number(process.env.SOLANA_WINDOW_MS ?? 4_000);
/** With 400 ms slots a call takes a slot or two: a longer window, so a count of calls is not a count of slots. */
const SLOT_WINDOW_MS = Number(process.env.SOLANA_SLOT_WINDOW_MS ?? 12_000);
const CONCURRENCIES = (process.env.SOLANA_CONCURRENCIES ?? '1,16').split(',').map(Number);
const PRICE_ATOMIC = 1_000n;
const DEVNET = 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1';

type Cleanup = Array<() => Promise<unknown>>;
const log = (line: string) => process.stdout.write(`${line}\n`);
const median = (xs: number[]) => { const s = [...xs].sort((a, b) => a - b); return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2; };

const MODES = [
  { name: 'transactions landing on arrival', landAtSlot: false },
  { name: 'transactions landing when their 400 ms slot closes, as on Solana', landAtSlot: true },
].filter((m) => !process.env.SOLANA_MODES || process.env.SOLANA_MODES.split(',').includes(m.landAtSlot ? 'slot' : 'arrival'));

async function main() {
  log('starting MongoDB-wire server and anvil (our backend\'s default network) ...');
  const [mongo, evm] = await Promise.all([provideMongoServer(), startDevChain()]);
  try {
    for (const mode of MODES) {
      const cleanup: Cleanup = [];
      try {
        await sideBySide(mode, mongo.uri, evm, cleanup);
      } finally {
        for (const fn of cleanup.reverse()) await fn().catch(() => {});
      }
    }
  } finally {
    await evm.stop();
    await mongo.stop();
  }
}

async function sideBySide(mode: (typeof MODES)[number], mongoUri: string, evm: Awaited<ReturnType<typeof startDevChain>>, cleanup: Cleanup) {
  const solana = await startDevSolana({ landAtSlot: mode.landAtSlot });
  cleanup.push(() => solana.stop());
  const buyers = Math.max(...CONCURRENCIES);
  const windowMs = mode.landAtSlot ? SLOT_WINDOW_MS : WINDOW_MS;
  log(`\n${mode.name}: ${buyers} buyers per stack, closed loops of ${CONCURRENCIES.join(', ')}, ${ROUNDS} rounds, each run ${RAMP_MS} ms of ramp-up then ${windowMs} ms measured`);
  const [ourKeys, officialKeys] = [await fundBuyers(solana, buyers), await fundBuyers(solana, buyers)];
  const ours = await ourStack(mongoUri, evm, solana, cleanup);
  const official = await officialStack(solana, cleanup);
  const stacks = {
    agentgate: buyersFor(`${ours}/weather`, ourKeys, solana, cleanup),
    official: buyersFor(`${official}/weather`, officialKeys, solana, cleanup),
  };
  // A warm-up, not counted: the first payments compile each stack's paths (and the buyers' mint caches).
  for (const [name, b] of Object.entries(stacks)) {
    const warm = await b.payEach(2);
    log(`warm-up ${name}: ${warm.paid} paid${warm.failed ? `, ${warm.failed} failed: ${JSON.stringify(warm.failures)}` : ''}`);
  }
  const rows: Record<string, RunResult[]> = {};
  for (let round = 0; round < ROUNDS; round++) {
    for (const concurrency of CONCURRENCIES) {
      const order = (round + CONCURRENCIES.indexOf(concurrency)) % 2 === 0 ? (['agentgate', 'official'] as const) : (['official', 'agentgate'] as const);
      for (const name of order) {
        // An arbitrary moment, so no run starts aligned with a slot.
        await new Promise((r) => setTimeout(r, Math.random() * 400));
        const result = await stacks[name].run(concurrency, RAMP_MS, windowMs);
        (rows[`${concurrency}|${name}`] ??= []).push(result);
        log(`round ${round + 1} c${String(concurrency).padEnd(3)} ${name.padEnd(10)} ${result.perSecond.toFixed(1)} req/s, call p50 ${result.call.p50.toFixed(2)} ms p99 ${result.call.p99.toFixed(2)} ms, paid request p50 ${result.paidRequest.p50.toFixed(2)} ms, 402 p50 ${result.challenge.p50.toFixed(2)} ms${result.failed ? `, ${result.failed} failed: ${JSON.stringify(result.failures)}` : ''}`);
      }
    }
  }
  const m = (list: RunResult[], pick: (r: RunResult) => number) => median(list.map(pick));
  log(`\nSolana exact, ${mode.name}: medians over ${ROUNDS} rounds (each run ${windowMs / 1000} s measured)`);
  log('| concurrency | stack | paid req/s | call p50 | call p99 | paid request p50 | 402 p50 | failed |');
  log('|---|---|---|---|---|---|---|---|');
  for (const concurrency of CONCURRENCIES) {
    for (const name of ['agentgate', 'official'] as const) {
      const list = rows[`${concurrency}|${name}`]!;
      log(`| ${concurrency} | ${name} | ${m(list, (r) => r.perSecond).toFixed(1)} | ${m(list, (r) => r.call.p50).toFixed(2)} ms | ${m(list, (r) => r.call.p99).toFixed(2)} ms | ${m(list, (r) => r.paidRequest.p50).toFixed(2)} ms | ${m(list, (r) => r.challenge.p50).toFixed(2)} ms | ${list.reduce((a, r) => a + r.failed, 0)} |`);
    }
  }
  for (const concurrency of CONCURRENCIES) {
    const [o, t] = [rows[`${concurrency}|agentgate`]!, rows[`${concurrency}|official`]!];
    const ratio = m(o, (r) => r.perSecond) / m(t, (r) => r.perSecond);
    log(`c${concurrency}: ours/official paid req/s ${ratio.toFixed(2)} (per round ${o.map((r, i) => (r.perSecond / t[i]!.perSecond).toFixed(2)).join(', ')}); target >= 1.00: ${ratio >= 1 ? 'met' : 'MISSED'}`);
  }
}

/** Fresh buyers holding USDC on the local Solana (and no SOL: the fee payer pays), as 32-byte seeds. */
async function fundBuyers(solana: DevSolana, n: number): Promise<Hex[]> {
  const keys: Hex[] = [];
  for (let i = 0; i < n; i++) {
    const seed = randomBytes(32);
    const signer = await createKeyPairSignerFromPrivateKeyBytes(new Uint8Array(seed));
    await solana.fund(signer.address, 1_000_000_000n, 0n);
    keys.push(`0x${seed.toString('hex')}`);
  }
  return keys;
}

/** Our backend (settling on Solana with the dev fee payer) and our Express middleware route offering Solana. */
async function ourStack(mongoUri: string, evm: Awaited<ReturnType<typeof startDevChain>>, solana: DevSolana, cleanup: Cleanup): Promise<string> {
  const port = await freePort();
  const feePayer = await devSolanaSigner('fee-payer');
  solana.ledger.airdrop(feePayer.address, 1_000_000_000_000n);
  const env: Record<string, string> = {
    AGENTGATE_MODE: 'dev', HOST: '127.0.0.1', LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn', PORT: String(port), BASE_URL: `http://127.0.0.1:${port}`,
    MAIL_DOMAIN: 'bench.test', DID_DOMAIN: `127.0.0.1%3A${port}`, MASTER_KEY: randomBytes(32).toString('hex'),
    MONGODB_URI: mongoUri, MONGODB_DB: `bench_${randomBytes(4).toString('hex')}`, SMTP_PORT: '0',
    CHAIN_RPC_URL: evm.rpcUrl, CHAIN_NETWORK: 'base-sepolia', USDC_ADDRESS: evm.usdcAddress, USDC_EIP712_NAME: DEV_USDC_NAME, USDC_EIP712_VERSION: DEV_USDC_VERSION,
    RELAYER_PRIVATE_KEY: DEV_ACCOUNTS[0]!.privateKey,
    NETWORKS: 'base-sepolia,solana-devnet', SOLANA_DEVNET_RPC_URL: solana.rpcUrl, SOLANA_DEVNET_FEE_PAYER_KEYS: getBase58Decoder().decode(await devSolanaSecretKey('fee-payer')),
  };
  const backend = await startServer(loadConfig(env));
  if (process.env.SOLANA_COUNT_COMMANDS) {
    const counts = new Map<string, number>();
    (backend.app.db.getClient() as any).on('commandStarted', (e: { commandName: string; command: Record<string, unknown> }) => { const k = `${e.commandName} ${String(e.command[e.commandName] ?? '')}`; counts.set(k, (counts.get(k) ?? 0) + 1); });
    process.on('exit', () => console.error('COMMANDS', JSON.stringify([...counts].sort((a, b) => b[1] - a[1]).slice(0, 25))));
  }
  cleanup.push(closeBackend(backend, mongoUri, env.MONGODB_DB!));
  const call = backendCaller(backend.url);
  const payTo = await generateKeyPairSigner();
  await solana.fund(payTo.address, 0n, 0n);
  const platformKey = (await call('POST', '/v0/agent-signup', undefined, {})).platform_key as string;
  await call('PUT', '/v0/payments/acceptance', platformKey, { enabled: true, payTo: DEV_ACCOUNTS[9]!.address, payToByNetwork: { 'solana-devnet': payTo.address } });
  const sellerKey = (await call('POST', '/v0/payments/seller-keys', platformKey, {})).apiKey as string;
  const app = express();
  app.use(paymentMiddleware({ backendUrl: backend.url, apiKey: sellerKey, routes: { 'GET /weather': { price: '$0.001', description: 'Weather' } } }));
  const url = await serve(withWeather(app), cleanup);
  await call('POST', '/v0/payments/endpoints', platformKey, { url: `${url}/weather`, priceUsdc: '0.001', skipUrlCheck: true });
  return url;
}

/** The official stack: `@x402/express` with the exact SVM server scheme over the official SVM facilitator, in process. */
async function officialStack(solana: DevSolana, cleanup: Cleanup): Promise<string> {
  const feePayer = await generateKeyPairSigner();
  solana.ledger.airdrop(feePayer.address, 1_000_000_000_000n);
  const facilitator = new x402Facilitator().register(DEVNET as never, new OfficialSvmFacilitator(toFacilitatorSvmSigner(feePayer, { defaultRpcUrl: solana.rpcUrl })));
  const local: FacilitatorClient = {
    verify: (payload, requirements) => facilitator.verify(payload, requirements),
    settle: (payload, requirements) => facilitator.settle(payload, requirements),
    getSupported: async () => facilitator.getSupported() as never,
  };
  const payTo = await generateKeyPairSigner();
  await solana.fund(payTo.address, 0n, 0n);
  const resourceServer = new x402ResourceServer(local).register(DEVNET as never, new OfficialSvmServer());
  const app = express();
  app.use(officialPaymentMiddleware({
    'GET /weather': { accepts: { scheme: 'exact', network: DEVNET as never, payTo: payTo.address, price: { asset: solana.usdcMint, amount: PRICE_ATOMIC.toString() } }, description: 'Weather', mimeType: 'application/json' },
  }, resourceServer));
  return serve(withWeather(app), cleanup);
}

function withWeather(app: Express): Express {
  app.get('/weather', (_req, res) => { res.json({ city: 'Oslo', temperatureC: 7 }); });
  return app;
}

async function serve(app: Express, cleanup: Cleanup): Promise<string> {
  const server: Server = createServer(app);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanup.push(async () => { server.closeAllConnections(); await new Promise((resolve) => server.close(resolve)); });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function buyersFor(url: string, keys: Hex[], solana: DevSolana, cleanup: Cleanup) {
  const buyers = startBuyers({ url, scheme: 'exact-svm', keys, rpcUrl: solana.rpcUrl, network: DEVNET, usdc: solana.usdcMint as never });
  cleanup.push(() => buyers.stop());
  return buyers;
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
