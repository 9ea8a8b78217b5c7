/**
 * What the seller middleware costs, side by side with the official x402 v2 Express middleware
 * (`@x402/express` over an in-process `@x402/core` facilitator with `@x402/evm`, same anvil, same token).
 *
 *   npx tsx bench/middleware.ts            (BENCH_UNPAID=3000 BENCH_PAID=120 BENCH_CONCURRENCY=16 to change sizes)
 *
 * 1. Unpaid request: median latency over loopback of a bare Express route, and of the same route behind
 *    each middleware (which answers 402); added latency = difference of medians. Plus our Paywall.handle
 *    in process, with no HTTP at all.
 * 2. Verification per payment: our facilitator's verifyPayment vs the official facilitator's verify, on
 *    one valid authorization (read-only, so it can be repeated).
 * 3. Paid requests per second end to end: pre-signed v2 payments sent to each seller, sequentially and
 *    concurrently. Ours goes seller -> backend over HTTP -> MongoDB-wire DB -> chain; the official one
 *    settles in process with no database, so it is the lighter path by construction. Also the database
 *    commands our backend sends per paid request at that concurrency (MongoDB command monitoring).
 *
 * Our backend runs inside the bench's process, sharing one event loop with the load generator and both
 * sellers, as the official facilitator shares its seller's. BENCH_BACKEND=process runs it as it is
 * deployed instead, a process of its own (`agentgate serve`) on the same machine and database: on two
 * cores that is slower, not faster (the machine, not one event loop, is then the limit: see docs/performance.md).
 * 4. A chain that mines like Base: anvil --block-time 2, BENCH_BLOCK_PAYMENTS (300) pre-signed payments
 *    per stack and run at concurrency BENCH_BLOCK_CONCURRENCY (64): rate, p50, p95, failures and gas per
 *    payment from the receipts of the settlement transactions each stack named in its PAYMENT-RESPONSE
 *    headers. Two scenarios, BENCH_BLOCK_RUNS (3) runs each, the stacks' order alternating: `warm`, traffic
 *    starting at an arbitrary moment (a random wait of up to a block, nothing aligned to a block); and
 *    `cold start`, each stack started afresh (our backend stopped and started again on its database, the
 *    official seller and facilitator built anew) and traffic starting at a random moment within 2 s of it.
 *
 * BENCH_PARTS=3,4 runs only those parts.
 */
import { x402Client, x402HTTPClient } from '@x402/core/client';
import { x402Facilitator } from '@x402/core/facilitator';
import { x402ResourceServer } from '@x402/core/server';
import type { FacilitatorClient } from '@x402/core/server';
import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import { toFacilitatorEvmSigner } from '@x402/evm';
import { registerExactEvmScheme as registerClientEvm } from '@x402/evm/exact/client';
import { registerExactEvmScheme as registerFacilitatorEvm } from '@x402/evm/exact/facilitator';
import { registerExactEvmScheme as registerServerEvm } from '@x402/evm/exact/server';
import { paymentMiddleware as officialPaymentMiddleware } from '@x402/express';
import express, { type Express } from 'express';
import { MongoClient } from 'mongodb';
import { randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { Agent, createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { createNonceManager, createPublicClient, createWalletClient, http, publicActions, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { jsonRpc } from 'viem/nonce';
import { baseSepolia } from 'viem/chains';
import { paymentMiddleware } from '../adapters/express.js';
import { createBackendPaywall, decodePaymentHeader, type PaywallRequest } from '../middleware/index.js';
import { verifyPayment } from '../server/payments/schemes/exact/evm/verify.js';
import { DEV_ACCOUNTS } from '../server/dev/chain/dev-accounts.js';
import { startDevChain, DEV_USDC_NAME, DEV_USDC_VERSION } from '../server/dev/chain/dev-chain.js';
import { loadConfig } from '../server/platform/config.js';
import { provideMongoServer } from '../server/dev/database/mongo-server.js';
import { freePort } from '../server/platform/net.js';
import { startServer } from '../server/server.js';
import { createChainService } from '../server/chain/chain-service.js';
import type { Metrics } from '../server/platform/metrics.js';

const UNPAID = Number(process.env.BENCH_UNPAID ?? 3000);
const PAID = Number(process.env.BENCH_PAID ?? 120);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const VERIFY = Number(process.env.BENCH_VERIFY ?? 200);
const BLOCK_PAYMENTS = Number(process.env.BENCH_BLOCK_PAYMENTS ?? 300);
const BLOCK_CONCURRENCY = Number(process.env.BENCH_BLOCK_CONCURRENCY ?? 64);
const BLOCK_RUNS = Number(process.env.BENCH_BLOCK_RUNS ?? 3);
const BACKEND_PROCESS = process.env.BENCH_BACKEND === 'process';
const PARTS = new Set((process.env.BENCH_PARTS ?? '1,2,3,4').split(',').map((p) => p.trim()));
const NETWORK = 'eip155:84532';
const PRICE_ATOMIC = '10000';

const log = (line: string) => process.stdout.write(`${line}\n`);
const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
};
const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))]!;
const ms = (value: number) => `${value.toFixed(3)} ms`;
const us = (value: number) => `${(value * 1000).toFixed(1)} µs`;

