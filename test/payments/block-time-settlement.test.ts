// Settlement on a chain that mines on a timer (anvil --block-time 1, as Base mines every 2 s), with what
// a live chain does to a relayer: requests that arrive during a block share one transaction, a
// transaction replaced by another sender is noticed at the next blocks and its payments sent again, a
// fee spike that strands a transaction is answered with a fee bump, and processes share one relayer
// account through its lease.
import { toHex, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { DEV_BUYERS } from '../../server/dev/chain/dev-accounts.js';
import { paymentHeaderV1, signAuthorization } from '../support/chain.js';
import { redeem, setUpSeller, type TestSeller } from '../support/payments.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { counterValue, useBlockTimeChain, watchBlocks } from '../support/block-time-chain.js';

const chainUnderTest = useBlockTimeChain();
const { rpc, balanceOf } = chainUnderTest;

/** A backend settling on the block-time chain from `relayerKey` (fresh and funded unless given). */
async function serverOnChain(overrides: Record<string, string> = {}, relayerKey: Hex = generatePrivateKey()): Promise<TestServer & { relayerKey: Hex }> {
  await chainUnderTest.fundGas(relayerKey);
  const chain = chainUnderTest.chain;
  const server = await startTestServer({
    TRUST_PROXY: 'true', CHAIN_RPC_URL: chain.rpcUrl, USDC_ADDRESS: chain.usdcAddress, WALLET_FACTORY_ADDRESS: chain.factoryAddress,
    RELAYER_PRIVATE_KEY: relayerKey, RELAYER_LEASE_TTL_MS: '3000', ...overrides,
  });
  return Object.assign(server, { relayerKey });
}

const buyers: PrivateKeyAccount[] = DEV_BUYERS.slice(0, 4).map((b) => privateKeyToAccount(b.privateKey));
let next = 0;
/** A signed payment for the seller, from one of the funded dev buyers (a buyer signs any number: nonces are random). */
async function payment(seller: TestSeller): Promise<{ header: string; payer: Address }> {
  const buyer = buyers[next++ % buyers.length]!;
  const signed = await signAuthorization(buyer, { to: seller.payTo, value: 10_000n }, { verifyingContract: chainUnderTest.chain.usdcAddress });
  return { header: paymentHeaderV1(signed), payer: buyer.address };
}

describe('one process on a 1 s chain', () => {
  let server: Awaited<ReturnType<typeof serverOnChain>>;
  let seller: TestSeller;
  beforeAll(async () => {
    server = await serverOnChain({ SETTLEMENT_STUCK_BLOCKS: '2' });
    seller = await setUpSeller(server);
    // A process learns the chain's cadence from block timestamps and its phase from the first block it
    // sees arrive (within a block of starting); until then it sends at once (block-clock-start.test.ts).
    const clock = server.app.settlement!.clock;
    const deadline = Date.now() + 20_000;
    while (clock.nextBlockAt() === undefined && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  }, 60_000);
  afterAll(async () => { await server?.close(); });

  it('payments that arrive during a block share its transaction (a main batch and at most one late one per block), and all settle', async () => {
    const payments = await Promise.all(Array.from({ length: 24 }, () => payment(seller)));
    const before = await balanceOf(seller.payTo);
    const watch = await watchBlocks(chainUnderTest.chain.rpcUrl);
    const results = await Promise.all(payments.map((p) => redeem(server.url, seller, p.header)));
    const sightings = await watch.stop();
    expect(results.map((r) => r.status)).toEqual(payments.map(() => 200));
    const hashes = [...new Set(results.map((r) => r.body.paymentResponse.transaction as Hex))];
    const blocks = await Promise.all(hashes.map(async (hash) => BigInt((await rpc('eth_getTransactionReceipt', [hash])).blockNumber)));
    const perBlock = new Map<bigint, number>();
    for (const block of blocks) perBlock.set(block, (perBlock.get(block) ?? 0) + 1);
    // A main batch and at most one late one per block. A block the chain produced late (anvil's timer
    // slips on a loaded machine; its whole-second timestamps hide it) also takes the batches sent for the
    // blocks due before it came: the main batch of each block due `SETTLEMENT_SEND_MARGIN_MS` (250) or
    // more before it, and that block's late batch.
    const overfull = [...perBlock].flatMap(([block, count]): object[] => {
      const [previous, own] = [sightings.get(block - 1n), sightings.get(block)];
      if (!previous || !own) return [{ block, count, unwatched: true }];
      const longestGap = own.by - previous.notBefore;
      const blocksDue = Math.max(1, Math.ceil((longestGap + 250) / 1000) - 1);
      return count > 2 * blocksDue ? [{ block, count, longestGap, blocksDue }] : [];
    });
    expect(overfull).toEqual([]);
    expect(hashes.length).toBeLessThan(24 / 3);
    expect(await balanceOf(seller.payTo)).toBe(before + 24n * 10_000n);
    // The chain had a cadence to plan for: the clock found it.
    expect(server.app.settlement!.clock.intervalMs).toBeGreaterThan(700);
  });

  it('a settlement transaction replaced by another sender with the same nonce is noticed, and its payment sent again', async () => {
    const relayer = privateKeyToAccount(server.relayerKey);
    const settler = server.app.settlement!.settler;
    let replaced: Hex | undefined;
    const hook = async (txHash: Hex) => {
      if (replaced) return;
      replaced = txHash;
      // Another process with the same key, as when processes shared a key without leases: same nonce, higher fee.
      const ours = await rpc('eth_getTransactionByHash', [txHash]);
      const raw = await relayer.signTransaction({
        type: 'eip1559', chainId: chainUnderTest.chain.chainId, to: relayer.address, value: 0n, gas: 21_000n, nonce: Number(BigInt(ours.nonce)),
        maxFeePerGas: BigInt(ours.maxFeePerGas) * 3n, maxPriorityFeePerGas: BigInt(ours.maxPriorityFeePerGas) * 3n + 1n,
      });
      await rpc('eth_sendRawTransaction', [raw]);
    };
    settler.onSubmitted.push(hook);
    try {
      const p = await payment(seller);
      const before = await balanceOf(seller.payTo);
      const result = await redeem(server.url, seller, p.header);
      expect(result.status).toBe(200);
      expect(result.body.paymentResponse.transaction).not.toBe(replaced);
      expect(await balanceOf(seller.payTo)).toBe(before + 10_000n);
      // The replaced transaction was never mined; the one recorded was.
      expect(await rpc('eth_getTransactionReceipt', [replaced])).toBeNull();
      const receipt = await rpc('eth_getTransactionReceipt', [result.body.paymentResponse.transaction]);
      expect(receipt.status).toBe('0x1');
      expect(await counterValue(server.app.metrics, 'agentgate_settlement_transactions_total', { event: 'replaced' })).toBeGreaterThanOrEqual(1);
    } finally {
      settler.onSubmitted.splice(settler.onSubmitted.indexOf(hook), 1);
    }
  }, 60_000);

  it('a fee spike that strands a transaction under the base fee is answered with a fee bump, and the payment settles', async () => {
    const settler = server.app.settlement!.settler;
    let stranded: { hash: Hex; maxFeePerGas: bigint } | undefined;
    const hook = async (txHash: Hex) => {
      if (stranded) return;
      const ours = await rpc('eth_getTransactionByHash', [txHash]);
      stranded = { hash: txHash, maxFeePerGas: BigInt(ours.maxFeePerGas) };
      // The next block's base fee jumps far above what our transaction offers.
      await rpc('anvil_setNextBlockBaseFeePerGas', [toHex(stranded.maxFeePerGas * 20n)]);
    };
    settler.onSubmitted.push(hook);
    try {
      const bumpsBefore = await counterValue(server.app.metrics, 'agentgate_settlement_transactions_total', { event: 'fee_bumped' });
      const p = await payment(seller);
      const result = await redeem(server.url, seller, p.header);
      expect(result.status).toBe(200);
      const mined = result.body.paymentResponse.transaction as Hex;
      expect(mined).not.toBe(stranded!.hash);
      const receipt = await rpc('eth_getTransactionReceipt', [mined]);
      expect(BigInt(receipt.effectiveGasPrice)).toBeGreaterThan(stranded!.maxFeePerGas);
      expect(await counterValue(server.app.metrics, 'agentgate_settlement_transactions_total', { event: 'fee_bumped' })).toBeGreaterThan(bumpsBefore);
      // Same nonce, so the stranded one can never be mined as well.
      expect(await rpc('eth_getTransactionReceipt', [stranded!.hash])).toBeNull();
    } finally {
      settler.onSubmitted.splice(settler.onSubmitted.indexOf(hook), 1);
    }
  }, 60_000);
});

describe('processes sharing one relayer account', () => {
  it('one holds the lease and settles; the other hands its payments to it (ready, no refusal) and takes over when the first stops', async () => {
    const first = await serverOnChain();
    const second = await serverOnChain({ MONGODB_DB: first.config.MONGODB_DB }, first.relayerKey);
    try {
      const seller = await setUpSeller(first);
      const a = await payment(seller);
      expect((await redeem(first.url, seller, a.header)).status).toBe(200);
      expect(first.app.settlement!.pool.status().active).toHaveLength(1);
      expect(second.app.settlement!.pool.status().active).toHaveLength(0);

      // The second holds no lane: it accepts the payment and hands it to the first's lane through its inbox.
      const routedBefore = await counterValue(second.app.metrics, 'agentgate_settlement_routed_total', { route: 'remote' });
      const before = await balanceOf(seller.payTo);
      const through = await redeem(second.url, seller, (await payment(seller)).header);
      expect(through.status).toBe(200);
      expect(await balanceOf(seller.payTo)).toBe(before + 10_000n);
      expect(await counterValue(second.app.metrics, 'agentgate_settlement_routed_total', { route: 'remote' })).toBe(routedBefore + 1);
      expect(await counterValue(first.app.metrics, 'agentgate_settlement_inbox_items_total', {})).toBeGreaterThanOrEqual(1);
      // Ready: a balancer may send it payments; /ready says what it does and who sends.
      const ready = await second.request('GET', '/ready');
      expect(ready.status).toBe(200);
      expect(ready.body).toMatchObject({ status: 'ready', checks: { relayer: 'ok', database: 'ok', chain: 'ok' }, settlement: { accepts: true, sends: [] } });
      expect(ready.body.settlement.lanes).toEqual([expect.objectContaining({ address: privateKeyToAccount(first.relayerKey).address.toLowerCase(), state: 'active' })]);

      // The first process stops (gracefully: its lease is handed back); the second takes the account over
      // and continues its nonce sequence from the chain.
      await first.stop();
      const deadline = Date.now() + 15_000;
      while (!second.app.settlement!.settler.available() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      expect(second.app.settlement!.settler.available()).toBe(true);
      const after = await Promise.all([payment(seller), payment(seller)]);
      const results = await Promise.all(after.map((p) => redeem(second.url, seller, p.header)));
      expect(results.map((r) => r.status)).toEqual([200, 200]);
      expect((await second.request('GET', '/ready')).body.status).toBe('ready');
    } finally {
      await first.stop().catch(() => {});
      await second.close();
    }
  }, 90_000);

  it('a pool of two keys given to two processes: each takes one, and a leaving process hands its key to the other', async () => {
    const keys = [generatePrivateKey(), generatePrivateKey()] as const;
    await chainUnderTest.fundGas(keys[1]);
    const first = await serverOnChain({ RELAYER_PRIVATE_KEYS: keys[1] }, keys[0]);
    const second = await serverOnChain({ MONGODB_DB: first.config.MONGODB_DB, RELAYER_PRIVATE_KEYS: keys[1] }, keys[0]);
    try {
      // The first process took both while it was alone; it hands one over once it sees the second.
      const deadline = Date.now() + 20_000;
      const held = () => [first, second].map((s) => s.app.settlement!.pool.status().active.length);
      while (held().join() !== '1,1' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      expect(held()).toEqual([1, 1]);
      const [a, b] = held().map((_, i) => [first, second][i]!.app.settlement!.pool.status().active[0]);
      expect(a).not.toBe(b);

      await second.stop();
      const until = Date.now() + 20_000;
      while (first.app.settlement!.pool.status().active.length < 2 && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
      expect(first.app.settlement!.pool.status().active).toHaveLength(2);
    } finally {
      await second.stop().catch(() => {});
      await first.close();
    }
  }, 90_000);
});


describe('a process stopping while a paid request waits for its block', () => {
  it('answers it pending after the stop grace, not after the settlement timeout; the settlement goes on, recorded by the process that stayed', async () => {
    // Drains and reconciliation short: the stopping process does not wait for blocks that never come.
    const quick = { RELAYER_DRAIN_MS: '1000', RECONCILE_AFTER_MS: '3000', RECONCILE_EVERY_MS: '1000', SETTLEMENT_TIMEOUT_MS: '60000' };
    const first = await serverOnChain(quick);
    const second = await serverOnChain({ ...quick, MONGODB_DB: first.config.MONGODB_DB }, first.relayerKey);
    let mining = true;
    try {
      const seller = await setUpSeller(first);
      const paid = await payment(seller);
      const before = await balanceOf(seller.payTo);
      // No block comes: the request waits for one.
      await rpc('evm_setIntervalMining', [0]);
      mining = false;
      const answer = redeem(first.url, seller, paid.header);
      await new Promise((r) => setTimeout(r, 1_500));
      const stopStarted = Date.now();
      const stopping = first.stop();
      const pending = await answer;
      const answeredAfter = Date.now() - stopStarted;
      expect(pending.body).toMatchObject({ error: 'settle_unconfirmed', message: expect.stringContaining('restarting') });
      // Answered after the grace (four of the chain's 1 s blocks, 4 s), well before the 60 s settlement timeout.
      expect(answeredAfter).toBeGreaterThanOrEqual(3_500);
      expect(answeredAfter).toBeLessThan(20_000);
      await rpc('evm_setIntervalMining', [1]);
      mining = true;
      await stopping;
      // The settlement went on: the seller's record of it is settled (written by the process that stayed),
      // and the money moved once.
      let record: any;
      for (const until = Date.now() + 45_000; Date.now() < until; await new Promise((r) => setTimeout(r, 500))) {
        const list = await second.request('GET', '/v0/payments', { key: seller.platformKey });
        record = list.body.payments.find((p: any) => p.payerAddress === paid.payer);
        if (record?.status === 'settled') break;
      }
      expect(record).toMatchObject({ status: 'settled', txHash: expect.stringMatching(/^0x[0-9a-f]{64}$/) });
      expect(await balanceOf(seller.payTo)).toBe(before + 10_000n);
    } finally {
      if (!mining) await rpc('evm_setIntervalMining', [1]).catch(() => {});
      await first.stop().catch(() => {});
      await second.close();
    }
  }, 120_000);
});

describe('SETTLEMENT_CONFIRMATIONS', () => {
  let server: Awaited<ReturnType<typeof serverOnChain>>;
  let seller: TestSeller;
  beforeAll(async () => {
    server = await serverOnChain({ SETTLEMENT_CONFIRMATIONS: '3' });
    seller = await setUpSeller(server);
  }, 60_000);
  afterAll(async () => { await server?.close(); });

  it('a payment is answered settled only once its block has two more on top, and is recorded so', async () => {
    const p = await payment(seller);
    const res = await redeem(server.url, seller, p.header);
    const answeredAt = BigInt(await rpc('eth_blockNumber', []));
    expect(res.status).toBe(200);
    const receipt = await rpc('eth_getTransactionReceipt', [res.body.paymentResponse.transaction]);
    expect(answeredAt - BigInt(receipt.blockNumber)).toBeGreaterThanOrEqual(2n);
    const record = await server.request('GET', `/v0/payments/${res.body.paymentId}`, { key: seller.platformKey });
    expect(record.body).toMatchObject({ status: 'settled', txHash: res.body.paymentResponse.transaction });
  });
});
