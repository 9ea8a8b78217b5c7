// What a seller and an ops person see of calls paid through batch-settlement channels: the official client
// (@x402/fetch with the batch-settlement client scheme) pays our Express route on the real backend and
// chain; each paid call has a record and a signed receipt that verifies against the service's DID document
// (the API, `agentgate receipts verify`, the console's check); after the sweep's claim, each record names
// the claim transaction; the seller's webhook hears of each claim once, one `channel.claimed` event per
// claim transaction listing the calls it carried; the console and the CLI list channels and their calls;
// another org sees none of it (404).
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import express from 'express';
import { decodePaymentResponseHeader } from '@x402/core/http';
import { verifyTypedData, type Hex } from 'viem';
import type { PrivateKeyAccount } from 'viem/accounts';
import { paymentMiddleware as expressPayments } from '../../adapters/express.js';
import { verifyReceipt, verifyWebhook } from 'agentgate-x402-wire';
import { BATCH_SETTLEMENT_ADDRESS, voucherTypedData } from '../../server/payments/schemes/batch-settlement/evm/chain.js';
import { fundedBuyer, testChain } from '../support/chain.js';
import { signUp } from '../support/agents.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { startReceiver } from '../webhooks/receiver.js';
import { consoleGet, signIn } from '../console/http-client.js';
import { serve, setUpSeller, type RunningApp } from './seller.js';
import { vouchersOnceCaptured } from '../support/channel-captures.js';
import { officialChannelClient } from '../support/official-channel-client.js';

const NETWORK = 'eip155:84532';
const PRICE = 1_000n;
const run = promisify(execFile);
const CLI = join(process.cwd(), 'bin', 'agentgate.js');

let server: TestServer;
let seller: Awaited<ReturnType<typeof setUpSeller>>;
let shop: RunningApp;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
let webhookSecret: string;
let endpointId: string;
let dir: string;

