/**
 * Payment channels (`batch-settlement`), side by side with the official x402 stack on the same scheme, in
 * one run, on one machine, with one load generator: buyers paying with the official client (`@x402/fetch`
 * and the batch-settlement client scheme of `@x402/evm`), in a worker thread (bench/support/paying-buyers.ts).
 *
 *   npm run bench -- channels        (CHANNELS_PARTS=1,3 to run only those parts; sizes below)
 *
 * 1. Vouchers, chain mining on arrival. The official stack: `@x402/express` with `BatchSettlementEvmScheme`
 *    (its in-memory channel storage) over the in-process official facilitator (`@x402/evm`'s batch-settlement
 *    facilitator, a local signer, its own receiver-authorizer key). Ours: our Express middleware with
 *    `{ price, scheme: 'batch-settlement' }` over our backend (in the bench's process, as in
 *    bench/middleware.ts), every accepted voucher a document in the database, shared by every process.
 *    Many buyers, each its own channel, deposited in a warm-up that is not timed; then closed loops of 1, 16
 *    and 64 buyers paying vouchers (CHANNELS_ROUNDS rounds, 3; the stacks' order alternating; each run
 *    CHANNELS_RAMP_MS 1000 of ramp-up, then CHANNELS_WINDOW_MS 4000 measured). Paid req/s, p50 and p99 of
 *    the whole call (402, voucher, paid request) and of the paid request alone; our database commands per
 *    paid call.
 * 2. A chain that mines like Base (anvil --block-time 2): our channels against our own `exact` at
 *    concurrency 64 (CHANNELS_BLOCK_ROUNDS rounds, 3), each run starting at a random moment within a block
 *    (CHANNELS_PROFILE_ROUNDS=1: where our calls spend their time, per round).
 * 3. 1,000 paid calls from 10 buyers through our stack (CHANNELS_CALLS, CHANNELS_BUYERS), then our sweep
 *    claims and settles them on its schedule: CHANNEL_SWEEP_EVERY_MS, a seller's setting, here
 *    CHANNELS_SWEEP_MS (10000) instead of the default 60000 so the bench does not wait a minute. Every
 *    transaction on chain that touches these channels (deposits, claims, settles, refunds) is counted from
 *    the blocks, with its gas.
 */
import { randomBytes } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import express, { type Express } from 'express';
import { x402Facilitator } from '@x402/core/facilitator';
import { x402ResourceServer, type FacilitatorClient } from '@x402/core/server';
import { toFacilitatorEvmSigner } from '@x402/evm';
import { BatchSettlementEvmScheme as OfficialBatchSettlementFacilitator } from '@x402/evm/batch-settlement/facilitator';
import { BatchSettlementEvmScheme as OfficialChannelServer } from '@x402/evm/batch-settlement/server';
import { paymentMiddleware as officialPaymentMiddleware } from '@x402/express';
import { createNonceManager, createPublicClient, createWalletClient, erc20Abi, http, parseEventLogs, publicActions, type Address, type Hex, type PublicClient } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { baseSepolia } from 'viem/chains';
import { jsonRpc } from 'viem/nonce';
import { paymentMiddleware } from '../adapters/express.js';
import type { RouteConfig } from '../middleware/index.js';
import { BATCH_SETTLEMENT_ADDRESS, batchSettlementAbi } from '../server/payments/schemes/batch-settlement/evm/chain.js';
import { DEV_ACCOUNTS } from '../server/dev/chain/dev-accounts.js';
import { DEV_USDC_NAME, DEV_USDC_VERSION, startDevChain, type DevChain } from '../server/dev/chain/dev-chain.js';
import { provideMongoServer } from '../server/dev/database/mongo-server.js';
import { loadConfig } from '../server/platform/config.js';
import type { Metrics } from '../server/platform/metrics.js';
import { freePort } from '../server/platform/net.js';
import { startServer } from '../server/server.js';
import { cpuOfProcessTree } from './support/cpu.js';
import { backendCaller, closeBackend } from './support/backend-calls.js';
import { fundBuyers } from './support/fund-buyers.js';
import { startBuyers, type RunResult } from './support/paying-buyers.js';