async function main() {
  log('starting MongoDB-wire server, anvil and the backend ...');
  // Part 4's chain starts now, so it has a history of blocks by then, as any real chain does.
  const [mongo, chain, slowChain] = await Promise.all([provideMongoServer(), startDevChain(), PARTS.has('4') ? startDevChain({ blockTime: 2 }) : undefined]);
  const cleanup: Array<() => Promise<unknown>> = [() => mongo.stop(), () => chain.stop(), async () => slowChain?.stop()];
  try {
    if (PARTS.has('1') || PARTS.has('2') || PARTS.has('3')) await run(mongo.uri, chain.rpcUrl, chain.usdcAddress, cleanup);
    if (slowChain) {
      log('\nanvil --block-time 2 and a second backend on it ...');
      // At least the six blocks whose timestamps tell the block clock the chain's cadence (block-clock.ts).
      const client = createPublicClient({ transport: http(slowChain.rpcUrl) });
      while ((await client.getBlockNumber({ cacheTime: 0 })) < 8n) await new Promise((r) => setTimeout(r, 500));
      await blockTimeScenario(mongo.uri, slowChain.rpcUrl, slowChain.usdcAddress, cleanup);
    }
  } finally {
    for (const fn of cleanup.reverse()) await fn().catch(() => {});
  }
}

