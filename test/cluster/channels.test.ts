// Channel calls (`batch-settlement`) on a deployment as an operator runs one: 3 `agentgate serve` (1 of
// them given no relayer keys) and 1 `agentgate worker` on one database, a chain with 1 s blocks and a base
// fee that moves every block, a plain round-robin balancer that does not look at /ready, and two seller
// processes (our Express middleware) reaching the backend through it. Buyers pay with the official client,
// each call to either seller, at arbitrary moments, calling again after a refusal. Meanwhile every serve is
// restarted in turn, one is killed with SIGKILL and started again, and the database is restarted; the
// sweep claims on its schedule throughout. Then every channel's claimed total on chain must be exactly what
// its buyer was answered for: each answered call charged once, nothing charged that was not answered.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { createPublicClient, http, type Hex, type PublicClient } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { baseSepolia } from 'viem/chains';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from '@x402/core/http';
import { paymentMiddleware } from '../../adapters/express.js';
import { readChannelState } from '../../server/payments/schemes/batch-settlement/evm/chain.js';
import { DEV_BUYERS } from '../../server/dev/chain/dev-accounts.js';
import { Balancer, balancerProxy, clusterSellerAccount, eventually, moveBaseFee, registerClusterEndpoint, startCluster, type Cluster } from '../support/cluster.js';
import { clusterServices, type ClusterServices } from '../support/cluster-services.js';
import { officialChannelClient } from '../support/official-channel-client.js';

const BUYERS = 6;
/** A call's price, atomic USDC ($0.01, the registered endpoint's price). */
const PRICE = 10_000n;
/** A held call whose answer was lost keeps its channel busy this long (the route's holdSeconds). */
const HOLD_SECONDS = 10;

let services: ClusterServices;
let cluster: Cluster | undefined;
beforeAll(async () => { services = await clusterServices(); }, 20 * 60_000);
afterAll(async () => { await services?.stop(cluster); }, 5 * 60_000);