const PARTS = new Set((process.env.CHANNELS_PARTS ?? '1,2,3').split(',').map((p) => p.trim()));
const ROUNDS = Number(process.env.CHANNELS_ROUNDS ?? 3);
const CONCURRENCIES = (process.env.CHANNELS_CONCURRENCY ?? '1,16,64').split(',').map(Number);
const RAMP_MS = Number(process.env.CHANNELS_RAMP_MS ?? 1000);
const WINDOW_MS = Number(process.env.CHANNELS_WINDOW_MS ?? 4000);
const BLOCK_ROUNDS = Number(process.env.CHANNELS_BLOCK_ROUNDS ?? 3);
const BLOCK_CONCURRENCY = Number(process.env.CHANNELS_BLOCK_CONCURRENCY ?? 64);
const CALLS = Number(process.env.CHANNELS_CALLS ?? 1000);
const CALL_BUYERS = Number(process.env.CHANNELS_BUYERS ?? 10);
const SWEEP_MS = Number(process.env.CHANNELS_SWEEP_MS ?? 10_000);
const NETWORK = 'eip155:84532';
const PRICE = '$0.001';
const PRICE_ATOMIC = 1_000n;
/** A channel's deposit covers this many calls, so no buyer tops up inside a measured window. */
const DEPOSIT_CALLS = 20_000;

const log = (line: string) => process.stdout.write(`${line}\n`);
const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};
const anyMomentWithin = (ms: number) => new Promise((r) => setTimeout(r, Math.random() * ms));
type Cleanup = Array<() => Promise<unknown>>;

async function main() {
  log('starting MongoDB-wire server, anvil (mining on arrival) and anvil --block-time 2 ...');
  // The 2 s chain starts now, so it has a history of blocks by part 2, as any real chain does.
  const [mongo, chain, slowChain] = await Promise.all([
    provideMongoServer(), startDevChain({ mintAmountUsdc: '1000000' }), PARTS.has('2') ? startDevChain({ blockTime: 2, mintAmountUsdc: '1000000' }) : undefined,
  ]);
  const cleanup: Cleanup = [() => mongo.stop(), () => chain.stop(), async () => slowChain?.stop()];
  try {
    if (PARTS.has('1')) await scoped((c) => vouchersSideBySide(mongo.uri, chain, c));
    if (slowChain) await scoped((c) => channelsAgainstExact(mongo.uri, slowChain, c));
    if (PARTS.has('3')) await scoped((c) => transactionsPerCalls(mongo.uri, chain, c));
  } finally {
    for (const fn of cleanup.reverse()) await fn().catch(() => {});
  }
}

/** Runs a part with its own services, stopped when it ends (the next part has the machine to itself). */
async function scoped(part: (cleanup: Cleanup) => Promise<void>) {
  const cleanup: Cleanup = [];
  try {
    await part(cleanup);
  } finally {
    for (const fn of cleanup.reverse()) await fn().catch(() => {});
  }
}

// --- part 1 ------------------------------------------------------------------------------------------