async function run(mongoUri: string, rpcUrl: string, usdc: Address, cleanup: Array<() => Promise<unknown>>) {
  const { backend, payTo, sellerKey, our, official, officialFacilitator, config } = await startStacks(mongoUri, rpcUrl, usdc, cleanup);
  log(`   agentgate's seller at ${our.url}, the official one at ${official.url}`);
  const bare = await serve(bareApp(), cleanup);

  if (PARTS.has('1')) {
    // --- 1. unpaid latency ------------------------------------------------------------------------
    log(`\n1. unpaid requests, ${UNPAID} sequential keep-alive requests per server and path over loopback (medians)`);
    for (const server of [bare, our, official]) {
      const warm = await timeRequests(server.url, '/weather', 300);
      if (server !== bare && warm.statuses.some((s) => s !== 402)) throw new Error(`expected 402 from ${server.url}, got ${warm.statuses[0]}`);
      await timeRequests(server.url, '/cities', 300);
    }
    const rounds = 5;
    const names = ['bare', 'ours', 'official'] as const;
    const samples = Object.fromEntries(names.flatMap((n) => [[`${n} /weather`, [] as number[]], [`${n} /cities`, [] as number[]]])) as Record<string, number[]>;
    for (let round = 0; round < rounds; round += 1) {
      // Interleaved rounds, so drift (GC, CPU frequency, other load) hits all of them alike.
      for (const [name, server] of [['bare', bare], ['ours', our], ['official', official]] as const) {
        for (const path of ['/weather', '/cities']) samples[`${name} ${path}`]!.push(...(await timeRequests(server.url, path, UNPAID / rounds)).times);
      }
    }
    const m = (key: string) => median(samples[key]!);
    const row = (label: string, key: string, extra = '') => log(`   ${label.padEnd(44)} median ${ms(m(key))}   p99 ${ms(percentile(samples[key]!, 0.99))}${extra}`);
    row('bare Express, GET /weather (handler, 200)', 'bare /weather');
    row('agentgate, GET /weather unpaid (402)', 'ours /weather', `   vs bare ${ms(m('ours /weather') - m('bare /weather'))}`);
    row('@x402/express, GET /weather unpaid (402)', 'official /weather', `   vs bare ${ms(m('official /weather') - m('bare /weather'))}`);
    log(`   unpaid 402 latency ratio agentgate / official: ${(m('ours /weather') / m('official /weather')).toFixed(2)}`);
    row('bare Express, GET /cities (free route)', 'bare /cities');
    const ourPass = m('ours /cities') - m('bare /cities');
    const officialPass = m('official /cities') - m('bare /cities');
    row('agentgate in front of the free route', 'ours /cities', `   added ${ms(ourPass)}`);
    row('@x402/express in front of the free route', 'official /cities', `   added ${ms(officialPass)}`);
    log('   (a 402 can be cheaper than the bare route: it is a cached, pre-serialized body with no handler;');
    log('    the free route shows the pure cost of having the middleware in the request path)');

    const paywall = await createBackendPaywall({ backendUrl: backend.url, apiKey: sellerKey, routes: { 'GET /weather': { price: '$0.01' } } });
    const unpaidRequest: PaywallRequest = { method: 'GET', url: '/weather?city=Oslo', host: 'shop.example', protocol: 'https', headers: { accept: 'application/json' } };
    const freeRequest: PaywallRequest = { ...unpaidRequest, url: '/cities' };
    const inProcess = async (request: PaywallRequest, n = 200_000) => {
      for (let i = 0; i < 10_000; i += 1) await paywall.handle(request);
      const start = performance.now();
      for (let i = 0; i < n; i += 1) await paywall.handle(request);
      return (performance.now() - start) / n;
    };
    log(`   in process: Paywall.handle unpaid (402) ${us(await inProcess(unpaidRequest))}/request, free route (pass) ${us(await inProcess(freeRequest))}/request`);
  }

  if (PARTS.has('2')) {
    // --- 2. verification cost per payment ----------------------------------------------------------
    log(`\n2. verification of one valid payment, ${VERIFY} times each (signature + chain reads, no settlement)`);
    const chain = (await createChainService(config))!;
    const ourPayment = (await signPayments(our.url, DEV_ACCOUNTS[1]!.privateKey, usdc, 1))[0]!;
    const decoded = decodePaymentHeader(ourPayment.header);
    if (!decoded.ok) throw new Error('could not decode our own payment');
    const ourVerify = await timeEach(VERIFY, async () => {
      const result = await verifyPayment(decoded, { payTo, amountAtomic: BigInt(PRICE_ATOMIC) }, chain, { nowSeconds: Math.floor(Date.now() / 1000), marginSeconds: 6 });
      if (!result.ok) throw new Error(`verifyPayment refused: ${result.reason}`);
    });
    const officialPayment = (await signPayments(official.url, DEV_ACCOUNTS[2]!.privateKey, usdc, 1))[0]!;
    const officialVerify = await timeEach(VERIFY, async () => {
      const result = await officialFacilitator.verify(officialPayment.payload, officialPayment.payload.accepted as PaymentRequirements);
      if (!result.isValid) throw new Error(`official verify refused: ${result.invalidReason}`);
    });
    log(`   agentgate verifyPayment     median ${ms(median(ourVerify))}`);
    log(`   official facilitator.verify median ${ms(median(officialVerify))}`);
    log(`   ratio agentgate / official: ${(median(ourVerify) / median(officialVerify)).toFixed(2)}`);
  }

  if (PARTS.has('3')) {
    // --- 3. paid requests per second end to end ----------------------------------------------------
    const ROUNDS = Number(process.env.BENCH_PAID_ROUNDS ?? 3);
    log(`\n3. paid requests end to end on the local chain (pre-signed v2 payments; ${ROUNDS} interleaved rounds of ${PAID} sequential and ${PAID * 2} at concurrency ${CONCURRENCY}; medians)`);
    const rates: Record<string, { sequential: number[]; concurrent: number[]; latencies: number[] }> = { agentgate: { sequential: [], concurrent: [], latencies: [] }, official: { sequential: [], concurrent: [], latencies: [] } };
    const commands: Array<Map<string, number>> = [];
    const buyers = { agentgate: DEV_ACCOUNTS[1]!.privateKey, official: DEV_ACCOUNTS[2]!.privateKey };
    for (let round = 0; round < ROUNDS; round += 1) {
      // Interleaved, so a noisy neighbour on this shared machine hits both stacks alike.
      for (const [name, server] of [['agentgate', our], ['official', official]] as const) {
        // Signed just before each run: a v2 authorization is valid for the requirement's 60 s.
        const sequential = await payAll(server.url, await signPayments(server.url, buyers[name], usdc, PAID), 1);
        const signed = await signPayments(server.url, buyers[name], usdc, PAID * 2);
        const before = await backend.dbCommands();
        const concurrent = await payAll(server.url, signed, CONCURRENCY);
        if (name === 'agentgate') commands.push(difference(await backend.dbCommands(), before));
        rates[name]!.sequential.push(sequential.perSecond);
        rates[name]!.concurrent.push(concurrent.perSecond);
        rates[name]!.latencies.push(...sequential.latencies);
      }
    }
    for (const name of ['agentgate', 'official'] as const) {
      const r = rates[name]!;
      log(`   ${name.padEnd(10)} sequential ${median(r.sequential).toFixed(1)} req/s (median latency ${ms(median(r.latencies))})   concurrency ${CONCURRENCY} ${median(r.concurrent).toFixed(1)} req/s`);
    }
    // Everything the backend sent while the concurrent runs were under way (background polls included), per payment.
    const total = commands.reduce((sum, round) => { for (const [k, v] of round) sum.set(k, (sum.get(k) ?? 0) + v); return sum; }, new Map<string, number>());
    const paidCount = PAID * 2 * ROUNDS;
    const perPayment = [...total.values()].reduce((a, b) => a + b, 0) / paidCount;
    const breakdown = [...total].sort((x, y) => y[1] - x[1]).map(([k, v]) => `${k} ${(v / paidCount).toFixed(2)}`).join(', ');
    log(`   agentgate database commands during the concurrency-${CONCURRENCY} runs: ${breakdown}`);
    log(`database commands per paid request at concurrency ${CONCURRENCY}: ${perPayment.toFixed(2)}`);
    const ratio = (kind: 'sequential' | 'concurrent') => (median(rates.agentgate![kind]) / median(rates.official![kind])).toFixed(2);
    log(`paid req/s ratio agentgate/official: sequential ${ratio('sequential')}, concurrency${CONCURRENCY} ${ratio('concurrent')}`);
  }
}

