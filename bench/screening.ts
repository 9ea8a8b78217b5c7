/**
 * What sanctions screening adds to a paid request: our stack twice in one run, on one anvil and one
 * database, once with screening off and once with a 100,000-address list file and the chain's sanctions
 * oracle (SCREENING_LIST_FILE, SANCTIONS_ORACLE_ADDRESS, the default verdict cache), with buyers paying
 * `exact` through the official client (`@x402/fetch` + `@x402/evm`, bench/support/paying-buyers.ts, in a
 * worker thread). Nobody paying is listed: this is the price every honest payment pays.
 *
 *   npm run bench -- screening     (SCREENING_ROUNDS=3 SCREENING_WINDOW_MS=4000 SCREENING_CONCURRENCY=16 to change sizes)
 *
 * Each backend has its own seller (our Express middleware), relayer and buyers; the runs alternate which
 * goes first, each starting at an arbitrary moment. Target (issue 50): the median paid request with
 * screening at most 1 ms slower than without, at concurrency 16. The difference of the two stacks' end-to-end
 * medians is printed, but on this machine it moves by tens of milliseconds between rounds of the same
 * stack (block timing, fee bumps, the other stack's load), so the verdict is taken inside the path: every
 * screening the `on` stack's requests wait for is timed during the rounds, and what screening adds to a
 * request is the median of those times by their number per request.
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import { createWalletClient, erc20Abi, http, parseUnits, publicActions, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { baseSepolia } from 'viem/chains';
import { paymentMiddleware } from '../adapters/express.js';
import { DEV_ACCOUNTS } from '../server/dev/chain/dev-accounts.js';
import { DEV_USDC_NAME, DEV_USDC_VERSION, startDevChain, type DevChain } from '../server/dev/chain/dev-chain.js';
import { provideMongoServer } from '../server/dev/database/mongo-server.js';
import { loadConfig } from '../server/platform/config.js';
import { freePort } from '../server/platform/net.js';
import { PUBLIC_SANCTIONS_ORACLE_ADDRESS } from '../server/screening/oracle-source.js';
import type { Screening } from '../server/screening/index.js';
import { screenedNetwork } from '../server/screening/sources.js';
import { startServer } from '../server/server.js';
import { backendCaller, closeBackend } from './support/backend-calls.js';
import { startBuyers, type RunResult } from './support/paying-buyers.js';

const ROUNDS = Number(process.env.SCREENING_ROUNDS ?? 3);
const RAMP_MS = Number(process.env.SCREENING_RAMP_MS ?? 1_000);
const WINDOW_MS = Number(process.env.SCREENING_WINDOW_MS ?? 4_000);
const CONCURRENCY = Number(process.env.SCREENING_CONCURRENCY ?? 16);
const LISTED = 100_000;
const NETWORK = 'eip155:84532';

type Cleanup = Array<() => Promise<unknown>>;
const screenings: Screening[] = [];
const log = (line: string) => process.stdout.write(`${line}\n`);
const median = (xs: number[]) => { const s = [...xs].sort((a, b) => a - b); return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2; };

async function main() {
  log('starting MongoDB-wire server and anvil ...');
  const [mongo, chain] = await Promise.all([provideMongoServer(), startDevChain()]);
  const cleanup: Cleanup = [];
  try {
    const listFile = join(mkdtempSync(join(tmpdir(), 'screening-bench-')), 'listed.txt');
    writeFileSync(listFile, Array.from({ length: LISTED }, () => privateKeyToAccount(generatePrivateKey()).address).join('\n'));
    log(`a list file of ${LISTED.toLocaleString('en')} addresses; the oracle at ${PUBLIC_SANCTIONS_ORACLE_ADDRESS}; ${CONCURRENCY} buyers per stack, ${ROUNDS} rounds of ${WINDOW_MS} ms`);
    const [offKeys, onKeys] = await fundBuyers(chain, [CONCURRENCY, CONCURRENCY]);
    const stacks = {
      off: buyersFor(await ourStack(mongo.uri, chain, DEV_ACCOUNTS[0]!.privateKey, {}, cleanup), offKeys!, chain, cleanup),
      on: buyersFor(await ourStack(mongo.uri, chain, DEV_ACCOUNTS[2]!.privateKey, { SCREENING_LIST_FILE: listFile, SANCTIONS_ORACLE_ADDRESS: PUBLIC_SANCTIONS_ORACLE_ADDRESS }, cleanup), onKeys!, chain, cleanup),
    };
    for (const [name, b] of Object.entries(stacks)) {
      const warm = await b.payEach(2);
      log(`warm-up screening ${name}: ${warm.paid} paid${warm.failed ? `, ${warm.failed} failed: ${JSON.stringify(warm.failures)}` : ''}`);
    }
    // In the paid path, under the rounds' load: the time each screening of the `on` stack took as its
    // request waited for it (sharing the event loop and the cores with everything else at this concurrency).
    // A request awaits its screenings one after another, so their sum is what screening adds to it.
    const inPath: number[] = [];
    const onScreening = screenings[1]!;
    const screen = onScreening.screen.bind(onScreening);
    onScreening.screen = async (parties, at) => {
      const t0 = performance.now();
      try { return await screen(parties, at); } finally { inPath.push(performance.now() - t0); }
    };
    const rows: Record<string, RunResult[]> = { off: [], on: [] };
    for (let round = 0; round < ROUNDS; round++) {
      for (const name of round % 2 === 0 ? (['off', 'on'] as const) : (['on', 'off'] as const)) {
        await new Promise((r) => setTimeout(r, Math.random() * 1_000));
        const result = await stacks[name].run(CONCURRENCY, RAMP_MS, WINDOW_MS);
        rows[name]!.push(result);
        log(`round ${round + 1} screening ${name.padEnd(3)} ${result.perSecond.toFixed(1)} req/s, paid request p50 ${result.paidRequest.p50.toFixed(2)} ms p99 ${result.paidRequest.p99.toFixed(2)} ms${result.failed ? `, ${result.failed} failed: ${JSON.stringify(result.failures)}` : ''}`);
      }
    }
    const inPathTimes = [...inPath];
    delete (onScreening as { screen?: unknown }).screen; // the prototype's again, untimed, for the in-process figure below
    log(`\nexact paid requests at concurrency ${CONCURRENCY}: medians over ${ROUNDS} rounds`);
    log('| screening | paid req/s | paid request p50 | paid request p99 | failed |');
    log('|---|---|---|---|---|');
    for (const name of ['off', 'on'] as const) {
      const list = rows[name]!;
      log(`| ${name === 'on' ? `on (${LISTED.toLocaleString('en')}-address list + oracle)` : 'off'} | ${median(list.map((r) => r.perSecond)).toFixed(1)} | ${median(list.map((r) => r.paidRequest.p50)).toFixed(2)} ms | ${median(list.map((r) => r.paidRequest.p99)).toFixed(2)} ms | ${list.reduce((a, r) => a + r.failed, 0)} |`);
    }
    // In process, no HTTP: one payment's screening (payer and payTo, every source; the oracle's verdict cached after the first).
    const screening = screenings[1]!;
    const parties = [{ role: 'payer' as const, address: privateKeyToAccount(offKeys![0]!).address }, { role: 'payTo' as const, address: privateKeyToAccount(onKeys![0]!).address }];
    const at = { orgId: 'org_bench', network: screenedNetwork('base-sepolia'), door: 'redeem' };
    await screening.screen(parties, at);
    const times: number[] = [];
    for (let i = 0; i < 20_000; i++) { const t0 = performance.now(); await screening.screen(parties, at); times.push(performance.now() - t0); }
    log(`one payment's screening in process (${screening.sourceNames.join(' + ')}): p50 ${(median(times) * 1000).toFixed(1)} µs over ${times.length.toLocaleString('en')} screenings`);
    const added = median(rows.on!.map((r) => r.paidRequest.p50)) - median(rows.off!.map((r) => r.paidRequest.p50));
    log(`end to end, the median paid request with screening minus without: ${added.toFixed(2)} ms (per round ${rows.on!.map((r, i) => (r.paidRequest.p50 - rows.off![i]!.paidRequest.p50).toFixed(2)).join(', ')}): the spread between rounds is the chain's and the machine's, not screening's`);
    const sorted = [...inPathTimes].sort((a, b) => a - b);
    const paid = rows.on!.reduce((sum, r) => sum + r.paidInRun, 0);
    const perPayment = inPathTimes.length / Math.max(1, paid);
    const addedInPath = median(inPathTimes) * perPayment;
    log(`in the paid path at concurrency ${CONCURRENCY}: ${inPathTimes.length.toLocaleString('en')} screenings (${perPayment.toFixed(2)} per paid request), each p50 ${(median(inPathTimes) * 1000).toFixed(1)} µs, p99 ${(sorted[Math.floor(sorted.length * 0.99)]! * 1000).toFixed(1)} µs`);
    log(`screening adds ${addedInPath.toFixed(3)} ms to the median paid request (its screenings' median time, in the path, times their number); target <= 1.00 ms: ${addedInPath <= 1 ? 'met' : 'MISSED'}`);
  } finally {
    for (const fn of cleanup.reverse()) await fn().catch(() => {});
    await chain.stop();
    await mongo.stop();
  }
}

/** Our backend (its own database and relayer, the screening `env` asks for) and our Express middleware selling GET /weather. */
async function ourStack(mongoUri: string, chain: DevChain, relayer: Hex, screening: Record<string, string>, cleanup: Cleanup): Promise<string> {
  const port = await freePort();
  const env: Record<string, string> = {
    AGENTGATE_MODE: 'dev', HOST: '127.0.0.1', LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn', PORT: String(port), BASE_URL: `http://127.0.0.1:${port}`,
    MAIL_DOMAIN: 'bench.test', DID_DOMAIN: `127.0.0.1%3A${port}`, MASTER_KEY: randomBytes(32).toString('hex'),
    MONGODB_URI: mongoUri, MONGODB_DB: `bench_${randomBytes(4).toString('hex')}`, SMTP_PORT: '0',
    CHAIN_RPC_URL: chain.rpcUrl, CHAIN_NETWORK: 'base-sepolia', USDC_ADDRESS: chain.usdcAddress, USDC_EIP712_NAME: DEV_USDC_NAME, USDC_EIP712_VERSION: DEV_USDC_VERSION,
    RELAYER_PRIVATE_KEY: relayer, ...screening,
  };
  const backend = await startServer(loadConfig(env));
  screenings.push(backend.app.payments.screening);
  cleanup.push(closeBackend(backend, mongoUri, env.MONGODB_DB!));
  const call = backendCaller(backend.url);
  const platformKey = (await call('POST', '/v0/agent-signup', undefined, {})).platform_key as string;
  await call('PUT', '/v0/payments/acceptance', platformKey, { enabled: true, payTo: privateKeyToAccount(generatePrivateKey()).address });
  const sellerKey = (await call('POST', '/v0/payments/seller-keys', platformKey, {})).apiKey as string;
  const app = express();
  app.use(paymentMiddleware({ backendUrl: backend.url, apiKey: sellerKey, routes: { 'GET /weather': { price: '$0.001', description: 'Weather' } } }));
  app.get('/weather', (_req, res) => { res.json({ city: 'Oslo', temperatureC: 7 }); });
  const server: Server = createServer(app);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanup.push(async () => { server.closeAllConnections(); await new Promise((resolve) => server.close(resolve)); });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  // Registered as a seller registers it: the backend fetches the route and checks its 402.
  await call('POST', '/v0/payments/endpoints', platformKey, { url: `${url}/weather`, priceUsdc: '0.001' });
  return `${url}/weather`;
}

