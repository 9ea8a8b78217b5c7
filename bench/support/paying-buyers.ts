/**
 * The load generator of bench/channels.ts: buyers paying with the official x402 client (`@x402/fetch`'s
 * wrapFetchWithPayment, with the `batch-settlement` or the `exact` client scheme of `@x402/evm`), each
 * buyer one call at a time (a channel takes one call at a time, on either stack). It runs in a worker
 * thread of its own, so the buyers' signing and HTTP clients do not share an event loop with the sellers
 * they measure; the same code drives both stacks.
 *
 * A run is a closed loop of `concurrency` buyers for `warmMs + windowMs`; only the calls that end inside
 * the window count, so neither the ramp-up nor the drain of the loop is in the figures.
 */
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';
import { x402Client } from '@x402/core/client';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { toClientEvmSigner } from '@x402/evm';
import { BatchSettlementEvmScheme as ChannelClientScheme, InMemoryClientChannelStorage } from '@x402/evm/batch-settlement/client';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import { ExactSvmScheme } from '@x402/svm/exact/client';
import { createKeyPairSignerFromPrivateKeyBytes } from '@solana/kit';
import { createPublicClient, http, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';

export interface BuyersOptions {
  /** The paid route. */
  url: string;
  /** exact-svm: `exact` on Solana (`@x402/svm`'s client), each key a 32-byte Ed25519 seed (hex). */
  scheme: 'batch-settlement' | 'exact' | 'exact-svm';
  keys: Hex[];
  rpcUrl: string;
  network: string;
  usdc: Address;
  /** A channel's deposit is this many calls' price (the client's depositMultiplier). */
  depositCalls?: number;
}

export interface RunResult {
  concurrency: number;
  /** Paid calls (200) that ended in the window, per second of window. */
  perSecond: number;
  paid: number;
  /** Paid calls over the whole run (ramp-up and drain included): what the seller's side did for the run. */
  paidInRun: number;
  /** A whole call as the buyer sees it: the 402, the voucher signed, the paid request. Milliseconds. */
  call: { p50: number; p99: number };
  /** The paid request alone (the one carrying PAYMENT-SIGNATURE): what the seller spends on a voucher. */
  paidRequest: { p50: number; p99: number };
  /** The unpaid request that the seller answers 402 (the call's first): the middleware's challenge, as the buyer sees it. */
  challenge: { p50: number; p99: number };
  failed: number;
  failures: Record<string, number>;
}

type Request = { op: 'pay-each'; calls: number } | { op: 'run'; concurrency: number; warmMs: number; windowMs: number } | { op: 'stop' };
type Message = Request & { id: number };

/** Starts the buyers in a worker thread; `payEach` makes each buyer's calls (the first deposits), `run` measures. */
export function startBuyers(options: BuyersOptions) {
  const worker = new Worker(new URL('./ts-worker.mjs', import.meta.url), { workerData: { entry: import.meta.url, role: 'paying-buyers', options } });
  let next = 0;
  const waiting = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void }>();
  worker.on('message', (m: { id: number; result?: unknown; error?: string }) => {
    const w = waiting.get(m.id);
    waiting.delete(m.id);
    if (m.error !== undefined) w?.reject(new Error(m.error));
    else w?.resolve(m.result);
  });
  worker.on('error', (err) => { for (const w of waiting.values()) w.reject(err); waiting.clear(); });
  const ask = <T>(message: Request): Promise<T> => new Promise((resolve, reject) => {
    const id = ++next;
    waiting.set(id, { resolve, reject });
    worker.postMessage({ ...message, id });
  });
  return {
    /** Each buyer makes `calls` paid calls one after another (its first one deposits, for a channel), all buyers at once. */
    payEach: (calls: number) => ask<{ paid: number; failed: number; failures: Record<string, number> }>({ op: 'pay-each', calls }),
    run: (concurrency: number, warmMs: number, windowMs: number) => ask<RunResult>({ op: 'run', concurrency, warmMs, windowMs }),
    async stop() { await worker.terminate(); },
  };
}

// --- inside the worker -------------------------------------------------------------------------------