/** Our backend with a seller on it, our Express seller and the official one, all on the chain at `rpcUrl`. */
async function startStacks(mongoUri: string, rpcUrl: string, usdc: Address, cleanup: Array<() => Promise<unknown>>) {
  const port = await freePort();
  const env: Record<string, string> = {
    // An access line per request on stdout would bury the results (LOG_LEVEL=info to watch them).
    AGENTGATE_MODE: 'dev', HOST: '127.0.0.1', LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn', PORT: String(port), BASE_URL: `http://127.0.0.1:${port}`,
    MAIL_DOMAIN: 'bench.test', DID_DOMAIN: `127.0.0.1%3A${port}`, MASTER_KEY: randomBytes(32).toString('hex'),
    MONGODB_URI: mongoUri, MONGODB_DB: `bench_${randomBytes(4).toString('hex')}`, SMTP_PORT: '0',
    CHAIN_RPC_URL: rpcUrl, CHAIN_NETWORK: 'base-sepolia', USDC_ADDRESS: usdc, USDC_EIP712_NAME: DEV_USDC_NAME, USDC_EIP712_VERSION: DEV_USDC_VERSION,
    RELAYER_PRIVATE_KEY: DEV_ACCOUNTS[0]!.privateKey, METRICS_TOKEN: randomBytes(16).toString('hex'),
    // Settlement settings can be tried from the environment (see docs/operators/configuration.md).
    ...Object.fromEntries(['SETTLEMENT_PIPELINE_DEPTH', 'SETTLEMENT_BATCH_MAX', 'SETTLEMENT_SEND_MARGIN_MS', 'RELAYER_PRIVATE_KEYS'].flatMap((name) => (process.env[name] ? [[name, process.env[name]!]] : []))),
  };
  const backend = BACKEND_PROCESS ? await backendProcess(env, cleanup) : await backendInProcess(env, cleanup);

  // --- seller set-up, the way the console does it ------------------------------------------------
  const call = async (method: string, path: string, key: string | undefined, body?: unknown) => {
    const res = await fetch(backend.url + path, {
      method, body: body === undefined ? undefined : JSON.stringify(body),
      headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    });
    const json = (await res.json()) as Record<string, any>;
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
  const signup = await call('POST', '/v0/agent-signup', undefined, {});
  const platformKey = signup.platform_key as string;
  const payTo = privateKeyToAccount(`0x${randomBytes(32).toString('hex')}`).address;
  await call('PUT', '/v0/payments/acceptance', platformKey, { enabled: true, payTo });
  const sellerKey = (await call('POST', '/v0/payments/seller-keys', platformKey, {})).apiKey as string;

  // --- our seller and the official one ----------------------------------------------------------
  const ours = express();
  ours.use(paymentMiddleware({ backendUrl: backend.url, apiKey: sellerKey, routes: { 'GET /weather': { price: '$0.01', description: 'Weather' } } }));
  ours.get('/weather', weather);
  ours.get('/cities', cities);
  const { app: officialApp, facilitator: officialFacilitator } = officialSeller(rpcUrl, usdc, payTo);
  const our = await serve(ours, cleanup);
  let official = await serve(officialApp, cleanup);
  await call('POST', '/v0/payments/endpoints', platformKey, { url: `${our.url}/weather`, priceUsdc: '0.01', skipUrlCheck: true });
  return {
    backend, payTo, sellerKey, our, official, officialFacilitator, config: loadConfig(env),
    /** Our backend stopped and started again (same database, same port): a process that has just started. */
    restartBackend: () => backend.restart(),
    /** The official seller, its resource server and in-process facilitator built anew. */
    async restartOfficial() {
      official.server.closeAllConnections();
      await new Promise((resolve) => official.server.close(resolve));
      official = await serve(officialSeller(rpcUrl, usdc, payTo).app, cleanup);
      return official;
    },
  };
}

/** What the bench needs of our backend: where it listens, the database commands it has sent so far, a restart. */
interface Backend { url: string; dbCommands(): Promise<Map<string, number>>; restart(): Promise<void> }

/** BENCH_BACKEND=process: our backend as it is deployed, its own process (`agentgate serve`), called by the seller's middleware over HTTP. */
async function backendProcess(env: Record<string, string>, cleanup: Array<() => Promise<unknown>>): Promise<Backend> {
  const url = env.BASE_URL!;
  const launch = async () => {
    const child = spawn(process.execPath, [fileURLToPath(new URL('../bin/agentgate.js', import.meta.url)), 'serve'], { env: { ...process.env, ...env }, stdio: ['ignore', 'inherit', 'inherit'] });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    for (let waited = 0; ; waited += 200) {
      if (child.exitCode !== null) throw new Error(`agentgate serve exited with ${child.exitCode}`);
      if (await fetch(`${url}/health`).then((r) => r.ok, () => false)) break;
      if (waited > 60_000) throw new Error('agentgate serve did not start within 60 s');
      await new Promise((r) => setTimeout(r, 200));
    }
    return { child, exited };
  };
  let running = await launch();
  const stop = async () => {
    running.child.kill('SIGTERM');
    await running.exited;
  };
  cleanup.push(async () => {
    await stop();
    const client = new MongoClient(env.MONGODB_URI!);
    await client.db(env.MONGODB_DB).dropDatabase().finally(() => client.close());
  });
  return {
    url,
    async restart() {
      await stop();
      running = await launch();
    },
    async dbCommands() {
      const res = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${env.METRICS_TOKEN}` } });
      if (!res.ok) throw new Error(`GET /metrics answered ${res.status}`);
      const text = await res.text();
      const counts = new Map<string, number>();
      for (const [, labels, value] of text.matchAll(/^agentgate_db_commands_total\{([^}]*)\} (\S+)$/gm)) {
        const label = (name: string) => new RegExp(`${name}="([^"]*)"`).exec(labels!)?.[1] ?? '';
        counts.set(`${label('command')} ${label('collection')}`.trim(), Number(value));
      }
      return counts;
    },
  };
}

