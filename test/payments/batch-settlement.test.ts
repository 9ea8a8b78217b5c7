// Settlement with batching on: several redemptions waiting for a relayer go out as one Multicall3
// transaction, a bad authorization inside a batch fails alone, copies of one header settle once, a crash
// between sending a batch and recording it is reconciled from the chain, and two server processes on one
// database never settle one authorization twice.
import { parseEventLogs, type Hex } from 'viem';
import { startTestServer, type TestServer } from '../support/server.js';
import { redeem, setUpSeller, type TestSeller } from '../support/payments.js';
import { fundedBuyer, paymentHeaderV1, setEthBalance, signAuthorization, testChain, usdcBalance } from '../support/chain.js';
import { reconcilePayments } from '../../server/payments/reconcile.js';
import { usdcAbi } from '../../server/chain/usdc.js';
import { MULTICALL3_ADDRESS } from '../../server/dev/chain/deploy.js';

const PRICE = 10_000n;
type Seller = TestSeller;

/** A backend whose single relayer keeps one transaction in flight, so whatever arrives meanwhile is batched. */
const batchingServer = (overrides: Record<string, string> = {}) =>
  startTestServer({ TRUST_PROXY: 'true', SETTLEMENT_PIPELINE_DEPTH: '1', SETTLEMENT_BATCH_MAX: '50', ...overrides });

async function header(seller: Seller, buyerUsdc = '1') {
  const buyer = await fundedBuyer(buyerUsdc);
  return { buyer, header: paymentHeaderV1(await signAuthorization(buyer, { to: seller.payTo, value: PRICE })) };
}