async function vouchersSideBySide(mongoUri: string, chain: DevChain, cleanup: Cleanup) {
  const buyers = Math.max(...CONCURRENCIES);
  log(`\n1. vouchers, chain mining on arrival: ${buyers} buyers per stack, each its own channel (deposit of ${DEPOSIT_CALLS} calls in an untimed warm-up), closed loops of ${CONCURRENCIES.join(', ')}; ${ROUNDS} rounds, each run ${RAMP_MS} ms of ramp-up then ${WINDOW_MS} ms measured`);
  const [ourKeys, officialKeys] = await fundBuyers(chain, [buyers, buyers], '25');
  const ours = await ourStack(mongoUri, chain, cleanup, { relayer: DEV_ACCOUNTS[0]!.privateKey, routes: { 'GET /weather': { price: PRICE, scheme: 'batch-settlement', description: 'Weather, per call' } } });
  const official = await officialStack(chain, ours.payTo, cleanup);
  log(`   agentgate's seller at ${ours.url}, the official one at ${official.url}`);
  const stacks = {
    agentgate: buyersFor(`${ours.url}/weather`, 'batch-settlement', ourKeys, chain, cleanup),
    official: buyersFor(`${official.url}/weather`, 'batch-settlement', officialKeys, chain, cleanup),
  };
  for (const [name, b] of Object.entries(stacks)) {
    const t0 = performance.now();
    const warm = await b.payEach(3);
    log(`   warm-up ${name}: ${buyers} deposits and ${2 * buyers} vouchers in ${((performance.now() - t0) / 1000).toFixed(1)} s${warm.failed ? `, ${warm.failed} failed: ${JSON.stringify(warm.failures)}` : ''}`);
  }

  const rows: Record<string, RunResult[]> = {};
  const profiles = new Map<number, Profile>();
  let ourPaidCalls = 0;
  const commandsBefore = await dbCommands(ours.metrics);
  for (let round = 0; round < ROUNDS; round++) {
    for (const concurrency of CONCURRENCIES) {
      const order = (round + CONCURRENCIES.indexOf(concurrency)) % 2 === 0 ? (['agentgate', 'official'] as const) : (['official', 'agentgate'] as const);
      for (const name of order) {
        await anyMomentWithin(500);
        if (name === 'agentgate') await ours.profile.start();
        const result = await stacks[name].run(concurrency, RAMP_MS, WINDOW_MS);
        if (name === 'agentgate') {
          ourPaidCalls += result.paidInRun;
          addProfile(profiles, concurrency, await ours.profile.stop(), result.paidInRun);
        }
        (rows[`${concurrency}|${name}`] ??= []).push(result);
        log(`   round ${round + 1} c${String(concurrency).padEnd(3)} ${name.padEnd(10)} ${result.perSecond.toFixed(1)} req/s, call p50 ${result.call.p50.toFixed(2)} ms p99 ${result.call.p99.toFixed(2)} ms, paid request p50 ${result.paidRequest.p50.toFixed(2)} ms p99 ${result.paidRequest.p99.toFixed(2)} ms${failures(result)}`);
      }
    }
  }
  const commands = difference(await dbCommands(ours.metrics), commandsBefore);

  log(`\n   vouchers, chain mining on arrival, medians over ${ROUNDS} rounds (each run ${WINDOW_MS / 1000} s measured)`);
  log('   | concurrency | stack | paid req/s | call p50 | call p99 | paid request p50 | paid request p99 | failed |');
  log('   |---|---|---|---|---|---|---|---|');
  const m = (list: RunResult[], pick: (r: RunResult) => number) => median(list.map(pick));
  for (const concurrency of CONCURRENCIES) {
    for (const name of ['agentgate', 'official'] as const) {
      const list = rows[`${concurrency}|${name}`]!;
      log(`   | ${concurrency} | ${name} | ${m(list, (r) => r.perSecond).toFixed(1)} | ${m(list, (r) => r.call.p50).toFixed(2)} ms | ${m(list, (r) => r.call.p99).toFixed(2)} ms | ${m(list, (r) => r.paidRequest.p50).toFixed(2)} ms | ${m(list, (r) => r.paidRequest.p99).toFixed(2)} ms | ${list.reduce((a, r) => a + r.failed, 0)} |`);
    }
  }
  for (const concurrency of CONCURRENCIES) {
    const [o, t] = [rows[`${concurrency}|agentgate`]!, rows[`${concurrency}|official`]!];
    log(`   c${concurrency}: ours/official req/s ${(m(o, (r) => r.perSecond) / m(t, (r) => r.perSecond)).toFixed(2)} (per round ${o.map((r, i) => (r.perSecond / t[i]!.perSecond).toFixed(2)).join(', ')}), call p50 ${(m(o, (r) => r.call.p50) / m(t, (r) => r.call.p50)).toFixed(2)}, paid request p50 ${(m(o, (r) => r.paidRequest.p50) / m(t, (r) => r.paidRequest.p50)).toFixed(2)}`);
  }
  const total = [...commands.values()].reduce((a, b) => a + b, 0);
  log(`   our database commands per paid call (everything the backend sent during the runs, over ${ourPaidCalls} paid calls): ${(total / ourPaidCalls).toFixed(2)} — ${[...commands].sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${(v / ourPaidCalls).toFixed(2)}`).join(', ')}`);
  for (const [concurrency, p] of profiles) logProfile(`at concurrency ${concurrency}`, p);
  const c1 = rows['1|agentgate']!;
  const c16 = [rows['16|agentgate'], rows['16|official']];
  if (c1) log(`   target: our p50 at most 5 ms on loopback — paid request ${m(c1, (r) => r.paidRequest.p50).toFixed(2)} ms, whole call ${m(c1, (r) => r.call.p50).toFixed(2)} ms at concurrency 1`);
  if (c16[0] && c16[1]) log(`   target: our req/s at concurrency 16 at least the official stack's — ${m(c16[0], (r) => r.perSecond).toFixed(1)} vs ${m(c16[1], (r) => r.perSecond).toFixed(1)}`);
}