/** Our backend inside the bench's (and the sellers') process. */
async function backendInProcess(env: Record<string, string>, cleanup: Array<() => Promise<unknown>>): Promise<Backend> {
  let backend = await startServer(loadConfig(env));
  cleanup.push(async () => {
    await backend.app.db.dropDatabase().catch(() => {});
    await backend.close();
  });
  return {
    url: backend.url,
    dbCommands: () => dbCommands(backend.app.metrics),
    async restart() {
      await backend.close();
      backend = await startServer(loadConfig(env));
    },
  };
}

const weather: express.RequestHandler = (_req, res) => {
  res.json({ city: 'Oslo', temperatureC: 7 });
};
const cities: express.RequestHandler = (_req, res) => {
  res.json({ cities: ['Oslo'] });
};

function bareApp(): Express {
  const app = express();
  app.get('/weather', weather);
  app.get('/cities', cities);
  return app;
}

/** The database commands a backend has sent so far, by "command collection" (agentgate_db_commands_total). */
async function dbCommands(metrics: Metrics): Promise<Map<string, number>> {
  const metric = await metrics.dbCommands.get();
  return new Map(metric.values.map((v) => [`${v.labels.command} ${v.labels.collection}`.trim(), v.value]));
}

function difference(after: Map<string, number>, before: Map<string, number>): Map<string, number> {
  return new Map([...after].map(([k, v]) => [k, v - (before.get(k) ?? 0)] as [string, number]).filter(([, v]) => v > 0));
}