it('3 serve (1 without keys) + 1 worker, 1 s blocks, a plain round-robin balancer, two seller processes: every serve restarts in turn, one is killed, the database restarts; every channel claimed exactly what its buyer was answered for', async () => {
  const { chain, mongo } = services;
  const client = createPublicClient({ chain: { ...baseSepolia, rpcUrls: { default: { http: [chain.rpcUrl] } } }, transport: http(chain.rpcUrl), pollingInterval: 100 }) as PublicClient;
  cluster = await startCluster({
    mongoUri: mongo.uri, chain, serves: 2, keylessServes: 1, workers: 1, pool: [generatePrivateKey(), generatePrivateKey()],
    // The sweep claims every 3 s, so claims land while calls are paid and while processes come and go.
    env: { CHANNEL_SWEEP_EVERY_MS: '3000', RECONCILE_AFTER_MS: '15000', RECONCILE_EVERY_MS: '5000' },
  });
  const balancer = new Balancer(cluster.serves, { followReady: false });
  const backend = await balancerProxy(balancer);
  const stopFees = moveBaseFee(chain.rpcUrl);
  const shops: Server[] = [];
  const events: string[] = [];
  const failures: string[] = [];
  const note = (line: string) => { events.push(`${new Date().toISOString().slice(11, 23)} ${line}`); };
  try {
    const seller = await clusterSellerAccount(cluster.serves[0]!.url!);
    // Two seller processes, each its own middleware, both selling the endpoint registered at the first one's
    // URL, as two replicas behind one public origin do: each builds its resources from that origin.
    for (let i = 0; i < 2; i++) {
      const shop = createServer();
      await new Promise<void>((resolve) => shop.listen(0, '127.0.0.1', resolve));
      shops.push(shop);
    }
    const shopUrl = (i: number) => `http://127.0.0.1:${(shops[i % 2]!.address() as AddressInfo).port}/weather`;
    const publicOrigin = new URL(shopUrl(0)).origin;
    for (const [i, shop] of shops.entries()) {
      const app = express();
      app.use(paymentMiddleware({
        backendUrl: backend.url, apiKey: seller.sellerKey, publicOrigin, warn: (m) => note(`seller ${i + 1}: ${m}`),
        routes: { 'GET /weather': { price: '$0.01', scheme: 'batch-settlement', holdSeconds: HOLD_SECONDS, description: 'Weather, per call' } },
      }));
      app.get('/weather', (_req, res) => { res.json({ weather: 'sunny' }); });
      shop.on('request', app);
    }
    // The backend fetches the first seller's 402 ($0.01 on the cluster's network, to this seller) and registers it.
    await registerClusterEndpoint(cluster.serves[0]!.url!, seller, shopUrl(0));

    // Each buyer: the official client, deposits of 100 calls (it tops up as it goes), calls with a pause of up to 300 ms between them.
    let running = true;
    const answered = new Map<Hex, bigint>();
    const refusals = new Map<string, number>();
    const buyers = DEV_BUYERS.slice(0, BUYERS).map(async (b, n) => {
      const paying = officialChannelClient(privateKeyToAccount(b.privateKey), 100, { publicClient: client, usdc: chain.usdcAddress }).paying;
      for (let call = 0; running; call++) {
        await new Promise((r) => setTimeout(r, Math.random() * 300));
        const res = await paying(shopUrl(n + call)).catch((err: Error) => ({ status: 0, statusText: err.message, headers: new Headers() }) as Response);
        if (res.status === 200) {
          const { channelState } = decodePaymentResponseHeader(res.headers.get('payment-response')!).extra as { channelState: { channelId: Hex; chargedCumulativeAmount: string } };
          answered.set(channelState.channelId.toLowerCase() as Hex, (answered.get(channelState.channelId.toLowerCase() as Hex) ?? 0n) + PRICE);
          // What the seller's answer says the channel has charged: every call this buyer was answered for, no more.
          if (BigInt(channelState.chargedCumulativeAmount) !== answered.get(channelState.channelId.toLowerCase() as Hex)) failures.push(`buyer ${n + 1}: charged ${channelState.chargedCumulativeAmount} after ${answered.get(channelState.channelId.toLowerCase() as Hex)} answered`);
        } else {
          const required = res.status === 402 ? res.headers.get('payment-required') : null;
          const why = required ? `402 ${decodePaymentRequiredHeader(required).error ?? ''}` : String(res.status);
          refusals.set(why, (refusals.get(why) ?? 0) + 1);
          await new Promise((r) => setTimeout(r, 500));
        }
      }
    });

    // The events, one after the other, while the buyers pay.
    const paidSoFar = () => [...answered.values()].reduce((a, v) => a + v, 0n) / PRICE;
    await eventually(async () => paidSoFar() >= 60n, 120_000);
    try {
      for (const serve of [...cluster.serves]) {
        note(`${serve.name} restarting (${paidSoFar()} calls answered)`);
        await cluster.restart(serve);
        note(`${serve.name} restarted`);
      }
      const victim = cluster.serves[1]!;
      cluster.kill(victim);
      note(`${victim.name} killed with SIGKILL (${paidSoFar()} calls answered)`);
      await new Promise((r) => setTimeout(r, 2_000));
      await cluster.restart(victim);
      note(`${victim.name} started again`);
      note(`database: PostgreSQL stopped (${paidSoFar()} calls answered)`);
      await mongo.restartBackend!(4_000);
      note('database: PostgreSQL started again');
      // Calls go on after it until every buyer has been answered again.
      const after = new Map(answered);
      await eventually(async () => [...answered].length >= BUYERS && [...answered].every(([id, v]) => v > (after.get(id) ?? 0n)), 120_000);
    } catch (err) {
      failures.push(`event: ${(err as Error).message.split('\n')[0]}`);
    }
    running = false;
    await Promise.all(buyers);
    note(`load stopped: ${paidSoFar()} calls answered, refusals ${JSON.stringify(Object.fromEntries(refusals))}`);

    // Every answered call claimed by the sweep, exactly.
    const channels = [...answered.keys()];
    const claimedAll = await eventually(async () => {
      const states = await Promise.all(channels.map((id) => readChannelState(client as never, id)));
      return states.every((s, i) => s.totalClaimed === answered.get(channels[i]!));
    }, 180_000, 1_000);
    note(claimedAll ? 'every answered call claimed on chain' : 'claims still short of the answered calls after 180 s');
    const claimed = await Promise.all(channels.map(async (id) => [id, (await readChannelState(client as never, id)).totalClaimed, answered.get(id)] as const));
    // What the seller's records say: each channel's accepted total and its calls (a channel whose every call failed has none).
    const listed = await fetch(`${cluster.serves[0]!.url}/v0/payments/channels?limit=100`, { headers: { authorization: `Bearer ${seller.sellerKey}` } }).then((r) => r.json()) as { channels: Array<{ id: string; acceptedUsdcRaw: string; callCount: number }> };
    process.stdout.write(`\ncluster channels: ${BUYERS} buyers, two seller processes, 3 serve (1 without keys) + 1 worker, plain round-robin balancer, 1 s blocks\n`
      + `  events:\n${events.map((e) => `    ${e}`).join('\n')}\n`
      + `  channels (claimed on chain / answered):\n${claimed.map(([id, c, a]) => `    ${id.slice(0, 10)}… ${c} / ${a}`).join('\n')}\n`);

    expect(failures).toEqual([]);
    expect(claimedAll).toBe(true);
    expect(paidSoFar()).toBeGreaterThan(100n);
    expect(listed.channels.filter((c) => c.callCount > 0 || BigInt(c.acceptedUsdcRaw) > 0n).map((c) => [c.id, BigInt(c.acceptedUsdcRaw), BigInt(c.callCount) * PRICE]).sort()).toEqual(channels.map((id) => [id, answered.get(id), answered.get(id)]).sort());
  } finally {
    stopFees();
    balancer.stop();
    for (const shop of shops) { shop.closeAllConnections(); shop.close(); }
    await backend.close();
  }
}, 900_000);