// --- part 2 ------------------------------------------------------------------------------------------

async function channelsAgainstExact(mongoUri: string, chain: DevChain, cleanup: Cleanup) {
  log(`\n2. a chain that mines like Base (anvil --block-time 2): our channels against our exact, concurrency ${BLOCK_CONCURRENCY}, ${BLOCK_ROUNDS} rounds, each run starting at a random moment within a block`);
  // At least the six blocks whose timestamps tell the block clock the chain's cadence (block-clock.ts).
  const client = createPublicClient({ transport: http(chain.rpcUrl) });
  while ((await client.getBlockNumber({ cacheTime: 0 })) < 8n) await new Promise((r) => setTimeout(r, 500));
  const [channelKeys, exactKeys] = await fundBuyers(chain, [BLOCK_CONCURRENCY, BLOCK_CONCURRENCY], '25');
  const ours = await ourStack(mongoUri, chain, cleanup, {
    relayer: DEV_ACCOUNTS[0]!.privateKey,
    routes: { 'GET /weather': { price: PRICE, scheme: 'batch-settlement', description: 'Weather, per call' }, 'GET /weather-exact': { price: PRICE, description: 'Weather, per call' } },
  });
  const stacks = {
    channels: buyersFor(`${ours.url}/weather`, 'batch-settlement', channelKeys, chain, cleanup),
    exact: buyersFor(`${ours.url}/weather-exact`, 'exact', exactKeys, chain, cleanup),
  };
  for (const [name, b] of Object.entries(stacks)) {
    const t0 = performance.now();
    const warm = await b.payEach(name === 'channels' ? 2 : 1);
    log(`   warm-up ${name}: ${warm.paid} paid calls in ${((performance.now() - t0) / 1000).toFixed(1)} s${warm.failed ? `, ${warm.failed} failed: ${JSON.stringify(warm.failures)}` : ''}`);
  }
  const rows: Record<string, RunResult[]> = {};
  const profiles = new Map<number, Profile>();
  /** CPU milliseconds per paid call of each channels run, every process of the bench together (buyers, seller, backend, database, chain). */
  const cpuPerCall: number[] = [];
  for (let round = 0; round < BLOCK_ROUNDS; round++) {
    const order = round % 2 === 0 ? (['channels', 'exact'] as const) : (['exact', 'channels'] as const);
    for (const name of order) {
      await anyMomentWithin(2_000);
      // exact's calls take a block or two: a longer ramp-up and window, so the window holds many blocks.
      await ours.profile.start();
      const cpuBefore = cpuOfProcessTree();
      const result = name === 'exact' ? await stacks.exact.run(BLOCK_CONCURRENCY, 4_000, 12_000) : await stacks.channels.run(BLOCK_CONCURRENCY, RAMP_MS, WINDOW_MS);
      if (name === 'channels' && result.paidInRun > 0) cpuPerCall.push((cpuOfProcessTree().ms - cpuBefore.ms) / result.paidInRun);
      const run = await ours.profile.stop();
      addProfile(profiles, name === 'exact' ? 0 : 1, run, result.paidInRun);
      if (process.env.CHANNELS_PROFILE_ROUNDS) { const one = new Map<number, Profile>(); addProfile(one, 0, run, result.paidInRun); logProfile(`round ${round + 1} ${name}`, one.get(0)!); }
      (rows[name] ??= []).push(result);
      log(`   round ${round + 1} ${name.padEnd(8)} ${result.perSecond.toFixed(1)} req/s, call p50 ${result.call.p50.toFixed(1)} ms p99 ${result.call.p99.toFixed(1)} ms${failures(result)}`);
    }
  }
  log(`\n   block time 2 s, concurrency ${BLOCK_CONCURRENCY}, medians over ${BLOCK_ROUNDS} rounds`);
  log('   | agentgate scheme | paid req/s | call p50 | call p99 | failed |');
  log('   |---|---|---|---|---|');
  for (const name of ['channels', 'exact'] as const) {
    const list = rows[name]!;
    log(`   | ${name === 'channels' ? 'batch-settlement' : 'exact'} | ${median(list.map((r) => r.perSecond)).toFixed(1)} | ${median(list.map((r) => r.call.p50)).toFixed(1)} ms | ${median(list.map((r) => r.call.p99)).toFixed(1)} ms | ${list.reduce((a, r) => a + r.failed, 0)} |`);
  }
  logProfile('on 2 s blocks, channels', profiles.get(1)!);
  logProfile('on 2 s blocks, exact', profiles.get(0)!);
  const ratio = median(rows.channels!.map((r) => r.perSecond)) / median(rows.exact!.map((r) => r.perSecond));
  log(`   target: channels at least 10x exact at concurrency ${BLOCK_CONCURRENCY} — ${ratio.toFixed(1)}x (per round ${rows.channels!.map((r, i) => (r.perSecond / rows.exact![i]!.perSecond).toFixed(1)).join(', ')})`);
  // What the machine allows: a channel call is CPU-bound (no block to wait for), so its rate is the cores
  // the whole bench may use over the CPU one paid call costs in all of its processes together.
  const perCall = median(cpuPerCall);
  const needed = (10 * median(rows.exact!.map((r) => r.perSecond)) * perCall) / 1000;
  log(`   CPU per paid channel call, every process of the bench together (64 buyers, seller, backend, database, chain): ${perCall.toFixed(2)} ms (per round ${cpuPerCall.map((c) => c.toFixed(2)).join(', ')}); 10x exact would need ${needed.toFixed(1)} cores busy on channel calls alone, this machine has ${availableParallelism()}`);
}