/**
 * Part 4: both stacks on a chain that mines every 2 s, as Base does. One stack after the other on the same
 * chain (each with its own relayer), BLOCK_PAYMENTS payments signed beforehand at BLOCK_CONCURRENCY, in
 * two scenarios (see the header): warm, and within 2 s of a fresh start. Traffic starts at a random moment,
 * never aligned to a block: where in the cadence a closed loop starts moves its rate by up to a block in
 * five, for both stacks alike, so the runs are repeated and their spread printed.
 */
async function blockTimeScenario(mongoUri: string, rpcUrl: string, usdc: Address, cleanup: Array<() => Promise<unknown>>) {
  const stacks = await startStacks(mongoUri, rpcUrl, usdc, cleanup);
  let official = stacks.official;
  const client = createPublicClient({ transport: http(rpcUrl) });
  type Row = { perSecond: number; p50: number; p95: number; failed: number; gasPerPayment: number };
  const rows: Record<string, Row[]> = {};
  const restarts: Record<string, number[]> = {};
  const buyers = { agentgate: DEV_ACCOUNTS[3]!.privateKey, official: DEV_ACCOUNTS[4]!.privateKey } as const;
  const urlOf = (name: 'agentgate' | 'official') => (name === 'agentgate' ? stacks.our.url : official.url);
  log(`\n4. a chain that mines like Base: anvil --block-time 2, ${BLOCK_PAYMENTS} pre-signed payments per stack and run at concurrency ${BLOCK_CONCURRENCY}, ${BLOCK_RUNS} runs per scenario`);
  // A warm-up payment each, so neither pays for its first connection or cold caches in a warm run.
  for (const name of ['agentgate', 'official'] as const) await payCounting(urlOf(name), await signPayments(urlOf(name), buyers[name], usdc, 1), 1);

  const measure = async (name: 'agentgate' | 'official', signed: Array<{ header: string }>, scenario: string) => {
    const run = await payCounting(urlOf(name), signed, BLOCK_CONCURRENCY);
    let gas = 0n;
    for (const hash of run.transactions) gas += (await client.getTransactionReceipt({ hash })).gasUsed;
    const paid = signed.length - run.failed;
    const row = { perSecond: run.perSecond, p50: percentile(run.latencies, 0.5), p95: percentile(run.latencies, 0.95), failed: run.failed, gasPerPayment: paid ? Number(gas) / paid : 0 };
    (rows[`${scenario}|${name}`] ??= []).push(row);
    log(`   ${scenario.padEnd(10)} ${name.padEnd(10)} ${row.perSecond.toFixed(1)} req/s, p50 ${row.p50.toFixed(0)} ms, p95 ${row.p95.toFixed(0)} ms, failed ${run.failed}${run.failed ? ` (${[...run.failures].map(([k, v]) => `${v}× ${k}`).join(', ')})` : ''}, ${run.transactions.size} settlement transactions, gas/payment ${row.gasPerPayment.toFixed(0)}`);
  };
  const anyMomentWithin = (ms: number) => new Promise((r) => setTimeout(r, Math.random() * ms));

  for (let i = 0; i < BLOCK_RUNS; i++) {
    const order = i % 2 === 0 ? (['agentgate', 'official'] as const) : (['official', 'agentgate'] as const);
    for (const name of order) {
      const signed = await signPayments(urlOf(name), buyers[name], usdc, BLOCK_PAYMENTS);
      await anyMomentWithin(2_000);
      await measure(name, signed, 'warm');
    }
    for (const name of order) {
      const signed = await signPayments(urlOf(name), buyers[name], usdc, BLOCK_PAYMENTS);
      // A fresh start, then traffic at a random moment within 2 s of it.
      const restarting = performance.now();
      if (name === 'agentgate') await stacks.restartBackend();
      else official = await stacks.restartOfficial();
      (restarts[name] ??= []).push(performance.now() - restarting);
      await anyMomentWithin(2_000);
      await measure(name, signed, 'cold start');
    }
  }

  const spread = (values: number[], digits: number) => {
    const sorted = [...values].sort((a, b) => a - b);
    return `${median(sorted).toFixed(digits)} (${sorted[0]!.toFixed(digits)}–${sorted[sorted.length - 1]!.toFixed(digits)})`;
  };
  log(`\n   block-time 2s, concurrency ${BLOCK_CONCURRENCY}, ${BLOCK_RUNS} runs each: median (min–max)`);
  log('   | scenario | stack | req/s | p50 ms | p95 ms | failed | gas/payment |');
  log('   |---|---|---|---|---|---|---|');
  for (const [key, list] of Object.entries(rows)) {
    const [scenario, name] = key.split('|');
    log(`   | ${scenario} | ${name} | ${spread(list.map((r) => r.perSecond), 1)} | ${spread(list.map((r) => r.p50), 0)} | ${spread(list.map((r) => r.p95), 0)} | ${list.reduce((a, r) => a + r.failed, 0)} | ${spread(list.map((r) => r.gasPerPayment), 0)} |`);
  }
  log(`   restarts (stop and start until it listens): agentgate ${restarts.agentgate!.map((ms) => `${(ms / 1000).toFixed(1)} s`).join(', ')}; official ${restarts.official!.map((ms) => `${(ms / 1000).toFixed(1)} s`).join(', ')}`);
  for (const scenario of ['warm', 'cold start']) {
    const ours = rows[`${scenario}|agentgate`]!;
    const theirs = rows[`${scenario}|official`]!;
    log(`   ${scenario}: req/s ours/official per run ${ours.map((r, i) => (r.perSecond / theirs[i]!.perSecond).toFixed(2)).join(', ')}; p95 ours − official per run ${ours.map((r, i) => (r.p95 - theirs[i]!.p95).toFixed(0)).join(', ')} ms; gas/payment ${(100 * median(ours.map((r) => r.gasPerPayment)) / median(theirs.map((r) => r.gasPerPayment))).toFixed(0)} % of the official's`);
  }
}