function buyersFor(url: string, keys: Hex[], chain: DevChain, cleanup: Cleanup) {
  const buyers = startBuyers({ url, scheme: 'exact', keys, rpcUrl: chain.rpcUrl, network: NETWORK, usdc: chain.usdcAddress });
  cleanup.push(() => buyers.stop());
  return buyers;
}

/** Fresh buyers with 100 USDC each, in groups (one per stack), sent by a dev buyer and mined before it returns. */
async function fundBuyers(chain: DevChain, groups: number[]): Promise<Hex[][]> {
  const funder = privateKeyToAccount(DEV_ACCOUNTS[1]!.privateKey);
  const wallet = createWalletClient({ account: funder, chain: { ...baseSepolia, rpcUrls: { default: { http: [chain.rpcUrl] } } }, transport: http(chain.rpcUrl) }).extend(publicActions);
  const keys = groups.map((n) => Array.from({ length: n }, () => generatePrivateKey()));
  let nonce = await wallet.getTransactionCount({ address: funder.address, blockTag: 'pending' });
  const hashes: Hex[] = [];
  for (const key of keys.flat()) hashes.push(await wallet.writeContract({ address: chain.usdcAddress, abi: erc20Abi, functionName: 'transfer', args: [privateKeyToAccount(key).address, parseUnits('100', 6)], nonce: nonce++ }));
  for (const hash of hashes) {
    const receipt = await wallet.waitForTransactionReceipt({ hash, pollingInterval: 200 });
    if (receipt.status !== 'success') throw new Error(`funding ${hash} reverted`);
  }
  return keys;
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
