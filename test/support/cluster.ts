/**
 * A production-shaped deployment on one machine, for the scale-out test and bench/scale-out.ts: `agentgate
 * serve` and `agentgate worker` OS processes on one database, those with keys all given the same relayer
 * pool (serves may be given none: they accept and leave sending to others), settling on an anvil that
 * mines on a timer; a load balancer in front (plain round robin, or one that follows /ready); processes
 * that join, restart and die; and an audit that compares what the buyers were finally told, what the
 * database recorded, what the chain moved and which webhooks arrived.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, request as httpRequest, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { parseAbiItem, parseEther, toHex, type Address, type Hex, type PublicClient } from 'viem';
import { privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { MongoClient } from 'mongodb';
import express from 'express';
import { HTTPFacilitatorClient, x402ResourceServer } from '@x402/core/server';
import { registerExactEvmScheme } from '@x402/evm/exact/server';
import { paymentMiddleware as officialPaymentMiddleware } from '@x402/express';
import { freePort } from '../../server/platform/net.js';
import { DEV_NETWORK, DEV_NETWORKS, DEV_USDC_NAME, DEV_USDC_VERSION, type DevNetwork } from '../../server/dev/chain/dev-chain.js';
import { networkVariablePrefix } from '../../server/platform/config.js';
import { signAuthorization } from './chain.js';
import type { Authorization } from '../../server/chain/usdc.js';

const CLI = join(process.cwd(), 'bin', 'agentgate.js');

export interface ClusterChain { rpcUrl: string; usdcAddress: Address; factoryAddress: Address }

/** A network a cluster settles on: its dev stand-in (chain id, token name) and its chain. The default: Base Sepolia's. */
export interface ClusterNetwork { dev: DevNetwork; chain: ClusterChain }

const caip2Of = (dev: DevNetwork) => `eip155:${dev.chainId}` as const;

export interface ClusterProcess {
  name: string;
  kind: 'serve' | 'worker';
  /** Whether it was given the relayer pool's keys. */
  keys: boolean;
  url?: string;
  child: ChildProcess;
  /** Its environment (a restart starts it again with the same one, on the same port). */
  env: Record<string, string>;
  /** Everything it printed, every run of it (JSON log lines in serve and worker). */
  output: string[];
  alive: boolean;
  /** How many times it was started. */
  starts: number;
  /** Restarts whose start failed and was made again (a start that waited for the database does not fail). */
  failedStarts: number;
}

export interface Cluster {
  db: string;
  env: Record<string, string>;
  serves: ClusterProcess[];
  workers: ClusterProcess[];
  kill(process: ClusterProcess): void;
  /** A new serve process joins (it is in `serves` once it answers /health). */
  addServe(options: { keys: boolean }): Promise<ClusterProcess>;
  /** SIGTERM (a graceful stop), then the same process started again, as an orchestrator's rolling restart does. */
  restart(process: ClusterProcess): Promise<RestartTimes>;
  stop(): Promise<void>;
}

export interface ClusterOptions {
  mongoUri: string;
  chain: ClusterChain;
  /** Serve processes given the pool's keys. */
  serves: number;
  /** Serve processes given no keys: they accept payments and hand them to the lanes of processes with keys. */
  keylessServes?: number;
  /** Worker processes, given the pool's keys. */
  workers: number;
  /** The relayer pool every process with keys is given (RELAYER_PRIVATE_KEY + RELAYER_PRIVATE_KEYS). */
  pool: Hex[];
  env?: Record<string, string>;
  /**
   * Networks besides the default one (NETWORKS and each one's <NAME>_RPC_URL, _USDC_*), each reached at
   * `rpcUrl` when given (a proxy a test can take away) else at its chain's own; the pool gets gas on each.
   */
  moreNetworks?: Array<ClusterNetwork & { rpcUrl?: string }>;
}