/** Like payAll, but a refused payment is counted, not thrown; collects the settlement transactions named in PAYMENT-RESPONSE. */
async function payCounting(base: string, payments: Array<{ header: string }>, concurrency: number) {
  const latencies: number[] = [];
  const transactions = new Set<Hex>();
  const failures = new Map<string, number>();
  let next = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < payments.length) {
        const payment = payments[next++]!;
        const t0 = performance.now();
        const res = await get(`${base}/weather`, { 'PAYMENT-SIGNATURE': payment.header }).catch((err: Error) => ({ status: 0, body: err.message, headers: {} as Record<string, string | string[] | undefined> }));
        latencies.push(performance.now() - t0);
        const response = res.headers['payment-response'];
        if (res.status === 200 && typeof response === 'string') {
          transactions.add((JSON.parse(Buffer.from(response, 'base64').toString('utf8')) as { transaction: Hex }).transaction);
        } else {
          const key = `${res.status} ${res.body.slice(0, 120)}`;
          failures.set(key, (failures.get(key) ?? 0) + 1);
        }
      }
    }),
  );
  const failed = [...failures.values()].reduce((a, b) => a + b, 0);
  return { perSecond: payments.length / ((performance.now() - start) / 1000), latencies, transactions, failed, failures };
}

/** The official v2 stack: @x402/express middleware, resource server and an in-process facilitator. */
function officialSeller(rpcUrl: string, usdc: Address, payTo: Address) {
  const chain = { ...baseSepolia, rpcUrls: { default: { http: [rpcUrl] } } };
  // Its own relayer (dev account 8), so its transactions never compete with our backend's for nonces.
  // A nonce manager of its own: viem's shared one keys nonces by address and chain id, and part 4's chain
  // has the same id as part 3's.
  const account = privateKeyToAccount(DEV_ACCOUNTS[8]!.privateKey, { nonceManager: createNonceManager({ source: jsonRpc() }) });
  const client = createWalletClient({ account, chain, transport: http(rpcUrl), pollingInterval: 100 }).extend(publicActions);
  const facilitator = new x402Facilitator();
  registerFacilitatorEvm(facilitator, { signer: toFacilitatorEvmSigner({ ...client, address: account.address } as never), networks: NETWORK });
  const local: FacilitatorClient = {
    verify: (payload, requirements) => facilitator.verify(payload, requirements),
    settle: (payload, requirements) => facilitator.settle(payload, requirements),
    getSupported: async () => facilitator.getSupported() as never,
  };
  const resourceServer = registerServerEvm(new x402ResourceServer(local), { networks: [NETWORK] });
  const app = express();
  app.use(
    officialPaymentMiddleware(
      {
        'GET /weather': {
          accepts: { scheme: 'exact', network: NETWORK, payTo, price: { asset: usdc, amount: PRICE_ATOMIC, extra: { name: DEV_USDC_NAME, version: DEV_USDC_VERSION } } },
          description: 'Weather',
          mimeType: 'application/json',
        },
      },
      resourceServer,
    ),
  );
  app.get('/weather', (_req, res) => {
    res.json({ city: 'Oslo', temperatureC: 7 });
  });
  app.get('/cities', (_req, res) => {
    res.json({ cities: ['Oslo'] });
  });
  return { app, facilitator };
}