// --- part 3 ------------------------------------------------------------------------------------------

async function transactionsPerCalls(mongoUri: string, chain: DevChain, cleanup: Cleanup) {
  const perBuyer = Math.ceil(CALLS / CALL_BUYERS);
  log(`\n3. ${perBuyer * CALL_BUYERS} paid calls from ${CALL_BUYERS} buyers through our stack, then our sweep claims and settles (CHANNEL_SWEEP_EVERY_MS=${SWEEP_MS}, a seller's setting; the default is 60000)`);
  const [keys] = await fundBuyers(chain, [CALL_BUYERS], '25');
  const client = createPublicClient({ transport: http(chain.rpcUrl) }) as PublicClient;
  const ours = await ourStack(mongoUri, chain, cleanup, {
    relayer: DEV_ACCOUNTS[9]!.privateKey, env: { CHANNEL_SWEEP_EVERY_MS: String(SWEEP_MS) },
    routes: { 'GET /weather': { price: PRICE, scheme: 'batch-settlement', description: 'Weather, per call' } },
  });
  // One deposit per buyer, for all its calls (DEPOSIT_CALLS), so the count shows what the sweep sends.
  const buyers = buyersFor(`${ours.url}/weather`, 'batch-settlement', keys, chain, cleanup);
  const fromBlock = await client.getBlockNumber({ cacheTime: 0 });
  const t0 = performance.now();
  const paid = await buyers.payEach(perBuyer);
  const seconds = (performance.now() - t0) / 1000;
  const callsEnded = new Date();
  log(`   ${paid.paid} paid calls in ${seconds.toFixed(1)} s (${(paid.paid / seconds).toFixed(0)}/s)${paid.failed ? `, ${paid.failed} failed: ${JSON.stringify(paid.failures)}` : ''}; waiting for the sweep to settle them to the seller ...`);
  // Done when the seller's payTo holds every paid call's price: claimed from the channels, then settled.
  const due = BigInt(paid.paid) * PRICE_ATOMIC;
  const waitStart = performance.now();
  for (;;) {
    const balance = await client.readContract({ address: chain.usdcAddress, abi: erc20Abi, functionName: 'balanceOf', args: [ours.payTo] });
    if (balance >= due) break;
    if (performance.now() - waitStart > 3 * SWEEP_MS + 60_000) throw new Error(`the sweep settled ${balance} of ${due} within ${(3 * SWEEP_MS + 60_000) / 1000} s`);
    await new Promise((r) => setTimeout(r, 250));
  }
  log(`   settled to the seller ${((performance.now() - waitStart) / 1000).toFixed(1)} s after the last call`);
  const channelIds = new Set((await ours.db.collection('channels').find({}, { projection: { _id: 1 } }).toArray()).map((c) => String(c._id).toLowerCase()));
  const toBlock = await client.getBlockNumber({ cacheTime: 0 });
  const kinds = new Map<string, number>();
  let transactions = 0;
  let gas = 0n;
  for (let n = fromBlock + 1n; n <= toBlock; n++) {
    const block = await client.getBlock({ blockNumber: n, includeTransactions: true });
    for (const tx of block.transactions) {
      const receipt = await client.getTransactionReceipt({ hash: tx.hash });
      const events = parseEventLogs({ abi: batchSettlementAbi, logs: receipt.logs.filter((l) => l.address.toLowerCase() === BATCH_SETTLEMENT_ADDRESS.toLowerCase()) });
      const ourEvents = events.filter((e) => {
        const args = e.args as { channelId?: Hex; receiver?: Address };
        return (args.channelId && channelIds.has(args.channelId.toLowerCase())) || (e.eventName === 'Settled' && args.receiver?.toLowerCase() === ours.payTo.toLowerCase());
      });
      if (!ourEvents.length) continue;
      transactions++;
      gas += receipt.gasUsed;
      const kind = [...new Set(ourEvents.map((e) => e.eventName).filter((e) => ['Deposited', 'Claimed', 'Settled', 'Refunded'].includes(e)))].join('+');
      kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
    }
  }
  log('\n   | paid calls | buyers (channels) | transactions on chain | of which | gas | gas per paid call |');
  log('   |---|---|---|---|---|---|');
  log(`   | ${paid.paid} | ${CALL_BUYERS} (${channelIds.size}) | ${transactions} | ${[...kinds].map(([k, v]) => `${v} ${k}`).join(', ')} | ${gas} | ${(Number(gas) / paid.paid).toFixed(0)} |`);
  const actions = await ours.db.collection('channel_actions').find({ kind: { $in: ['claim', 'settle'] } }).toArray();
  const during = (kind: string) => actions.filter((a) => a.kind === kind && a.createdAt < callsEnded).length;
  log(`   our sweep's actions: ${actions.filter((a) => a.kind === 'claim').length} claims (${during('claim')} while the calls ran), ${actions.filter((a) => a.kind === 'settle').length} settles (${during('settle')} while the calls ran); each sweep round that finds new vouchers sends one claim for all channels and one settle`);
  log(`   target: at most 15 transactions for 1,000 calls — ${transactions}`);
}