async function rpc(url: string, method: string, params: unknown[]) {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
  const body = await res.json() as { result?: any; error?: { message: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result;
}

export async function startCluster(options: ClusterOptions): Promise<Cluster> {
  for (const chain of [options.chain, ...(options.moreNetworks ?? []).map((n) => n.chain)]) {
    for (const key of options.pool) await rpc(chain.rpcUrl, 'anvil_setBalance', [privateKeyToAccount(key).address, toHex(parseEther('1000'))]);
  }
  const more = options.moreNetworks ?? [];
  const db = `cluster_${randomBytes(4).toString('hex')}`;
  // One deployment's configuration: the same for every process but its port and whether it has keys.
  const env: Record<string, string> = {
    // Production mode, as an operator whose sellers and webhook receivers are on its own network runs it:
    // those (here on this machine) are let through by ALLOWED_PRIVATE_ADDRESSES. The service signing key is
    // made once by the first process on the database and shared through it (sealed under MASTER_KEY).
    AGENTGATE_MODE: 'production', ALLOWED_PRIVATE_ADDRESSES: '127.0.0.1', HOST: '127.0.0.1', MAIL_DOMAIN: 'cluster.test', DID_DOMAIN: 'cluster.test',
    MASTER_KEY: randomBytes(32).toString('hex'),
    MONGODB_URI: options.mongoUri, MONGODB_DB: db, SMTP_HOST: '127.0.0.1', SMTP_PORT: '0', TRUST_PROXY: 'true',
    CHAIN_RPC_URL: options.chain.rpcUrl, CHAIN_NETWORK: DEV_NETWORK, USDC_ADDRESS: options.chain.usdcAddress,
    USDC_EIP712_NAME: DEV_USDC_NAME, USDC_EIP712_VERSION: DEV_USDC_VERSION, WALLET_FACTORY_ADDRESS: options.chain.factoryAddress,
    LOG_LEVEL: 'info',
    ...(more.length ? { NETWORKS: [DEV_NETWORK, ...more.map((n) => n.dev.network)].join(',') } : {}),
    ...Object.fromEntries(more.flatMap(({ dev, chain, rpcUrl }) => {
      const prefix = networkVariablePrefix(dev.network);
      return [[`${prefix}_RPC_URL`, rpcUrl ?? chain.rpcUrl], [`${prefix}_USDC_ADDRESS`, chain.usdcAddress], [`${prefix}_USDC_EIP712_NAME`, dev.tokenName], [`${prefix}_USDC_EIP712_VERSION`, DEV_USDC_VERSION]];
    })),
    ...options.env,
  };
  const keys: Record<string, string> = {
    RELAYER_PRIVATE_KEY: options.pool[0]!, ...(options.pool.length > 1 ? { RELAYER_PRIVATE_KEYS: options.pool.slice(1).join(',') } : {}),
  };
  const serves: ClusterProcess[] = [];
  const workers: ClusterProcess[] = [];
  const stopProcess = async (p: ClusterProcess) => {
    if (!p.alive) return;
    const exited = new Promise((resolve) => p.child.once('exit', resolve));
    p.child.kill('SIGTERM');
    const timer = setTimeout(() => {
      // A graceful stop must not take a minute: say which process needed killing, and its last lines.
      process.stdout.write(`\n${p.name} had not stopped 60 s after SIGTERM: SIGKILL. Its last lines:\n${p.output.slice(-15).join('\n')}\n`);
      p.child.kill('SIGKILL');
    }, 60_000);
    await exited;
    clearTimeout(timer);
    p.alive = false;
  };
  const startServe = async (name: string, withKeys: boolean) => {
    const port = await freePort();
    const proc = launch(name, 'serve', withKeys, { ...env, ...(withKeys ? keys : {}), PORT: String(port), BASE_URL: `http://127.0.0.1:${port}` });
    proc.url = `http://127.0.0.1:${port}`;
    await untilStarted(proc, 90_000);
    return proc;
  };
  const cluster: Cluster = {
    db, env, serves, workers,
    kill(proc) {
      proc.alive = false;
      proc.child.kill('SIGKILL');
    },
    async addServe({ keys: withKeys }) {
      const proc = await startServe(`serve-${serves.length + 1}`, withKeys);
      serves.push(proc);
      return proc;
    },
    async restart(proc) {
      const from = Date.now();
      const logFrom = proc.output.length;
      await stopProcess(proc);
      const stopMs = Date.now() - from;
      // The slow steps, and the HTTP drain (a serve's first step, logged on its own) when it took as long.
      const slowSteps = proc.output.slice(logFrom).filter((line) => /stopping: (slow step|HTTP drained)/.test(line)).flatMap((line) => {
        const { step = 'HTTP drain', durationMs } = JSON.parse(line) as { step?: string; durationMs: number };
        return durationMs >= 500 ? [`${step} ${(durationMs / 1000).toFixed(1)} s`] : [];
      });
      // Started again until it stays up: a start while the database is away fails, and is tried again.
      const deadline = Date.now() + 180_000;
      for (;;) {
        relaunch(proc);
        const startFrom = proc.output.length;
        try {
          await untilStarted(proc, 90_000);
          return { stopMs, startMs: Date.now() - from - stopMs, slowSteps, slowStartSteps: slowStartSteps(proc.output.slice(startFrom)) };
        } catch (err) {
          if (Date.now() > deadline) throw err;
          proc.failedStarts++;
          await new Promise((r) => setTimeout(r, 1_000));
        }
      }
    },
    async stop() {
      await Promise.all([...serves, ...workers].map((p) => stopProcess(p).catch(() => {})));
      // CLUSTER_LOG_DIR=<folder> keeps every process's log lines, their stops included, to read after a run.
      if (process.env.CLUSTER_LOG_DIR) {
        const { writeFileSync, mkdirSync } = await import('node:fs');
        mkdirSync(process.env.CLUSTER_LOG_DIR, { recursive: true });
        for (const p of [...serves, ...workers]) writeFileSync(join(process.env.CLUSTER_LOG_DIR, `${p.name}.log`), p.output.join('\n'));
      }
      const client = await MongoClient.connect(options.mongoUri);
      await client.db(db).dropDatabase().catch(() => {});
      await client.close();
    },
  };
  try {
    serves.push(...await Promise.all([
      ...Array.from({ length: options.serves }, (_, i) => startServe(`serve-${i + 1}`, true)),
      ...Array.from({ length: options.keylessServes ?? 0 }, (_, i) => startServe(`serve-${options.serves + i + 1}`, false)),
    ]));
    workers.push(...await Promise.all(Array.from({ length: options.workers }, async (_, i) => {
      const proc = launch(`worker-${i + 1}`, 'worker', true, { ...env, ...keys, PORT: '0', BASE_URL: 'http://127.0.0.1:1' });
      await untilStarted(proc, 90_000);
      return proc;
    })));
  } catch (err) {
    await cluster.stop();
    throw err;
  }
  return cluster;
}

function launch(name: string, kind: 'serve' | 'worker', keys: boolean, env: Record<string, string>): ClusterProcess {
  const proc = { name, kind, keys, env, output: [], alive: false, starts: 0, failedStarts: 0 } as unknown as ClusterProcess;
  relaunch(proc);
  return proc;
}

/** Starts the process (again) with its environment; its output joins what it printed before. */
function relaunch(proc: ClusterProcess): void {
  const child = spawn(process.execPath, [CLI, proc.kind], { env: { ...process.env, ...proc.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  proc.child = child;
  proc.alive = true;
  proc.starts++;
  let partial = '';
  const onData = (chunk: Buffer) => {
    const lines = (partial + chunk.toString('utf8')).split('\n');
    partial = lines.pop()!;
    proc.output.push(...lines);
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  child.once('exit', () => { if (proc.child === child) proc.alive = false; });
}

/** Where a restart's time went: the graceful stop, then the start until it answered; each with its steps of 0.5 s or more, from the log. */
export interface RestartTimes { stopMs: number; startMs: number; slowSteps: string[]; slowStartSteps: string[] }

/** The start's steps of 0.5 s or more, from its "listening" line (`load` is Node's boot and the modules' import). */
function slowStartSteps(lines: string[]): string[] {
  const line = lines.find((l) => l.includes('"listening"'));
  const steps = line ? (JSON.parse(line) as { startSteps?: Record<string, number> }).startSteps ?? {} : {};
  return Object.entries(steps).filter(([, ms]) => ms >= 500).map(([step, ms]) => `${step} ${(ms / 1000).toFixed(1)} s`);
}

/** Waits until a serve answers /health, or a worker says it runs (in this run of it). */
async function untilStarted(proc: ClusterProcess, timeoutMs: number): Promise<void> {
  const from = proc.output.length;
  const started = proc.kind === 'serve'
    ? async () => fetch(`${proc.url}/health`).then((r) => r.ok, () => false)
    : async () => proc.output.slice(from).some((line) => /worker running/.test(line));
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!proc.alive) throw new Error(`${proc.name} exited while starting:\n${proc.output.slice(-30).join('\n')}`);
    if (await started()) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${proc.name} did not start in ${timeoutMs} ms:\n${proc.output.slice(-30).join('\n')}`);
}

/**
 * A load balancer in front of the serve processes. `followReady`: round robin over those whose /ready
 * answers 200 (checked every 500 ms), as a balancer with readiness probes. Otherwise plain round robin
 * over every serve, whatever its state, as the simplest balancer does: a connection refused (a process
 * stopping or not yet started) is tried on the next serve, as nginx's `proxy_next_upstream error` does.
 */
export class Balancer {
  private ready = new Set<ClusterProcess>();
  private turn = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly serves: ClusterProcess[], private readonly options: { followReady: boolean } = { followReady: true }) {}

  async start(): Promise<void> {
    if (!this.options.followReady) return;
    await this.probe();
    this.timer = setInterval(() => { void this.probe(); }, 500);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  get followsReady(): boolean {
    return this.options.followReady;
  }

  /** How many serves it balances over. */
  get size(): number {
    return this.serves.length;
  }

  pick(): ClusterProcess {
    if (!this.options.followReady) return this.serves[this.turn++ % this.serves.length]!;
    const pool = this.serves.filter((s) => s.alive && this.ready.has(s));
    const candidates = pool.length ? pool : this.serves.filter((s) => s.alive);
    if (!candidates.length) throw new Error('no serve process is alive');
    return candidates[this.turn++ % candidates.length]!;
  }

  down(proc: ClusterProcess): void {
    this.ready.delete(proc);
  }

  private async probe(): Promise<void> {
    await Promise.all(this.serves.map(async (s) => {
      const ok = s.alive && await fetch(`${s.url}/ready`, { signal: AbortSignal.timeout(2_000) }).then((r) => r.status === 200, () => false);
      if (ok) this.ready.add(s); else this.ready.delete(s);
    }));
  }
}

/**
 * The balancer as an HTTP address, for a client that takes one URL (a seller middleware's `backendUrl`):
 * each request goes to the serve `balancer` picks; a connection refused tries the next one, as nginx's
 * `proxy_next_upstream error` does. A connection lost mid-request is a 502, as a proxy answers it.
 */
export async function balancerProxy(balancer: Balancer): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const forward = (attempt: number) => {
      const target = balancer.pick();
      const upstream = httpRequest(`${target.url}${req.url}`, { method: req.method, headers: { ...req.headers, host: new URL(target.url!).host } }, (answer: IncomingMessage) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      upstream.on('error', (err: NodeJS.ErrnoException) => {
        if (res.headersSent) { res.destroy(); return; }
        if (err.code === 'ECONNREFUSED' && attempt + 1 < balancer.size) { forward(attempt + 1); return; }
        res.writeHead(502, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'bad_gateway', message: `upstream ${target.name}: ${err.message}`, status: 502 }));
      });
      upstream.end(body);
    };
    forward(0);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

export interface SellerAccount { platformKey: string; sellerKey: string; payTo: Address }
export interface Seller extends SellerAccount {
  /** The registered URL the load pays for: its storefront's paid route. */
  resource: string;
  /** Stops the storefront. */
  close(): Promise<void>;
}

/** A JSON call to one serve process, from a client address of its own (signup is limited per address). */
async function clusterCall(url: string, method: string, path: string, key: string | undefined, body: unknown) {
  const res = await fetch(url + path, { method, headers: { 'content-type': 'application/json', 'x-forwarded-for': `10.9.${Math.floor(Math.random() * 250)}.1`, ...(key ? { authorization: `Bearer ${key}` } : {}) }, body: JSON.stringify(body) });
  const json = await res.json() as any;
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** Signs up a seller through one serve process: acceptance on with a fresh payTo, and a seller key. */
export async function clusterSellerAccount(url: string): Promise<SellerAccount> {
  const signup = await clusterCall(url, 'POST', '/v0/agent-signup', undefined, {});
  const payTo = privateKeyToAccount(`0x${randomBytes(32).toString('hex')}`).address;
  await clusterCall(url, 'PUT', '/v0/payments/acceptance', signup.platform_key, { enabled: true, payTo });
  const sellerKey = (await clusterCall(url, 'POST', '/v0/payments/seller-keys', signup.platform_key, {})).apiKey as string;
  return { platformKey: signup.platform_key, sellerKey, payTo };
}

/** Registers `resource` at $0.01 (the backend fetches it and checks its 402), with a webhook to `webhookUrl` if given. */
export async function registerClusterEndpoint(url: string, seller: SellerAccount, resource: string, webhookUrl?: string): Promise<void> {
  await clusterCall(url, 'POST', '/v0/payments/endpoints', seller.platformKey, { url: resource, priceUsdc: '0.01', ...(webhookUrl ? { webhookUrl } : {}) });
}

/**
 * A seller whose storefront is an official `@x402/express` seller using the cluster as its facilitator
 * (HTTPFacilitatorClient at `<url>/v0/x402` with the seller key), asking $0.01 in exact on eip155:84532
 * (and on each of `moreNetworks`): the seller the load's POST /v0/x402/settle calls stand for. Its URL is
 * registered through `url`.
 */
export async function clusterSeller(url: string, chain: ClusterChain, webhookUrl?: string, moreNetworks: ClusterNetwork[] = []): Promise<Seller> {
  const seller = await clusterSellerAccount(url);
  const auth = { Authorization: `Bearer ${seller.sellerKey}` };
  const facilitator = new HTTPFacilitatorClient({ url: `${url}/v0/x402`, createAuthHeaders: async () => ({ verify: auth, settle: auth, supported: auth }) });
  const networks: ClusterNetwork[] = [{ dev: DEV_NETWORKS[0]!, chain }, ...moreNetworks];
  const app = express();
  app.use(officialPaymentMiddleware({
    'GET /weather': {
      accepts: networks.map((n) => ({ scheme: 'exact', network: caip2Of(n.dev), payTo: seller.payTo, price: { amount: '10000', asset: n.chain.usdcAddress, extra: { name: n.dev.tokenName, version: DEV_USDC_VERSION } } })),
      description: 'Weather', mimeType: 'application/json',
    },
  }, registerExactEvmScheme(new x402ResourceServer(facilitator), { networks: networks.map((n) => caip2Of(n.dev)) })));
  app.get('/weather', (_req, res) => { res.json({ weather: 'sunny' }); });
  const shop = createServer(app);
  await new Promise<void>((resolve) => shop.listen(0, '127.0.0.1', resolve));
  const resource = `http://127.0.0.1:${(shop.address() as AddressInfo).port}/weather`;
  const close = () => new Promise<void>((resolve) => { shop.closeAllConnections(); shop.close(() => resolve()); });
  try {
    await registerClusterEndpoint(url, seller, resource, webhookUrl);
  } catch (err) {
    await close();
    throw err;
  }
  return { ...seller, resource, close };
}

export interface PreparedPayment { index: number; authorization: Authorization; body: unknown; /** Its network's v1 name. */ network: string }

/**
 * Signed v2 facilitator requests, one per payment, from `buyers` in turn (nonces are random: a buyer signs
 * any number), on `network` (default: Base Sepolia's stand-in). Each carries a payment-identifier, so a
 * buyer who got no final answer may send it again.
 */
export async function preparePayments(count: number, seller: Seller, buyers: PrivateKeyAccount[], chain: ClusterChain, network: DevNetwork = DEV_NETWORKS[0]!): Promise<PreparedPayment[]> {
  const requirements = {
    scheme: 'exact', network: caip2Of(network), amount: '10000', asset: chain.usdcAddress, payTo: seller.payTo, maxTimeoutSeconds: 300,
    extra: { name: network.tokenName, version: DEV_USDC_VERSION },
  };
  const run = randomBytes(6).toString('hex');
  return Promise.all(Array.from({ length: count }, async (_, index) => {
    const signed = await signAuthorization(buyers[index % buyers.length]!, { to: seller.payTo, value: 10_000n, validBefore: BigInt(Math.floor(Date.now() / 1000) + 900) }, { verifyingContract: chain.usdcAddress, chainId: network.chainId, name: network.tokenName });
    const a = signed.authorization;
    return {
      index, authorization: a, network: network.network,
      body: {
        x402Version: 2, paymentRequirements: requirements,
        paymentPayload: {
          x402Version: 2, resource: { url: seller.resource }, accepted: requirements,
          payload: { signature: signed.signature, authorization: { from: a.from, to: a.to, value: a.value.toString(), validAfter: a.validAfter.toString(), validBefore: a.validBefore.toString(), nonce: a.nonce } },
          extensions: { 'payment-identifier': { info: { id: `cluster-${run}-${network.chainId}-${index}` } } },
        },
      },
    };
  }));
}

export interface Answer {
  index: number;
  target: string;
  /** From the first attempt to the final answer. */
  ms: number;
  /** What the buyer's seller was finally told: success, a refusal, an HTTP error, or no answer at all. */
  kind: 'paid' | 'refused' | 'http_error' | 'no_answer';
  reason?: string;
  status?: number;
  transaction?: string;
  /** The answers before the final one that made the buyer try again (no answer, 503, settlement_pending). */
  retries: string[];
}

export interface LoadOptions {
  concurrency: number;
  /**
   * Try again as a buyer whose payment carries a payment-identifier does, with the same payment: after no
   * answer, a 502, 503 or 504, or `settlement_pending`, for up to `forMs`.
   */
  retry?: { forMs: number };
  /** Before each payment, a pause of up to this many ms, at random: buyers arrive at arbitrary moments. */
  thinkMs?: number;
  onAnswer?: (answer: Answer, done: number) => void;
}

const RETRY_STATUSES = new Set([502, 503, 504]);
const refusedConnection = (err: unknown) => ((err as { cause?: { code?: string } }).cause?.code ?? '') === 'ECONNREFUSED';

/** Sends every payment through the balancer, `concurrency` at a time; `onAnswer` sees each final answer as it comes. */
export async function runLoad(payments: PreparedPayment[], balancer: Balancer, seller: Seller, options: LoadOptions): Promise<{ answers: Answer[]; seconds: number }> {
  const answers: Answer[] = [];
  let next = 0;
  const started = Date.now();
  const attempt = async (payment: PreparedPayment): Promise<Omit<Answer, 'ms' | 'retries'>> => {
    // A refused connection never reached a process: the balancer goes on to the next serve at once.
    for (let hops = 0; ; hops++) {
      const target = balancer.pick();
      try {
        const res = await fetch(`${target.url}/v0/x402/settle`, {
          method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${seller.sellerKey}` }, body: JSON.stringify(payment.body),
          signal: AbortSignal.timeout(120_000),
        });
        const body = await res.json().catch(() => ({})) as any;
        return res.status === 200
          ? { index: payment.index, target: target.name, kind: body.success ? 'paid' : 'refused', reason: body.errorReason, transaction: body.transaction || undefined, status: 200 }
          : { index: payment.index, target: target.name, kind: 'http_error', status: res.status, reason: body.error };
      } catch (err) {
        if (refusedConnection(err) && hops < balancer.size * 3) {
          if (hops > 0 && hops % balancer.size === 0) await new Promise((r) => setTimeout(r, 200));
          continue;
        }
        balancer.down(target);
        return { index: payment.index, target: target.name, kind: 'no_answer', reason: (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message };
      }
    }
  };
  const worker = async () => {
    while (next < payments.length) {
      const payment = payments[next++]!;
      if (options.thinkMs) await new Promise((r) => setTimeout(r, Math.random() * options.thinkMs!));
      const t0 = Date.now();
      const retries: string[] = [];
      let answer = await attempt(payment);
      while (options.retry && Date.now() - t0 < options.retry.forMs
        && (answer.kind === 'no_answer' || (answer.kind === 'http_error' && RETRY_STATUSES.has(answer.status!)) || (answer.kind === 'refused' && answer.reason === 'settlement_pending'))) {
        retries.push(`${answer.kind} ${answer.status ?? ''} ${answer.reason ?? ''}`.replace(/\s+/g, ' ').trim());
        await new Promise((r) => setTimeout(r, 500 + Math.random() * 500));
        answer = await attempt(payment);
      }
      const final: Answer = { ...answer, ms: Date.now() - t0, retries };
      answers.push(final);
      options.onAnswer?.(final, answers.length);
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, worker));
  return { answers, seconds: (Date.now() - started) / 1000 };
}

const AUTHORIZATION_USED = parseAbiItem('event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)');

export interface Audit {
  payments: number;
  /** Final answers (after a buyer's retries). */
  answered: { paid: number; refused: Record<string, number>; httpErrors: Record<string, number>; noAnswer: number };
  /** Payments whose buyer had to try again, and the answers that made them (no answer, 503, settlement_pending). */
  retried: { payments: number; byAnswer: Record<string, number> };
  latency: { p50: number; p95: number };
  onChain: number;
  records: { settled: number; failed: Record<string, number>; open: number; duplicates: number };
  /** Problems: each one a broken promise to a buyer, a seller or the books. */
  problems: string[];
  transactions: number;
  gasPerPayment: number;
  webhooks: { delivered: number; duplicatesAtReceiver: number; byStatus: Record<string, number>; lastErrors: string[] };
}

/** Reasons that would mean a payment failed because of the relayer, not the buyer. */
const RELAYER_REASONS = /relayer|settle_failed|settle_reverted|nonce too|underpriced|settle_unconfirmed|settlement_pending/;

/**
 * Compares the three accounts of what happened: the buyers' answers, the database's records and the chain's
 * AuthorizationUsed events (and the webhook receiver's log).
 */
export async function audit(input: {
  payments: PreparedPayment[]; answers: Answer[]; mongoUri: string; db: string; client: PublicClient; chain: ClusterChain; fromBlock: bigint;
  received?: Array<{ headers: Record<string, unknown>; json: any }>;
  /** Audit this network's records only (its v1 name): the chain is that network's. Default: every record. */
  network?: string;
}): Promise<Audit> {
  const problems: string[] = [];
  const key = (authorizer: string, nonce: string) => `${authorizer}:${nonce}`.toLowerCase();
  const ours = new Map(input.payments.map((p) => [key(p.authorization.from, p.authorization.nonce), p]));
  const logs = await input.client.getLogs({ address: input.chain.usdcAddress, event: AUTHORIZATION_USED, fromBlock: input.fromBlock, toBlock: 'latest' });
  const usedBy = new Map<string, string[]>();
  for (const log of logs) {
    const k = key(log.args.authorizer!, log.args.nonce!);
    if (!ours.has(k)) continue;
    usedBy.set(k, [...(usedBy.get(k) ?? []), log.transactionHash]);
  }
  for (const [k, txs] of usedBy) if (txs.length > 1) problems.push(`authorization ${k} used ${txs.length} times on chain`);

  const mongo = await MongoClient.connect(input.mongoUri);
  const scope = input.network ? { network: input.network } : {};
  try {
    const db = mongo.db(input.db);
    // A settled payment's record is written in the background after its answer (its settlement entry
    // already stands, and reads merge it): what is audited is the state once those writes are done.
    for (const deadline = Date.now() + 15_000; Date.now() < deadline;) {
      if (await db.collection('payments').countDocuments({ status: 'verified', ...scope }) === 0) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    // The records of these payments (a database may hold earlier loads' too).
    const records = (await db.collection('payments').find(scope).toArray()).filter((r) => ours.has(key(r.authorization.from, r.authorization.nonce)));
    const byKey = new Map<string, any[]>();
    for (const r of records) {
      const k = key(r.authorization.from, r.authorization.nonce);
      byKey.set(k, [...(byKey.get(k) ?? []), r]);
    }
    let duplicates = 0;
    for (const [k, rs] of byKey) if (rs.length > 1) { duplicates++; problems.push(`authorization ${k} has ${rs.length} payment records`); }
    // Every payment the chain moved is recorded settled, once, with the transaction that moved it.
    for (const [k, txs] of usedBy) {
      const settled = (byKey.get(k) ?? []).filter((r) => r.status === 'settled');
      if (settled.length !== 1) problems.push(`moved on chain in ${txs[0]} but ${settled.length} settled records`);
      else if (settled[0].txHash !== txs[0]) problems.push(`recorded settled by ${settled[0].txHash}, moved by ${txs[0]}`);
    }
    // Nothing recorded settled that the chain did not move.
    for (const r of records) if (r.status === 'settled' && !usedBy.has(key(r.authorization.from, r.authorization.nonce))) problems.push(`record ${r._id} settled but not moved on chain`);
    // Every payment answered paid was moved on chain, by the transaction named in the answer.
    for (const a of input.answers) {
      if (a.kind !== 'paid') continue;
      const p = input.payments[a.index]!;
      const txs = usedBy.get(key(p.authorization.from, p.authorization.nonce));
      if (!txs) problems.push(`payment ${a.index} answered paid (${a.transaction}) but not moved on chain`);
      else if (txs[0] !== a.transaction) problems.push(`payment ${a.index} answered paid by ${a.transaction}, moved by ${txs[0]}`);
    }
    // No failure caused by the relayer, in an answer or a record.
    for (const a of input.answers) {
      if ((a.kind === 'refused' || a.kind === 'http_error') && RELAYER_REASONS.test(a.reason ?? '')) problems.push(`payment ${a.index} answered ${a.kind} ${a.status ?? ''} ${a.reason}`);
    }
    const failed: Record<string, number> = {};
    for (const r of records) if (r.status === 'failed') failed[r.failureReason] = (failed[r.failureReason] ?? 0) + 1;
    for (const reason of Object.keys(failed)) if (RELAYER_REASONS.test(reason)) problems.push(`${failed[reason]} payments recorded failed with ${reason}`);
    const open = records.filter((r) => r.status === 'verified').length;
    if (open) problems.push(`${open} payments still open: ${records.filter((r) => r.status === 'verified').map((r) => `${r._id} (claimed ${r.createdAt.toISOString()}${r.txHash ? `, sent in ${r.txHash}` : ''}, used on chain: ${usedBy.has(key(r.authorization.from, r.authorization.nonce))})`).join(', ')}`);

    // Webhooks: every settled payment of the registered endpoint has exactly one delivered delivery.
    const deliveries = await db.collection('webhook_deliveries').find({}).toArray();
    // Listed first (the printed problems are cut at 20): a delivery still pending at the end, where its job
    // stands (the queue's record and its claims), so a failure says whether the job was never made, never
    // claimed, claimed and lost, or is waiting a retry.
    for (const d of deliveries.filter((x) => x.status === 'pending').slice(0, 5)) {
      // The queue's jobs, and those that gave up (moved out of the queue a minute after).
      const jobs: Array<Record<string, any>> = [
        ...await db.collection('jobs').find({ 'data.deliveryId': d._id }).toArray(),
        ...(await db.collection('jobs_given_up').find({ 'data.deliveryId': d._id }).toArray()).map((j) => ({ ...j, givenUp: true })),
      ];
      const claims = jobs.length ? await db.collection('jobs_claims').find({ jobId: { $in: jobs.map((j) => String(j._id)) } }).toArray() : [];
      const attemptClaims = await db.collection('webhook_attempt_claims').find({ _id: { $regex: `^${d._id}:` } } as never).toArray();
      const at = (v: unknown) => (v instanceof Date ? v.toISOString().slice(11, 23) : String(v ?? '-'));
      problems.push(`pending delivery ${d._id} (attempts ${d.attemptCount}, round ${d.round}, next ${at(d.nextAttemptAt)}, created ${at(d.createdAt)}): `
        + (jobs.length ? jobs.map((j) => `${'givenUp' in j ? 'given-up ' : ''}job next ${at(j.nextRunAt)} locked ${at(j.lockedAt)} by ${j.lastModifiedBy ?? '-'} ran ${at(j.lastRunAt)} finished ${at(j.lastFinishedAt)} fails ${j.failCount ?? 0}${j.failReason ? ` (${String(j.failReason).slice(0, 80)})` : ''}`).join('; ') : 'no job')
        + `; claims ${claims.map((c) => `${String(c._id).split(':').slice(1).join(':')} until ${at(c.expiresAt)}`).join(', ') || 'none'}`
        + `; attempt claims ${attemptClaims.map((c) => `${String(c._id).split(':').slice(1).join(':')} until ${at(c.expiresAt)}`).join(', ') || 'none'}`);
    }
    let delivered = 0;
    for (const r of input.received ? records.filter((x) => x.status === 'settled') : []) {
      const mine = deliveries.filter((d) => d.paymentId === r._id);
      const ok = mine.filter((d) => d.status === 'delivered').length;
      if (mine.length !== 1 || ok !== 1) problems.push(`payment ${r._id}: ${mine.length} deliveries, ${ok} delivered`);
      else delivered++;
    }
    const seen = new Map<string, number>();
    for (const request of input.received ?? []) {
      const id = String(request.headers['x-service-idempotency-key'] ?? request.json?.paymentId);
      seen.set(id, (seen.get(id) ?? 0) + 1);
    }
    const duplicatesAtReceiver = [...seen.values()].filter((n) => n > 1).length;

    const txs = [...new Set([...usedBy.values()].map((t) => t[0]!))];
    const receipts = await Promise.all(txs.map((hash) => input.client.getTransactionReceipt({ hash: hash as Hex })));
    const gas = receipts.reduce((sum, r) => sum + Number(r.gasUsed), 0);
    const paidMs = input.answers.filter((a) => a.kind === 'paid').map((a) => a.ms).sort((x, y) => x - y);
    const count = (kind: Answer['kind']) => input.answers.filter((a) => a.kind === kind);
    const tally = (list: Answer[]) => list.reduce<Record<string, number>>((acc, a) => { const k = String(a.reason ?? a.status); acc[k] = (acc[k] ?? 0) + 1; return acc; }, {});
    return {
      payments: input.payments.length,
      answered: { paid: count('paid').length, refused: tally(count('refused')), httpErrors: tally(count('http_error')), noAnswer: count('no_answer').length },
      retried: {
        payments: input.answers.filter((a) => a.retries.length > 0).length,
        byAnswer: input.answers.flatMap((a) => a.retries).reduce<Record<string, number>>((acc, r) => { acc[r] = (acc[r] ?? 0) + 1; return acc; }, {}),
      },
      latency: { p50: paidMs[Math.floor(paidMs.length / 2)] ?? 0, p95: paidMs[Math.min(paidMs.length - 1, Math.floor(paidMs.length * 0.95))] ?? 0 },
      onChain: usedBy.size,
      records: { settled: records.filter((r) => r.status === 'settled').length, failed, open, duplicates },
      problems,
      transactions: txs.length,
      gasPerPayment: usedBy.size ? Math.round(gas / usedBy.size) : 0,
      webhooks: {
        delivered, duplicatesAtReceiver,
        byStatus: deliveries.reduce<Record<string, number>>((acc, d) => { acc[d.status] = (acc[d.status] ?? 0) + 1; return acc; }, {}),
        lastErrors: [...new Set(deliveries.map((d) => d.lastError).filter(Boolean))].slice(0, 3) as string[],
      },
    };
  } finally {
    await mongo.close();
  }
}

/** Waits until `check` holds or `timeoutMs` passes; returns whether it held. */
export async function eventually(check: () => Promise<boolean>, timeoutMs: number, everyMs = 500): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * Moves the base fee every block by up to about a quarter either way (a little past EIP-1559's 12.5%), as a
 * busy live chain does, around 1 gwei: a random walk in log space, kept between 0.1 and 10 gwei.
 */
export function moveBaseFee(rpcUrl: string, everyMs = 1_000): () => void {
  let stopped = false;
  const [floor, ceiling] = [100_000_000, 10_000_000_000];
  const tick = async () => {
    while (!stopped) {
      try {
        const block = await rpc(rpcUrl, 'eth_getBlockByNumber', ['latest', false]);
        const base = Number(BigInt(block.baseFeePerGas));
        const next = Math.min(ceiling, Math.max(floor, Math.floor(base * Math.exp((Math.random() - 0.5) * 0.5))));
        await rpc(rpcUrl, 'anvil_setNextBlockBaseFeePerGas', [toHex(BigInt(next))]);
      } catch {
        // the chain may be restarting; try again next tick
      }
      await new Promise((r) => setTimeout(r, everyMs));
    }
  };
  void tick();
  return () => { stopped = true; };
}