async function serve(app: Express, cleanup: Array<() => Promise<unknown>>): Promise<{ url: string; server: Server }> {
  const server = createServer(app);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanup.push(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

const agent = new Agent({ keepAlive: true, maxSockets: 64 });

function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string; headers: Record<string, string | string[] | undefined> }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { agent, headers: { accept: 'application/json', ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8'), headers: res.headers }));
      res.on('error', reject);
    });
    // Which request, and on which connection, so a reset says where it came from.
    req.on('error', (err: NodeJS.ErrnoException) => reject(new Error(`GET ${url} on a ${req.reusedSocket ? 'reused' : 'new'} connection: ${err.code ?? err.message}`, { cause: err })));
    req.end();
  });
}

async function timeRequests(base: string, path: string, n: number) {
  const times: number[] = [];
  const statuses: number[] = [];
  for (let i = 0; i < n; i += 1) {
    const start = performance.now();
    const { status } = await get(`${base}${path}`);
    times.push(performance.now() - start);
    statuses.push(status);
  }
  return { times, statuses };
}

async function timeEach(n: number, fn: () => Promise<void>): Promise<number[]> {
  for (let i = 0; i < 5; i += 1) await fn();
  const times: number[] = [];
  for (let i = 0; i < n; i += 1) {
    const start = performance.now();
    await fn();
    times.push(performance.now() - start);
  }
  return times;
}

/** Signs `n` v2 payments (fresh nonces) for a seller's 402, as the official v2 client would. */
async function signPayments(base: string, key: Hex, usdc: Address, n: number): Promise<Array<{ header: string; payload: PaymentPayload }>> {
  const client = registerClientEvm(new x402Client(), { signer: privateKeyToAccount(key) }).setSpendControls({
    allowedAssets: [{ network: NETWORK, asset: usdc, maxAmountPerPayment: '1000000' }],
  });
  const httpClient = new x402HTTPClient(client);
  const unpaid = await fetch(`${base}/weather`, { headers: { accept: 'application/json' } });
  const body: unknown = await unpaid.json().catch(() => undefined);
  const required = httpClient.getPaymentRequiredResponse((name) => unpaid.headers.get(name), body);
  const payments = [];
  for (let i = 0; i < n; i += 1) {
    const payload = await httpClient.createPaymentPayload(required);
    payments.push({ header: httpClient.encodePaymentSignatureHeader(payload)['PAYMENT-SIGNATURE']!, payload });
  }
  return payments;
}

/** Why a 402 refused, from its PAYMENT-REQUIRED header (the official stack's body is `{}`). */
function refusalOf(headers: Record<string, string | string[] | undefined>): string {
  const said = (name: string) => {
    const header = headers[name];
    if (typeof header !== 'string') return undefined;
    try {
      const value = JSON.parse(Buffer.from(header, 'base64').toString('utf8')) as { error?: string; errorReason?: string };
      return `${name}: ${value.error ?? value.errorReason ?? JSON.stringify(value).slice(0, 200)}`;
    } catch {
      return `${name}: ${header.slice(0, 200)}`;
    }
  };
  return ['payment-required', 'payment-response', 'x-payment-response'].map(said).filter(Boolean).join('; ');
}

async function payAll(base: string, payments: Array<{ header: string }>, concurrency: number) {
  const latencies: number[] = [];
  let next = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < payments.length) {
        const payment = payments[next++]!;
        const t0 = performance.now();
        const res = await get(`${base}/weather`, { 'PAYMENT-SIGNATURE': payment.header });
        latencies.push(performance.now() - t0);
        if (res.status !== 200) throw new Error(`paid request to ${base} answered ${res.status}: ${res.body.slice(0, 300)} ${refusalOf(res.headers)}`);
      }
    }),
  );
  return { perSecond: payments.length / ((performance.now() - start) / 1000), latencies };
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