// --- the stacks --------------------------------------------------------------------------------------

/** Our backend in the bench's process, a seller on it, our Express middleware selling `routes`. */
async function ourStack(mongoUri: string, chain: DevChain, cleanup: Cleanup, options: { relayer: Hex; routes: Record<string, RouteConfig>; env?: Record<string, string> }) {
  const port = await freePort();
  const env: Record<string, string> = {
    // An access line per request on stdout would bury the results (LOG_LEVEL=info to watch them).
    AGENTGATE_MODE: 'dev', HOST: '127.0.0.1', LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn', PORT: String(port), BASE_URL: `http://127.0.0.1:${port}`,
    MAIL_DOMAIN: 'bench.test', DID_DOMAIN: `127.0.0.1%3A${port}`, MASTER_KEY: randomBytes(32).toString('hex'),
    MONGODB_URI: mongoUri, MONGODB_DB: `bench_${randomBytes(4).toString('hex')}`, SMTP_PORT: '0',
    CHAIN_RPC_URL: chain.rpcUrl, CHAIN_NETWORK: 'base-sepolia', USDC_ADDRESS: chain.usdcAddress, USDC_EIP712_NAME: DEV_USDC_NAME, USDC_EIP712_VERSION: DEV_USDC_VERSION,
    RELAYER_PRIVATE_KEY: options.relayer, METRICS_TOKEN: randomBytes(16).toString('hex'),
    ...options.env,
  };
  const backend = await startServer(loadConfig(env));
  cleanup.push(closeBackend(backend, mongoUri, env.MONGODB_DB!));
  const call = backendCaller(backend.url);
  const platformKey = (await call('POST', '/v0/agent-signup', undefined, {})).platform_key as string;
  const payTo = privateKeyToAccount(generatePrivateKey()).address;
  await call('PUT', '/v0/payments/acceptance', platformKey, { enabled: true, payTo });
  const sellerKey = (await call('POST', '/v0/payments/seller-keys', platformKey, {})).apiKey as string;
  const app = express();
  app.use(paymentMiddleware({ backendUrl: backend.url, apiKey: sellerKey, routes: options.routes }));
  const seller = await serve(withWeather(app, Object.keys(options.routes)), cleanup);
  for (const route of Object.keys(options.routes)) await call('POST', '/v0/payments/endpoints', platformKey, { url: `${seller.url}${route.split(' ')[1]}`, priceUsdc: '0.001', skipUrlCheck: true });
  return { url: seller.url, payTo, metrics: backend.app.metrics, db: backend.app.db, profile: profiler(backend.app) };
}