beforeAll(async () => {
  // The sweep runs when a test asks for it (one round each), never on its own during a test.
  server = await startTestServer({ CHANNEL_SWEEP_EVERY_MS: '600000' });
  seller = await setUpSeller(server);
  receiver = await startReceiver();
  const app = express();
  app.use(expressPayments({ backendUrl: server.url, apiKey: seller.sellerKey, routes: { 'GET /weather': { price: '$0.001', scheme: 'batch-settlement', description: 'Weather, per call' } } }));
  app.get('/weather', (_req, res) => { res.json({ weather: 'sunny' }); });
  shop = await serve(app);
  const registered = await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: `${shop.url}/weather`, priceUsdc: '0.001', webhookUrl: receiver.url } });
  expect(registered.status).toBe(201);
  ({ webhookSecret, id: endpointId } = registered.body);
  dir = mkdtempSync(join(tmpdir(), 'agentgate-channels-'));
}, 60_000);
afterAll(async () => {
  await shop?.close();
  await receiver?.close();
  await server?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const channelClient = (buyer: PrivateKeyAccount) => officialChannelClient(buyer).paying;

/** Pays `calls` calls; returns the channel id. */
async function pay(paying: ReturnType<typeof channelClient>, calls: number): Promise<Hex> {
  let channelId: Hex | undefined;
  for (let i = 0; i < calls; i++) {
    const res = await paying(`${shop.url}/weather`);
    expect(res.status).toBe(200);
    channelId ??= (decodePaymentResponseHeader(res.headers.get('payment-response')!).extra as any).channelState.channelId;
  }
  await vouchersOnceCaptured(server.app.db, channelId!);
  return channelId!;
}

let rounds = 0;
async function sweep() {
  return server.app.payments.batchSettlement.sweep.run({ everyMs: 1, idleRefundMs: 24 * 3_600_000, round: `records-${process.pid}-${Date.now()}-${++rounds}` }, (orgId) => server.app.payments.acceptance.accepting(orgId));
}

/** Waits for a condition the system reaches by itself (a delivery recorded), failing after 30 s. */
async function until<T>(what: string, read: () => Promise<T | undefined | null | false>): Promise<T> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const value = await read();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`waited 30 s for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const didDocument = async () => (await server.request('GET', '/.well-known/did.json')).body;
const calls = async (channelId: string, key = seller.sellerKey) => server.request('GET', `/v0/payments/channels/${channelId}/calls`, { key });
const channelDeliveries = () => server.app.db.collection('webhook_deliveries').find({ event: 'channel.claimed', endpointId }).sort({ createdAt: 1 }).toArray();

async function cli(args: string[]) {
  try {
    const { stdout } = await run('node', [CLI, ...args, '--url', server.url, '--key', seller.platformKey], { env: { ...process.env, AGENTGATE_CREDENTIALS: join(dir, 'none.json') }, timeout: 60_000 });
    return { code: 0, stdout };
  } catch (err) {
    const e = err as { code: number; stdout: string };
    return { code: e.code, stdout: e.stdout };
  }
}

describe('channel calls: records, receipts, claims, webhooks, console, CLI', () => {
  let channelId: Hex;
  let buyer: PrivateKeyAccount;
  let paying: ReturnType<typeof channelClient>;
  let firstClaimTx: string;

  it('each paid call has a record with a signed receipt that verifies against the service DID document', async () => {
    buyer = await fundedBuyer('1');
    paying = channelClient(buyer);
    channelId = await pay(paying, 3);

    const channels = await server.request('GET', '/v0/payments/channels', { key: seller.sellerKey });
    expect(channels.status).toBe(200);
    expect(channels.body.channels).toEqual([expect.objectContaining({
      id: channelId, payerAddress: buyer.address, recipientAddress: seller.payTo, state: 'open', callCount: 3,
      depositedUsdcRaw: String(10n * PRICE), acceptedUsdcRaw: String(3n * PRICE), claimedUsdcRaw: '0', refundedUsdcRaw: '0',
    })]);

    const listed = await calls(channelId);
    expect(listed.status).toBe(200);
    expect(listed.body.calls.map((c: any) => [c.cumulativeAmountUsdcRaw, c.status, c.txHash])).toEqual([['3000', 'accepted', null], ['2000', 'accepted', null], ['1000', 'accepted', null]]);
    // Paged: two, then the last one, and no token after it; a token of another channel's call lists nothing.
    const first = await server.request('GET', `/v0/payments/channels/${channelId}/calls?limit=2`, { key: seller.sellerKey });
    expect(first.body.calls.map((c: any) => c.cumulativeAmountUsdcRaw)).toEqual(['3000', '2000']);
    const second = await server.request('GET', `/v0/payments/channels/${channelId}/calls?limit=2&pageToken=${encodeURIComponent(first.body.nextPageToken)}`, { key: seller.sellerKey });
    expect(second.status).toBe(200);
    expect(second.body.calls.map((c: any) => c.cumulativeAmountUsdcRaw)).toEqual(['1000']);
    expect(second.body.nextPageToken).toBeUndefined();
    const foreignToken = Buffer.from(`${new Date().toISOString()}|0x${'ab'.repeat(32)}:000000000009`).toString('base64url');
    const foreign = await server.request('GET', `/v0/payments/channels/${channelId}/calls?limit=2&pageToken=${foreignToken}`, { key: seller.sellerKey });
    expect(foreign.status).toBe(200);
    expect(foreign.body.calls).toEqual([]);

    const document = await didDocument();
    for (const listedCall of listed.body.calls) {
      // Found the way a payment is: GET /v0/payments/{id}, by the ops person's platform key too.
      const record = await server.request('GET', `/v0/payments/${listedCall.id}`, { key: seller.platformKey });
      expect(record.status).toBe(200);
      expect(record.body).toMatchObject({ id: listedCall.id, scheme: 'batch-settlement', channelId, amountUsdcRaw: '1000', resourceUrl: `${shop.url}/weather`, endpointId, status: 'accepted', claimedAt: null });
      const receipt = record.body.signedReceipt;
      expect(receipt.body).toMatchObject({
        paymentId: listedCall.id, scheme: 'batch-settlement', channelId, cumulativeAmountUsdcRaw: listedCall.cumulativeAmountUsdcRaw, amountUsdcRaw: '1000',
        payerAddress: buyer.address, recipientAddress: seller.payTo, endpointId, network: NETWORK, txHash: '', timestamp: listedCall.acceptedAt,
      });
      await expect(verifyReceipt(receipt, document)).resolves.toEqual({ ok: true });
      // A receipt whose amount was changed does not verify.
      await expect(verifyReceipt({ ...receipt, body: { ...receipt.body, amountUsdcRaw: '1' } }, document)).resolves.toEqual({ ok: false, reason: 'signature_mismatch' });
      // The voucher the receipt names is the buyer's own signature over (channel, cumulative amount).
      const typed = voucherTypedData(channelId, BigInt(receipt.body.cumulativeAmountUsdcRaw), 84532);
      await expect(verifyTypedData({ address: buyer.address, ...(typed as any), signature: receipt.body.voucherSignature })).resolves.toBe(true);
    }

    // `agentgate receipts verify <call id>` checks it as it checks a payment's.
    const key = server.app.serviceKey;
    const didFile = join(dir, 'did.json');
    writeFileSync(didFile, JSON.stringify({ id: key.did, verificationMethod: [{ id: key.keyId, type: 'Multikey', controller: key.did, publicKeyMultibase: key.publicKeyMultibase }], assertionMethod: [key.keyId] }));
    const verified = await cli(['receipts', 'verify', listed.body.calls[0].id, '--did-document', didFile]);
    expect(verified.code).toBe(0);
    expect(verified.stdout).toContain(`valid receipt for payment ${listed.body.calls[0].id}: 1000 atomic USDC from ${buyer.address} to ${seller.payTo}, channel ${channelId}, cumulative 3000`);
  });

  it('after the sweep, each record names the claim transaction; the seller gets one channel.claimed event for it, listing the calls', async () => {
    const totals = await sweep();
    expect(totals).toMatchObject({ claimed: 1 });
    const claim = await server.app.db.collection('channel_actions').findOne({ kind: 'claim', channelIds: channelId, status: 'succeeded' });
    expect(claim?.txHash).toMatch(/^0x[0-9a-f]{64}$/);
    firstClaimTx = claim!.txHash;
    const mined = await testChain().publicClient.getTransactionReceipt({ hash: firstClaimTx as Hex });
    expect([mined.status, mined.to?.toLowerCase()]).toEqual(['success', BATCH_SETTLEMENT_ADDRESS.toLowerCase()]);

    const listed = await calls(channelId);
    expect(listed.body.calls).toHaveLength(3);
    for (const call of listed.body.calls) expect(call).toMatchObject({ status: 'claimed', txHash: firstClaimTx, claimedAt: expect.any(String), claimId: claim!._id });
    const channel = await server.request('GET', `/v0/payments/channels/${channelId}`, { key: seller.sellerKey });
    expect(channel.body).toMatchObject({ claimedUsdcRaw: '3000', acceptedUsdcRaw: '3000' });

    await receiver.next(1);
    const delivered = receiver.received[0]!;
    expect(delivered.headers['x-service-event']).toBe('channel.claimed');
    expect(verifyWebhook(delivered.raw, delivered.headers['x-service-signature'] as string, webhookSecret)).toBe(true);
    expect(delivered.json).toMatchObject({ event: 'channel.claimed', claimId: claim!._id, txHash: firstClaimTx, network: NETWORK, endpointId, part: 1, parts: 1, amountUsdcRaw: '3000' });
    expect(delivered.json.calls.map((c: any) => [c.paymentId, c.cumulativeAmountUsdcRaw])).toEqual([...listed.body.calls].reverse().map((c: any) => [c.id, c.cumulativeAmountUsdcRaw]));
    const document = await didDocument();
    for (const call of delivered.json.calls) await expect(verifyReceipt(call.receipt, document)).resolves.toEqual({ ok: true });

    // Dispatched again (the outbox sweep of every process, another round's hook): still one delivery.
    await until('the delivery recorded as delivered', async () => (await channelDeliveries())[0]?.status === 'delivered');
    await server.app.webhooks.sweepOutboxes(0);
    await server.app.payments.channels.claimWebhooks.sweep(0);
    expect((await channelDeliveries()).map((d) => d.status)).toEqual(['delivered']);
    expect(receiver.received).toHaveLength(1);
  });

  it('the next claim is an event of its own, listing only the calls it carried', async () => {
    await pay(paying, 2);
    const listedBefore = await calls(channelId);
    expect(listedBefore.body.calls.slice(0, 2).map((c: any) => c.status)).toEqual(['accepted', 'accepted']);
    expect(await sweep()).toMatchObject({ claimed: 1 });
    await receiver.next(2);
    const second = receiver.received[1]!.json;
    expect(second.txHash).not.toBe(firstClaimTx);
    expect(second.calls.map((c: any) => c.cumulativeAmountUsdcRaw)).toEqual(['4000', '5000']);
    const listed = await calls(channelId);
    expect(listed.body.calls.map((c: any) => c.txHash)).toEqual([second.txHash, second.txHash, firstClaimTx, firstClaimTx, firstClaimTx]);
    await until('both deliveries recorded as delivered', async () => (await channelDeliveries()).every((d) => d.status === 'delivered'));
    expect(await channelDeliveries()).toHaveLength(2);
  });

  it('a claim whose events its process never dispatched (it died after the claim) is dispatched by the webhook outbox sweep', async () => {
    // The round's own dispatch does not happen, as if its process died after the claim.
    const dispatch = jest.spyOn(server.app.payments.channels.claimWebhooks, 'sweep').mockResolvedValue(0);
    try {
      await pay(paying, 1);
      expect(await sweep()).toMatchObject({ claimed: 1 });
      expect(dispatch).toHaveBeenCalled();
    } finally {
      dispatch.mockRestore();
    }
    const claimTx = (await calls(channelId)).body.calls[0].txHash;
    expect(claimTx).toMatch(/^0x[0-9a-f]{64}$/);
    expect(await channelDeliveries()).toHaveLength(2);
    await server.app.webhooks.sweepOutboxes(0);
    await receiver.next(3);
    expect(receiver.received[2]!.json).toMatchObject({ txHash: claimTx, calls: [expect.objectContaining({ cumulativeAmountUsdcRaw: '6000' })] });
    await until('the deliveries recorded as delivered', async () => (await channelDeliveries()).every((d) => d.status === 'delivered'));
    expect(await channelDeliveries()).toHaveLength(3);
  });

  it('the console lists the channel and its calls, and checks a call\'s receipt', async () => {
    const session = await signIn(server, seller.platformKey);
    const list = await consoleGet(server, '/console/channels', session.cookie);
    expect(list.status).toBe(200);
    expect(list.text).toContain(`data-channel-id="${channelId}"`);
    expect(list.text).toContain(buyer.address.slice(0, 8));
    const page = await consoleGet(server, `/console/channels/${channelId}`, session.cookie);
    expect(page.status).toBe(200);
    const listed = (await calls(channelId)).body.calls;
    for (const call of listed) expect(page.text).toContain(`data-call-id="${call.id}"`);
    const callPage = await consoleGet(server, `/console/payments/${listed.at(-1).id}`, session.cookie);
    expect(callPage.status).toBe(200);
    expect(callPage.text).toContain('data-receipt-check="valid"');
    expect(callPage.text).toContain(`data-claim-tx>${firstClaimTx}`);
  });

  it('the CLI lists the channels and a channel\'s calls with their claim transactions', async () => {
    const channels = await cli(['channels', 'list']);
    expect(channels.code).toBe(0);
    expect(channels.stdout).toMatch(new RegExp(`^${channelId}\\s+open\\s+from ${buyer.address}\\s+deposited 0\\.01\\s+accepted 0\\.006\\s+claimed 0\\.006\\s+refunded 0 USDC\\s+6 calls$`, 'm'));
    const listed = await cli(['channels', 'calls', channelId]);
    expect(listed.code).toBe(0);
    const lines = listed.stdout.trim().split('\n');
    expect(lines).toHaveLength(6);
    expect(lines[5]).toContain(`claimed in ${firstClaimTx}`);
    const json = JSON.parse((await cli(['channels', 'calls', channelId, '--limit', '2', '--json'])).stdout);
    expect(json.calls.map((c: any) => c.cumulativeAmountUsdcRaw)).toEqual(['6000', '5000']);
    expect(json.nextCursor).toEqual(expect.any(String));
    const rest = JSON.parse((await cli(['channels', 'calls', channelId, '--cursor', json.nextCursor, '--json'])).stdout);
    expect(rest.calls.map((c: any) => c.cumulativeAmountUsdcRaw)).toEqual(['4000', '3000', '2000', '1000']);
    const bad = await cli(['channels', 'calls', 'not-a-channel']);
    expect(bad.code).toBe(2);
  });

  it('another org sees none of it: 404 for the channel, its calls, a call, and their console pages', async () => {
    const other = await signUp(server);
    const callId = (await calls(channelId)).body.calls[0].id;
    expect((await server.request('GET', '/v0/payments/channels', { key: other.platform_key })).body).toMatchObject({ channels: [], count: 0 });
    for (const path of [`/v0/payments/channels/${channelId}`, `/v0/payments/channels/${channelId}/calls`, `/v0/payments/${callId}`]) {
      const res = await server.request('GET', path, { key: other.platform_key });
      expect([path, res.status, res.body.status, typeof res.body.error, typeof res.body.message]).toEqual([path, 404, 404, 'string', 'string']);
    }
    const session = await signIn(server, other.platform_key);
    expect((await consoleGet(server, `/console/channels/${channelId}`, session.cookie)).status).toBe(404);
    expect((await consoleGet(server, `/console/payments/${callId}`, session.cookie)).status).toBe(404);
    expect((await consoleGet(server, '/console/channels', session.cookie)).text).not.toContain(channelId);
    // Malformed ids are a 400 naming the field.
    const bad = await server.request('GET', '/v0/payments/channels/0x1234/calls', { key: seller.sellerKey });
    expect([bad.status, bad.body.error]).toEqual([400, 'validation_error']);
    expect(bad.body.message).toContain('channelId');
  });

  it('a claim of more calls than the webhook reads at once (300 on one channel) lists each call once, in parts of 100', async () => {
    const many = officialChannelClient(await fundedBuyer('1'), 400).paying;
    const id = await pay(many, 300);
    const before = receiver.received.length;
    expect(await sweep()).toMatchObject({ claimed: 1 });
    await receiver.next(before + 3);
    const events = receiver.received.slice(before).map((r) => r.json).filter((e) => e.calls.some((c: any) => c.channelId === id));
    expect(events.map((e) => [e.part, e.parts]).sort()).toEqual([[1, 3], [2, 3], [3, 3]]);
    const cumulative = events.flatMap((e) => e.calls.map((c: any) => BigInt(c.cumulativeAmountUsdcRaw))).sort((a, b) => (a < b ? -1 : 1));
    expect(cumulative).toEqual(Array.from({ length: 300 }, (_, i) => BigInt(i + 1) * PRICE));
  });
});