function buyer(options: BuyersOptions, key: Hex) {
  const publicClient = createPublicClient({ transport: http(options.rpcUrl) });
  const client = new x402Client().setSpendControls({ allowedAssets: [{ network: options.network as `${string}:${string}`, asset: options.usdc, maxAmountPerPayment: '1000000' }] });
  if (options.scheme === 'exact-svm') {
    // The signer is made asynchronously: the scheme (with its mint cache) once, on the first payment.
    const scheme = createKeyPairSignerFromPrivateKeyBytes(Buffer.from(key.slice(2), 'hex')).then((signer) => new ExactSvmScheme(signer, { rpcUrl: options.rpcUrl }));
    client.register(options.network as `${string}:${string}`, { scheme: 'exact', createPaymentPayload: async (version: number, requirements: never) => (await scheme).createPaymentPayload(version, requirements) } as never);
  } else if (options.scheme === 'batch-settlement') {
    const account = privateKeyToAccount(key);
    const scheme = new ChannelClientScheme(toClientEvmSigner(account, publicClient as never), { depositPolicy: { depositMultiplier: options.depositCalls ?? 20_000 }, storage: new InMemoryClientChannelStorage() });
    client.register(options.network as `${string}:${string}`, scheme);
  } else {
    registerExactEvmScheme(client, { signer: privateKeyToAccount(key) });
  }
  let paidMs = 0;
  let challengeMs = 0;
  // The requests timed from under the client, body read: the paid one (it carries the payment) and the
  // unpaid one answered 402.
  const timed: typeof fetch = async (input, init) => {
    const request = input instanceof Request ? input : new Request(input, init);
    const paying = request.headers.has('payment-signature');
    const t0 = performance.now();
    const res = await fetch(request);
    const body = await res.arrayBuffer();
    if (paying) paidMs = performance.now() - t0;
    else if (res.status === 402) challengeMs = performance.now() - t0;
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
  const paying = wrapFetchWithPayment(timed, client);
  return {
    async call(): Promise<{ ok: boolean; ms: number; paidMs: number; challengeMs: number; failure?: string }> {
      paidMs = 0;
      challengeMs = 0;
      const t0 = performance.now();
      try {
        const res = await paying(options.url);
        await res.arrayBuffer();
        const ms = performance.now() - t0;
        if (res.status === 200) return { ok: true, ms, paidMs, challengeMs };
        const required = res.headers.get('payment-required');
        let reason = '';
        try { reason = required ? String(decodePaymentRequiredHeader(required).error) : ''; } catch { /* not a 402's header */ }
        return { ok: false, ms, paidMs, challengeMs, failure: `${res.status} ${reason}`.trim() };
      } catch (err) {
        return { ok: false, ms: performance.now() - t0, paidMs, challengeMs, failure: (err as Error).message.slice(0, 160) };
      }
    },
  };
}

const percentile = (sorted: number[], p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]! : NaN);

if (!isMainThread && (workerData as { role?: string } | undefined)?.role === 'paying-buyers') {
  const options = (workerData as { options: BuyersOptions }).options;
  const buyers = options.keys.map((key) => buyer(options, key));
  parentPort!.on('message', async (m: Message) => {
    try {
      if (m.op === 'stop') process.exit(0);
      if (m.op === 'pay-each') {
        const failures: Record<string, number> = {};
        let paid = 0;
        await Promise.all(buyers.map(async (b) => {
          for (let i = 0; i < m.calls; i++) {
            const r = await b.call();
            if (r.ok) paid++;
            else failures[r.failure!] = (failures[r.failure!] ?? 0) + 1;
          }
        }));
        parentPort!.postMessage({ id: m.id, result: { paid, failed: Object.values(failures).reduce((a, b) => a + b, 0), failures } });
        return;
      }
      if (m.concurrency > buyers.length) throw new Error(`concurrency ${m.concurrency} needs as many buyers (there are ${buyers.length})`);
      const start = performance.now();
      const [from, to] = [start + m.warmMs, start + m.warmMs + m.windowMs];
      const calls: Array<{ end: number; ok: boolean; ms: number; paidMs: number; challengeMs: number; failure?: string }> = [];
      await Promise.all(buyers.slice(0, m.concurrency).map(async (b) => {
        while (performance.now() < to) {
          const r = await b.call();
          calls.push({ ...r, end: performance.now() });
        }
      }));
      const inWindow = calls.filter((c) => c.end >= from && c.end < to);
      const ok = inWindow.filter((c) => c.ok);
      const failures: Record<string, number> = {};
      for (const c of inWindow) if (!c.ok) failures[c.failure!] = (failures[c.failure!] ?? 0) + 1;
      const callMs = ok.map((c) => c.ms).sort((a, b) => a - b);
      const paidMs = ok.map((c) => c.paidMs).sort((a, b) => a - b);
      const challengeMs = ok.map((c) => c.challengeMs).sort((a, b) => a - b);
      const result: RunResult = {
        concurrency: m.concurrency, perSecond: ok.length / (m.windowMs / 1000), paid: ok.length, paidInRun: calls.filter((c) => c.ok).length,
        call: { p50: percentile(callMs, 0.5), p99: percentile(callMs, 0.99) },
        paidRequest: { p50: percentile(paidMs, 0.5), p99: percentile(paidMs, 0.99) },
        challenge: { p50: percentile(challengeMs, 0.5), p99: percentile(challengeMs, 0.99) },
        failed: inWindow.length - ok.length, failures,
      };
      parentPort!.postMessage({ id: m.id, result });
    } catch (err) {
      parentPort!.postMessage({ id: m.id, error: (err as Error).stack ?? String(err) });
    }
  });
}