/** POST /v0/payments/holds and /holds/:id/capture, as the seller's middleware does around its handler. */
async function hold(url: string, seller: Seller, paymentHeader: string) {
  const res = await fetch(`${url}/v0/payments/holds`, {
    method: 'POST', headers: { authorization: `Bearer ${seller.sellerKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ paymentHeader, resource: seller.resource, amount: '0.01' }),
  });
  return { status: res.status, body: await res.json() as any };
}
async function capture(url: string, seller: Seller, holdId: string, signal?: AbortSignal) {
  const res = await fetch(`${url}/v0/payments/holds/${holdId}/capture`, { method: 'POST', signal, headers: { authorization: `Bearer ${seller.sellerKey}` } });
  return { status: res.status, body: await res.json() as any };
}

/** Grouped commands of one kind so far, and the writes they carried (agentgate_db_group_commit_size). */
async function groupCommits(server: TestServer, write: string) {
  const metric = await server.app.metrics.groupCommitSize.get();
  const value = (name: string) => metric.values.find((v) => v.metricName === name && v.labels.write === write)?.value ?? 0;
  return { commands: value('agentgate_db_group_commit_size_count'), writes: value('agentgate_db_group_commit_size_sum') };
}

/** Waits for `condition`; a test whose awaited moment never comes fails saying which, not at jest's timeout. */
const until = async (condition: () => boolean, what = condition.toString()) => {
  for (const deadline = Date.now() + 30_000; !condition();) {
    if (Date.now() > deadline) throw new Error(`still waiting after 30 s for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
};

/**
 * Holds the first transaction the server submits until `n` more requests are waiting, so those go out
 * together; resolves once that first transaction is being held.
 */
function holdFirstSubmissionUntilWaiting(server: TestServer, n: number): Promise<void> {
  const settler = server.app.settlement!.settler;
  let first = true;
  return new Promise((holding) => {
    settler.onSubmitted.push(async () => {
      if (!first) return;
      first = false;
      holding();
      await until(() => settler.waiting >= n);
    });
  });
}

const transfersIn = async (txHash: Hex) => {
  const receipt = await testChain().publicClient.getTransactionReceipt({ hash: txHash });
  return { to: receipt.to, used: parseEventLogs({ abi: usdcAbi, logs: receipt.logs, eventName: 'AuthorizationUsed' }).length };
};

describe('batched settlement', () => {
  let server: TestServer;
  let seller: Seller;
  beforeAll(async () => {
    server = await batchingServer();
    seller = await setUpSeller(server);
  });
  afterAll(async () => { await server.close(); });

  it('settles waiting redemptions in one Multicall3 transaction; a bad authorization fails alone with its reason', async () => {
    const held = holdFirstSubmissionUntilWaiting(server, 3);
    const lead = await header(seller);
    // Two payments from a buyer who can afford only one: each verifies alone, the second fails on chain.
    const poor = await fundedBuyer('0.015');
    const [a, b] = [await signAuthorization(poor, { to: seller.payTo, value: PRICE }), await signAuthorization(poor, { to: seller.payTo, value: PRICE })];
    const good = await header(seller);
    const before = await usdcBalance(seller.payTo);

    const first = redeem(server.url, seller, lead.header);
    await held; // the lead went out alone and is held until the three below wait
    const [ra, rb, rgood] = await Promise.all([redeem(server.url, seller, paymentHeaderV1(a)), redeem(server.url, seller, paymentHeaderV1(b)), redeem(server.url, seller, good.header)]);
    expect((await first).status).toBe(200);

    const outcomes = [ra, rb].map((r) => r.status).sort();
    expect(outcomes).toEqual([200, 402]);
    const refused = ra.status === 402 ? ra : rb;
    expect(refused.body.error).toBe('insufficient_funds');
    expect(rgood.status).toBe(200);

    // The three waiting redemptions shared one transaction through Multicall3, which moved two transfers.
    const settledTx = (ra.status === 200 ? ra : rb).body.paymentResponse.transaction as Hex;
    expect(rgood.body.paymentResponse.transaction).toBe(settledTx);
    expect(await transfersIn(settledTx)).toEqual({ to: MULTICALL3_ADDRESS.toLowerCase(), used: 2 });
    expect(await usdcBalance(seller.payTo)).toBe(before + 3n * PRICE);

    // Each payment's record, receipt and failure are its own.
    const list = await fetch(`${server.url}/v0/payments?limit=10`, { headers: { authorization: `Bearer ${seller.platformKey}` } }).then((r) => r.json() as any);
    const failed = list.payments.filter((p: any) => p.status === 'failed');
    expect(failed).toHaveLength(1);
    expect(failed[0].failureReason).toBe('insufficient_funds');
    const settled = list.payments.filter((p: any) => p.status === 'settled' && p.txHash === settledTx);
    expect(settled).toHaveLength(2);
    for (const p of settled) {
      const detail = await fetch(`${server.url}/v0/payments/${p.id}`, { headers: { authorization: `Bearer ${seller.platformKey}` } }).then((r) => r.json() as any);
      expect(detail.signedReceipt.body).toMatchObject({ paymentId: p.id, txHash: settledTx });
    }
  });

  it('settles 100 concurrent copies of one header once, though their claims share insertMany commands', async () => {
    const { header: h, buyer } = await header(seller);
    const before = await usdcBalance(seller.payTo);
    const claimCommands = await groupCommits(server, 'payment_claims');
    const results = await Promise.all(Array.from({ length: 100 }, () => redeem(server.url, seller, h)));
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    expect(results.filter((r) => r.status === 402 && r.body.error === 'nonce_already_used')).toHaveLength(99);
    expect(await usdcBalance(seller.payTo)).toBe(before + PRICE);
    expect(await usdcBalance(buyer.address)).toBe(1_000_000n - PRICE);
    // Copies that passed verification together reached the claim together: fewer insertMany commands than
    // claims, so duplicates inside one command were refused there, each alone.
    const after = await groupCommits(server, 'payment_claims');
    expect(after.writes - claimCommands.writes).toBeGreaterThan(1);
    expect(after.commands - claimCommands.commands).toBeLessThan(after.writes - claimCommands.writes);
    expect(await server.app.payments.records.payments.countDocuments({ authorizationKey: new RegExp(buyer.address.slice(2), 'i') })).toBe(1);
  });

  it('held payments claimed together and captured together: each duplicate refused, each capture settles once, copies of a capture answer alike', async () => {
    const payments = await Promise.all([0, 1, 2, 3, 4, 5].map(() => header(seller)));
    const before = await usdcBalance(seller.payTo);
    const decisionCommands = await groupCommits(server, 'hold_decisions');
    // Every header twice, at once: one hold each, the copy refused.
    const holds = await Promise.all(payments.flatMap((p) => [hold(server.url, seller, p.header), hold(server.url, seller, p.header)]));
    expect(holds.filter((r) => r.status === 201)).toHaveLength(6);
    expect(holds.filter((r) => r.status === 402 && r.body.error === 'nonce_already_used')).toHaveLength(6);
    const ids = holds.filter((r) => r.status === 201).map((r) => r.body.holdId as string);
    // Every hold captured twice, at once: one settlement each, both calls answer the same transaction.
    const captures = await Promise.all(ids.flatMap((id) => [capture(server.url, seller, id), capture(server.url, seller, id)]));
    expect(captures.map((r) => r.status)).toEqual(Array(12).fill(200));
    for (let i = 0; i < ids.length; i++) expect(captures[2 * i]!.body.paymentResponse.transaction).toBe(captures[2 * i + 1]!.body.paymentResponse.transaction);
    expect(await usdcBalance(seller.payTo)).toBe(before + 6n * PRICE);
    for (const p of payments) expect(await usdcBalance(p.buyer.address)).toBe(1_000_000n - PRICE);
    await server.app.payments.records.recordsWritten();
    const records = await server.app.payments.records.payments.find({ _id: { $in: ids } }).lean();
    expect(records.map((r) => r.status)).toEqual(Array(6).fill('settled'));
    expect(records.every((r) => r.signedReceipt && r.holdExpiresAt === undefined)).toBe(true);
    // Each capture inserted a decision (a copy that came after the settlement read it settled instead), in
    // fewer commands than decisions.
    const after = await groupCommits(server, 'hold_decisions');
    expect(after.writes - decisionCommands.writes).toBeGreaterThanOrEqual(6);
    expect(after.commands - decisionCommands.commands).toBeLessThan(after.writes - decisionCommands.writes);
  });
});

it('reconciles a batch sent by a process that died before recording it: nothing lost, nothing charged twice', async () => {
  const dying = await batchingServer();
  const seller = await setUpSeller(dying);
  const settler = dying.app.settlement!.settler;
  // The process "dies" right after the node accepts its second transaction (the batch): nothing after
  // the submission runs, so no record is written, as with a SIGKILL at that point.
  let submissions = 0;
  let leadHeld = false;
  let batchHash: Hex | undefined;
  settler.onSubmitted.push(async (txHash) => {
    submissions++;
    if (submissions === 1) { leadHeld = true; await until(() => settler.waiting >= 3); return; }
    batchHash = txHash;
    await new Promise(() => {}); // never returns
  });
  const payments = await Promise.all([0, 1, 2, 3].map(() => header(seller)));
  const before = await usdcBalance(seller.payTo);
  const abort = new AbortController();
  const lead = redeem(dying.url, seller, payments[0]!.header, abort);
  await until(() => leadHeld);
  const rest = payments.slice(1).map((p) => redeem(dying.url, seller, p.header, abort).catch(() => undefined));
  expect((await lead).status).toBe(200);
  await until(() => batchHash !== undefined);
  abort.abort();
  await Promise.all(rest);
  const db = dying.config.MONGODB_DB;
  await dying.app.close().catch(() => {}); // the dead process's connections go away; its data stays
  dying.http.closeAllConnections();
  dying.http.close();

  // The money moved in the batch, but the three records are still open.
  expect(await usdcBalance(seller.payTo)).toBe(before + 4n * PRICE);
  expect((await transfersIn(batchHash!)).used).toBe(3);

  // The next start on the same database reconciles them from the chain.
  const next = await startTestServer({ MONGODB_DB: db, TRUST_PROXY: 'true' });
  try {
    const open = await next.app.payments.records.payments.countDocuments({ status: 'verified' });
    expect(open).toBe(3);
    const result = await reconcilePayments(next.app.payments, { olderThanMs: 0 });
    expect(result).toEqual({ settled: 3, failed: 0, resent: 0 });
    const records = await next.app.payments.records.payments.find({}).lean();
    expect(records.map((r) => r.status)).toEqual(['settled', 'settled', 'settled', 'settled']);
    expect(records.filter((r) => r.txHash === batchHash)).toHaveLength(3);
    expect(records.every((r) => r.signedReceipt)).toBe(true);
    // Reconciling again moves nothing: each authorization moved money once.
    await reconcilePayments(next.app.payments, { olderThanMs: 0 });
    expect(await usdcBalance(seller.payTo)).toBe(before + 4n * PRICE);
  } finally {
    await next.close();
  }
});

it('reconciles captured holds whose process died after sending their settlement and before recording it; a hold not captured is left to expire', async () => {
  const dying = await batchingServer({ SETTLEMENT_PIPELINE_DEPTH: '4' });
  const seller = await setUpSeller(dying);
  const settler = dying.app.settlement!.settler;
  const sent = new Map<Hex, number>();
  settler.onSubmitted.push(async (txHash, size) => {
    sent.set(txHash, size);
    await new Promise(() => {}); // the process "dies" once the node has the transaction: nothing is recorded
  });
  const sentTransfers = () => [...sent.values()].reduce((a, b) => a + b, 0);
  const payments = await Promise.all([0, 1, 2, 3].map(() => header(seller)));
  const before = await usdcBalance(seller.payTo);
  const holds = await Promise.all(payments.map((p) => hold(dying.url, seller, p.header)));
  expect(holds.map((h) => h.status)).toEqual([201, 201, 201, 201]);
  const [kept, ...capturedIds] = holds.map((h) => h.body.holdId as string);
  const abort = new AbortController();
  const captures = capturedIds.map((id) => capture(dying.url, seller, id, abort.signal).catch(() => undefined));
  await until(() => sentTransfers() === 3);
  abort.abort();
  await Promise.all(captures);
  const db = dying.config.MONGODB_DB;
  await dying.app.close().catch(() => {});
  dying.http.closeAllConnections();
  dying.http.close();

  // The three captured payments moved; their records are still held, with capture decisions.
  expect(await usdcBalance(seller.payTo)).toBe(before + 3n * PRICE);
  let used = 0;
  for (const hash of sent.keys()) used += (await transfersIn(hash)).used;
  expect(used).toBe(3);

  const next = await startTestServer({ MONGODB_DB: db, TRUST_PROXY: 'true' });
  try {
    expect(await next.app.payments.records.payments.countDocuments({ status: 'held' })).toBe(4);
    const result = await reconcilePayments(next.app.payments, { olderThanMs: 0 });
    expect(result).toEqual({ settled: 3, failed: 0, resent: 0 });
    const records = await next.app.payments.records.payments.find({ _id: { $in: capturedIds } }).lean();
    expect(records.map((r) => r.status)).toEqual(['settled', 'settled', 'settled']);
    expect(records.every((r) => sent.has(r.txHash as Hex))).toBe(true);
    expect(records.every((r) => r.signedReceipt)).toBe(true);
    // The hold nobody captured is no settlement: it stays held (its expiry releases it), and nothing moved for it.
    expect((await next.app.payments.records.payments.findById(kept).lean())?.status).toBe('held');
    await reconcilePayments(next.app.payments, { olderThanMs: 0 });
    // Its seller released it, and that process died between the release decision and dropping the claim:
    // the expiry sweep finishes the release (and leaves the settled ones alone).
    await next.app.db.collection('payment_hold_decisions').insertOne({ _id: kept as never, orgId: records[0]!.orgId, decision: 'release', why: 'released', at: new Date() });
    await next.app.payments.records.payments.updateMany({ _id: { $in: [kept, ...capturedIds] } }, { $set: { holdExpiresAt: new Date(Date.now() - 1_000) } });
    expect(await next.app.holds.releaseExpired()).toBe(1);
    expect(await next.app.payments.records.payments.findById(kept).lean()).toBeNull();
    expect((await next.app.payments.records.payments.find({ _id: { $in: capturedIds } }).lean()).map((r) => r.status)).toEqual(['settled', 'settled', 'settled']);
    expect(await usdcBalance(seller.payTo)).toBe(before + 3n * PRICE);
    expect(await usdcBalance(payments[0]!.buyer.address)).toBe(1_000_000n);
  } finally {
    await next.close();
  }
});

it('two server processes on one database settle disjoint payments, and a header sent to both settles once', async () => {
  const first = await batchingServer();
  const second = await startTestServer({ TRUST_PROXY: 'true', MONGODB_DB: first.config.MONGODB_DB, SETTLEMENT_PIPELINE_DEPTH: '1' });
  try {
    const seller = await setUpSeller(first);
    const payments = await Promise.all(Array.from({ length: 12 }, () => header(seller)));
    const before = await usdcBalance(seller.payTo);
    // Every header goes to both processes at once: each authorization may settle in one of them only.
    const results = await Promise.all(payments.flatMap((p) => [redeem(first.url, seller, p.header), redeem(second.url, seller, p.header)]));
    expect(results.filter((r) => r.status === 200)).toHaveLength(12);
    expect(results.filter((r) => r.status === 402 && r.body.error === 'nonce_already_used')).toHaveLength(12);
    expect(await usdcBalance(seller.payTo)).toBe(before + 12n * PRICE);
    for (const p of payments) expect(await usdcBalance(p.buyer.address)).toBe(1_000_000n - PRICE);
    await Promise.all([first.app.payments.records.recordsWritten(), second.app.payments.records.recordsWritten()]);
    const records = await first.app.payments.records.payments.find({ status: 'settled' }).lean();
    expect(records).toHaveLength(12);
  } finally {
    await second.close();
    await first.close();
  }
});

it('a relayer without gas is refused before the claim (503, nothing charged, the same payment works once it is funded)', async () => {
  const server = await batchingServer();
  try {
    const seller = await setUpSeller(server);
    const relayer = server.app.chain!.relayerAccounts[0]!.address;
    const gas = await testChain().publicClient.getBalance({ address: relayer });
    await setEthBalance(relayer, 0n);
    const payment = await header(seller);
    const refused = await redeem(server.url, seller, payment.header);
    expect(refused.status).toBe(503);
    expect(refused.body).toMatchObject({ error: 'relayer_unavailable', status: 503 });
    expect(refused.body.message).toMatch(/out of gas/);
    const ready = await server.request('GET', '/ready');
    expect(ready.body).toMatchObject({ status: 'degraded', checks: { relayer: expect.stringContaining('out of gas') } });
    expect(await server.app.payments.records.payments.countDocuments({})).toBe(0);
    await setEthBalance(relayer, gas);
    // The very same header settles now: nothing was claimed for it.
    const paid = await redeem(server.url, seller, payment.header);
    expect(paid.status).toBe(200);
    expect(await usdcBalance(payment.buyer.address)).toBe(1_000_000n - PRICE);
    const again = await redeem(server.url, seller, (await header(seller)).header);
    expect(again.status).toBe(200);
    expect((await server.request('GET', '/ready')).body.status).toBe('ready');
  } finally {
    await server.close();
  }
}, 60_000);

it('a capture reaching a process that cannot send now is refused before the decision (503): the hold stays, and captures once the relayer is funded', async () => {
  const server = await batchingServer();
  try {
    const seller = await setUpSeller(server);
    const relayer = server.app.chain!.relayerAccounts[0]!.address;
    const gas = await testChain().publicClient.getBalance({ address: relayer });
    const payment = await header(seller);
    const held = await hold(server.url, seller, payment.header);
    expect(held.status).toBe(201);
    await setEthBalance(relayer, 0n);
    const settler = server.app.settlement!.settler;
    for (const deadline = Date.now() + 30_000; settler.available() && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 100));
    expect(settler.available()).toBe(false);

    const refused = await capture(server.url, seller, held.body.holdId);
    expect(refused.status).toBe(503);
    expect(refused.body).toMatchObject({ error: 'relayer_unavailable' });
    expect(await server.app.payments.records.payments.findById(held.body.holdId).lean()).toMatchObject({ status: 'held' });

    await setEthBalance(relayer, gas);
    // As the seller's middleware would after Retry-After: the same hold, captured again.
    let captured = await capture(server.url, seller, held.body.holdId);
    for (const deadline = Date.now() + 30_000; captured.status === 503 && Date.now() < deadline;) {
      await new Promise((r) => setTimeout(r, 1_000));
      captured = await capture(server.url, seller, held.body.holdId);
    }
    expect(captured.body).toMatchObject({ ok: true });
    expect(captured.status).toBe(200);
    expect(await usdcBalance(payment.buyer.address)).toBe(1_000_000n - PRICE);
    await server.app.payments.records.recordsWritten();
    expect(await server.app.payments.records.payments.findById(held.body.holdId).lean()).toMatchObject({ status: 'settled' });
  } finally {
    await server.close();
  }
}, 60_000);