/**
 * Where our paid calls spend their time in the backend: each database command's round trip as the driver
 * timed it (command monitoring), and each route's handling time (agentgate_http_request_duration_seconds),
 * in milliseconds summed over a stretch of runs, to be divided by its paid calls.
 */
function profiler(app: { db: { getClient(): { on(event: string, fn: (e: any) => void): unknown } }; metrics: Metrics }) {
  const started = new Map<number, string>();
  const commands = new Map<string, { n: number; ms: number }>();
  let on = false;
  const client = app.db.getClient();
  client.on('commandStarted', (e: { requestId: number; commandName: string; command: Record<string, unknown> }) => {
    if (on) started.set(e.requestId, `${e.commandName} ${String(e.command[e.commandName] ?? '')}`.trim());
  });
  client.on('commandSucceeded', (e: { requestId: number; duration: number }) => {
    const key = started.get(e.requestId);
    if (!key) return;
    started.delete(e.requestId);
    const entry = commands.get(key) ?? { n: 0, ms: 0 };
    entry.n++;
    entry.ms += e.duration;
    commands.set(key, entry);
  });
  const routes = async () => new Map((await app.metrics.httpRequests.get()).values
    .filter((v) => v.metricName?.endsWith('_sum') || v.metricName?.endsWith('_count'))
    .map((v) => [`${v.metricName!.endsWith('_sum') ? 'sum' : 'count'} ${v.labels.method} ${v.labels.route}`, v.value] as [string, number]));
  let routesBefore = new Map<string, number>();
  return {
    async start() { on = true; routesBefore = await routes(); },
    async stop() {
      on = false;
      const after = await routes();
      const byRoute = new Map<string, { n: number; ms: number }>();
      for (const [key, value] of after) {
        const [kind, ...route] = key.split(' ');
        const delta = value - (routesBefore.get(key) ?? 0);
        if (delta <= 0) continue;
        const entry = byRoute.get(route.join(' ')) ?? { n: 0, ms: 0 };
        if (kind === 'sum') entry.ms += delta * 1000; else entry.n += delta;
        byRoute.set(route.join(' '), entry);
      }
      const result = { commands: new Map(commands), routes: byRoute };
      commands.clear();
      return result;
    },
  };
}

/**
 * The official stack on the same scheme: `@x402/express` with `BatchSettlementEvmScheme` (its default
 * in-memory channel storage) over the official batch-settlement facilitator in the same process, which
 * sends deposits with its own relayer (dev account 8) and signs as receiver authorizer with a key of its own.
 */
async function officialStack(chain: DevChain, payTo: Address, cleanup: Cleanup) {
  const viemChain = { ...baseSepolia, rpcUrls: { default: { http: [chain.rpcUrl] } } };
  const account = privateKeyToAccount(DEV_ACCOUNTS[8]!.privateKey, { nonceManager: createNonceManager({ source: jsonRpc() }) });
  const client = createWalletClient({ account, chain: viemChain, transport: http(chain.rpcUrl), pollingInterval: 100 }).extend(publicActions);
  const facilitator = new x402Facilitator().register(NETWORK, new OfficialBatchSettlementFacilitator(toFacilitatorEvmSigner({ ...client, address: account.address } as never), privateKeyToAccount(generatePrivateKey())));
  const local: FacilitatorClient = {
    verify: (payload, requirements) => facilitator.verify(payload, requirements),
    settle: (payload, requirements) => facilitator.settle(payload, requirements),
    getSupported: async () => facilitator.getSupported() as never,
  };
  const resourceServer = new x402ResourceServer(local).register(NETWORK, new OfficialChannelServer(payTo));
  const app = express();
  app.use(officialPaymentMiddleware({
    'GET /weather': {
      accepts: { scheme: 'batch-settlement', network: NETWORK, payTo, price: { asset: chain.usdcAddress, amount: PRICE_ATOMIC.toString(), extra: { name: DEV_USDC_NAME, version: DEV_USDC_VERSION } } },
      description: 'Weather, per call', mimeType: 'application/json',
    },
  }, resourceServer));
  return serve(withWeather(app, ['GET /weather']), cleanup);
}

function withWeather(app: Express, routes: string[]): Express {
  for (const route of routes) app.get(route.split(' ')[1]!, (_req, res) => { res.json({ city: 'Oslo', temperatureC: 7 }); });
  return app;
}

async function serve(app: Express, cleanup: Cleanup): Promise<{ url: string; server: Server }> {
  const server = createServer(app);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanup.push(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

function buyersFor(url: string, scheme: 'batch-settlement' | 'exact', keys: Hex[], chain: DevChain, cleanup: Cleanup, depositCalls = DEPOSIT_CALLS) {
  const buyers = startBuyers({ url, scheme, keys, rpcUrl: chain.rpcUrl, network: NETWORK, usdc: chain.usdcAddress, depositCalls });
  cleanup.push(() => buyers.stop());
  return buyers;
}


type Timings = Map<string, { n: number; ms: number }>;
type Profile = { calls: number; commands: Timings; routes: Timings };

function addProfile(profiles: Map<number, Profile>, concurrency: number, run: { commands: Timings; routes: Timings }, calls: number) {
  const p = profiles.get(concurrency) ?? { calls: 0, commands: new Map(), routes: new Map() };
  p.calls += calls;
  for (const [into, from] of [[p.commands, run.commands], [p.routes, run.routes]] as const) {
    for (const [k, v] of from) {
      const e = into.get(k) ?? { n: 0, ms: 0 };
      into.set(k, { n: e.n + v.n, ms: e.ms + v.ms });
    }
  }
  profiles.set(concurrency, p);
}

/** Per paid call: each route's time and each kind of database command's round trips (with how many a call sends). */
function logProfile(label: string, p: Profile) {
  const per = (x: { n: number; ms: number }) => `${(x.ms / p.calls).toFixed(2)} ms (${(x.n / p.calls).toFixed(2)}×)`;
  const list = (t: Timings) => [...t].filter(([, v]) => v.n / p.calls >= 0.05).sort((a, b) => b[1].ms - a[1].ms).map(([k, v]) => `${k} ${per(v)}`).join(', ');
  log(`   where our paid call spends its time in the backend ${label}, per paid call: routes ${list(p.routes)}; database round trips ${list(p.commands)}`);
}

const failures = (r: RunResult) => (r.failed ? `, ${r.failed} failed: ${JSON.stringify(r.failures)}` : '');

/** The database commands a backend has sent so far, by "command collection" (agentgate_db_commands_total). */
async function dbCommands(metrics: Metrics): Promise<Map<string, number>> {
  const metric = await metrics.dbCommands.get();
  return new Map(metric.values.map((v) => [`${v.labels.command} ${v.labels.collection}`.trim(), v.value]));
}

function difference(after: Map<string, number>, before: Map<string, number>): Map<string, number> {
  return new Map([...after].map(([k, v]) => [k, v - (before.get(k) ?? 0)] as [string, number]).filter(([, v]) => v > 0));
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
