// agentgate as the facilitator of the x402 `batch-settlement` scheme: the official @x402/express seller with
// a batch-settlement route (BatchSettlementEvmScheme from @x402/evm, its in-memory channel storage) and its
// BatchSettlementChannelManager point their HTTPFacilitatorClient at /v0/x402, with no receiver-authorizer
// key of their own (they delegate it to agentgate, as /supported offers); the official client
// (@x402/fetch with the batch-settlement client scheme) pays it. Deposit, vouchers, a claim, settle and a
// refund go on the real dev chain; replays and concurrent copies send once; every refusal moves nothing.
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { x402Client } from '@x402/core/client';
import { HTTPFacilitatorClient, x402ResourceServer } from '@x402/core/server';
import { BatchSettlementEvmScheme as ChannelClientScheme, createBatchSettlementEIP3009DepositPayload } from '@x402/evm/batch-settlement/client';
import { BatchSettlementChannelManager, BatchSettlementEvmScheme as ChannelServerScheme } from '@x402/evm/batch-settlement/server';
import { paymentMiddleware as officialPaymentMiddleware } from '@x402/express';
import { wrapFetchWithPayment } from '@x402/fetch';
import { decodePaymentResponseHeader } from '@x402/core/http';
import { toClientEvmSigner } from '@x402/evm';
import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { createWalletClient, http, maxUint256, parseEventLogs, parseUnits, toHex, type Address, type Hex } from 'viem';
import { randomBytes } from 'node:crypto';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { fundedBuyer, setEthBalance, testChain, usdcBalance } from '../support/chain.js';
import { erc20AllowanceAbi, PERMIT2_ADDRESS } from '../../server/chain/permit2.js';
import { DEV_USDC_NAME } from '../../server/dev/chain/dev-chain.js';
import {
  BATCH_SETTLEMENT_ADDRESS,
  batchSettlementAbi,
  channelIdOf,
  readChannelState,
  voucherTypedData,
  type ChannelConfig,
} from '../../server/payments/schemes/batch-settlement/evm/chain.js';

const NETWORK = 'eip155:84532';
/** Shared by the backend processes of a deployment (the receiver authorizer is sealed under it). */
const MASTER_KEY = randomBytes(32).toString('hex');
const PRICE = 1_000n; // $0.001 a call

let server: TestServer;
let seller: { platformKey: string; sellerKey: string; payTo: Address };
let receiverAuthorizer: Address;
let shop: { url: string; http: Server };
let serverScheme: ChannelServerScheme;
let manager: BatchSettlementChannelManager;

const facilitatorClient = (key: string) => new HTTPFacilitatorClient({
  url: `${server.url}/v0/x402`,
  createAuthHeaders: async () => { const h = { Authorization: `Bearer ${key}` }; return { verify: h, settle: h, supported: h }; },
});

async function listen(app: express.Express) {
  const httpServer = createServer(app as never);
  httpServer.listen(0, '127.0.0.1');
  await once(httpServer, 'listening');
  return { http: httpServer, url: `http://127.0.0.1:${(httpServer.address() as AddressInfo).port}` };
}

async function newSeller() {
  const agent = await signUp(server);
  const payTo = privateKeyToAccount(generatePrivateKey()).address;
  expect((await server.request('PUT', '/v0/payments/acceptance', { key: agent.platform_key, body: { enabled: true, payTo } })).status).toBe(200);
  const key = await server.request('POST', '/v0/payments/seller-keys', { key: agent.platform_key, body: {} });
  return { platformKey: agent.platform_key as string, sellerKey: key.body.apiKey as string, payTo };
}

beforeAll(async () => {
  server = await startTestServer({ MASTER_KEY });
  seller = await newSeller();
  const supported = await facilitatorClient(seller.sellerKey).getSupported();
  receiverAuthorizer = supported.kinds.find((k) => k.scheme === 'batch-settlement')!.extra!.receiverAuthorizer as Address;

  // A seller on the official stack only: @x402/express, a batch-settlement route, agentgate as its facilitator.
  serverScheme = new ChannelServerScheme(seller.payTo);
  const facilitator = facilitatorClient(seller.sellerKey);
  const resourceServer = new x402ResourceServer(facilitator).register(NETWORK, serverScheme);
  const app = express();
  app.use(officialPaymentMiddleware({
    'GET /weather': {
      accepts: { scheme: 'batch-settlement', network: NETWORK, payTo: seller.payTo, price: { asset: testChain().usdc, amount: PRICE.toString(), extra: { name: DEV_USDC_NAME, version: '2' } } },
      description: 'Weather, per call', mimeType: 'application/json',
    },
    // The same, deposits through Permit2 (the payer approved Permit2 once).
    'GET /weather-permit2': {
      accepts: { scheme: 'batch-settlement', network: NETWORK, payTo: seller.payTo, price: { asset: testChain().usdc, amount: PRICE.toString(), extra: { name: DEV_USDC_NAME, version: '2', assetTransferMethod: 'permit2' } } },
      description: 'Weather, per call', mimeType: 'application/json',
    },
  }, resourceServer));
  app.get(['/weather', '/weather-permit2'], (_req, res) => { res.json({ weather: 'sunny' }); });
  shop = await listen(app);
  manager = new BatchSettlementChannelManager({ scheme: serverScheme, facilitator, receiver: seller.payTo, token: testChain().usdc, network: NETWORK });
}, 60_000);

afterAll(async () => {
  shop?.http.closeAllConnections();
  shop?.http.close();
  await server?.close();
});

const channelClient = (buyer: PrivateKeyAccount) => new ChannelClientScheme(toClientEvmSigner(buyer, testChain().publicClient as never), { depositPolicy: { depositMultiplier: 10 } });
const payingFetch = (scheme: ChannelClientScheme) => wrapFetchWithPayment(fetch, new x402Client().register(NETWORK, scheme)
  .setSpendControls({ allowedAssets: [{ network: NETWORK, asset: testChain().usdc, maxAmountPerPayment: '1000000' }] }));
const channelState = (id: Hex) => readChannelState(testChain().publicClient as never, id);

/** Events of the contract in a transaction. */
async function eventsOf(hash: Hex) {
  const receipt = await testChain().publicClient.getTransactionReceipt({ hash });
  return parseEventLogs({ abi: batchSettlementAbi, logs: receipt.logs.filter((l) => l.address.toLowerCase() === BATCH_SETTLEMENT_ADDRESS.toLowerCase()) });
}

describe('/supported', () => {
  it('advertises batch-settlement with agentgate\'s receiver authorizer, the same for every process and seller', async () => {
    const supported = await facilitatorClient(seller.sellerKey).getSupported();
    expect(supported.kinds).toContainEqual({ x402Version: 2, scheme: 'batch-settlement', network: NETWORK, extra: { receiverAuthorizer: expect.stringMatching(/^0x[0-9a-fA-F]{40}$/) } });
    expect(supported.signers['eip155:*']!.length).toBeGreaterThan(0);
    // A second backend process on the same database reads the one stored key.
    const other = await startTestServer({ MONGODB_DB: server.config.MONGODB_DB, MASTER_KEY });
    try {
      const answer = await other.request('GET', '/v0/x402/supported');
      expect(answer.status).toBe(200);
      const again = answer.body.kinds.find((k: any) => k.scheme === 'batch-settlement');
      expect(again.extra.receiverAuthorizer).toBe(receiverAuthorizer);
    } finally {
      await other.stop();
    }
  });
});

describe('the official client pays the official @x402/express batch-settlement seller through agentgate', () => {
  it('deposit, vouchers, then the channel manager claims, settles and refunds on chain', async () => {
    const buyer = await fundedBuyer('5');
    const client = channelClient(buyer);
    const paying = payingFetch(client);
    const [buyerBefore, sellerBefore] = [await usdcBalance(buyer.address), await usdcBalance(seller.payTo)];

    const first = await paying(`${shop.url}/weather`);
    expect(first.status).toBe(200);
    expect(await first.json()).toEqual({ weather: 'sunny' });
    const deposit = decodePaymentResponseHeader(first.headers.get('payment-response')!);
    expect(deposit).toMatchObject({ success: true, network: NETWORK });
    const channelId = (deposit.extra as any).channelState.channelId as Hex;
    const depositAmount = 10n * PRICE;
    expect(await usdcBalance(buyer.address)).toBe(buyerBefore - depositAmount);
    expect(await channelState(channelId)).toMatchObject({ balance: depositAmount, totalClaimed: 0n });

    // Vouchers: checked off chain, nothing sent.
    for (let i = 0; i < 4; i++) {
      const res = await paying(`${shop.url}/weather`);
      expect(res.status).toBe(200);
      await res.json();
    }
    expect(await usdcBalance(buyer.address)).toBe(buyerBefore - depositAmount);

    const claims = await manager.claim();
    expect(claims).toEqual([{ vouchers: 1, transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/) }]);
    expect(await channelState(channelId)).toMatchObject({ balance: depositAmount, totalClaimed: 5n * PRICE });
    const settled = await manager.settle();
    expect(settled.transaction).toMatch(/^0x[0-9a-f]{64}$/);
    expect(await usdcBalance(seller.payTo)).toBe(sellerBefore + 5n * PRICE);

    // The buyer takes the rest back through the seller (a cooperative refund agentgate signs for it).
    const refunded = await client.refund(`${shop.url}/weather`, { fetch });
    expect(refunded).toMatchObject({ success: true });
    expect(await usdcBalance(buyer.address)).toBe(buyerBefore - 5n * PRICE);
    expect(await channelState(channelId)).toMatchObject({ balance: 5n * PRICE, totalClaimed: 5n * PRICE, refundNonce: 1n });
  });

  it('a deposit through Permit2 (the requirements ask for it): the Permit2 collector pulls it, vouchers follow', async () => {
    const buyer = await fundedBuyer('5');
    await setEthBalance(buyer.address, parseUnits('1', 18));
    const { chain, rpcUrl, usdc, publicClient } = testChain();
    const approve = await createWalletClient({ chain, transport: http(rpcUrl), account: buyer }).writeContract({ address: usdc, abi: erc20AllowanceAbi, functionName: 'approve', args: [PERMIT2_ADDRESS, maxUint256] });
    await publicClient.waitForTransactionReceipt({ hash: approve });
    const before = await usdcBalance(buyer.address);
    const paying = payingFetch(channelClient(buyer));
    const first = await paying(`${shop.url}/weather-permit2`);
    expect(first.status).toBe(200);
    const deposit = decodePaymentResponseHeader(first.headers.get('payment-response')!);
    const channelId = (deposit.extra as any).channelState.channelId as Hex;
    const events = await eventsOf(deposit.transaction as Hex);
    expect(events.map((e) => e.eventName)).toContain('Deposited');
    expect((await paying(`${shop.url}/weather-permit2`)).status).toBe(200);
    expect(await usdcBalance(buyer.address)).toBe(before - 10n * PRICE);
    expect(await channelState(channelId)).toMatchObject({ balance: 10n * PRICE });
  });

  it('the manager refunds an idle channel, claiming its last vouchers in the same transaction', async () => {
    const buyer = await fundedBuyer('5');
    const paying = payingFetch(channelClient(buyer));
    const buyerBefore = await usdcBalance(buyer.address);
    const sellerBefore = await usdcBalance(seller.payTo);
    let channelId: Hex | undefined;
    for (let i = 0; i < 3; i++) {
      const res = await paying(`${shop.url}/weather`);
      expect(res.status).toBe(200);
      channelId ??= (decodePaymentResponseHeader(res.headers.get('payment-response')!).extra as any).channelState.channelId;
    }
    const refunds = await manager.refund([channelId!]);
    expect(refunds).toEqual([{ channel: channelId, transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/) }]);
    const events = await eventsOf(refunds[0]!.transaction as Hex);
    expect(events.map((e) => e.eventName)).toEqual(expect.arrayContaining(['Claimed', 'Refunded']));
    expect(await channelState(channelId!)).toMatchObject({ totalClaimed: 3n * PRICE, balance: 3n * PRICE });
    expect(await usdcBalance(buyer.address)).toBe(buyerBefore - 3n * PRICE);
    await manager.settle();
    expect(await usdcBalance(seller.payTo)).toBe(sellerBefore + 3n * PRICE);
  });
});

// --- the facilitator API directly: answers, at-most-once, refusals ---------------------------------

/** A funded channel of `buyer` to the seller (deposited through the official client and seller), and what it takes to sign for it. */
async function openChannel(buyer: PrivateKeyAccount, calls = 1) {
  const paying = payingFetch(channelClient(buyer));
  let res!: Response;
  for (let i = 0; i < calls; i++) {
    res = await paying(`${shop.url}/weather`);
    expect(res.status).toBe(200);
  }
  const snapshot = (decodePaymentResponseHeader(res.headers.get('payment-response')!).extra as any).channelState;
  const stored = await serverScheme.getStorage().get(snapshot.channelId);
  return { channelId: snapshot.channelId as Hex, config: stored!.channelConfig as ChannelConfig };
}

const requirementsFor = (payTo: Address): PaymentRequirements => ({
  scheme: 'batch-settlement', network: NETWORK, asset: testChain().usdc, amount: PRICE.toString(), payTo, maxTimeoutSeconds: 60,
  extra: { receiverAuthorizer, withdrawDelay: 900, name: DEV_USDC_NAME, version: '2' },
});
const envelope = (payload: Record<string, unknown>, requirements: PaymentRequirements): PaymentPayload => ({ x402Version: 2, accepted: requirements, payload } as PaymentPayload);
/** A /settle answer's outcome, its errorReason and errorMessage picked out: toMatchObject's diff leaves out the keys it was not asked for. */
const outcome = (body: Record<string, unknown>) => ({ success: body.success, transaction: body.transaction, errorReason: body.errorReason, errorMessage: body.errorMessage });

async function voucher(signer: PrivateKeyAccount, channelId: Hex, max: bigint) {
  return { channelId, maxClaimableAmount: max.toString(), signature: await signer.signTypedData(voucherTypedData(channelId, max, 84532) as never) };
}

async function post(path: 'verify' | 'settle', key: string, payload: PaymentPayload, requirements: PaymentRequirements) {
  return server.request('POST', `/v0/x402/${path}`, { key, body: { x402Version: 2, paymentPayload: payload, paymentRequirements: requirements } });
}

describe('/verify answers the channel snapshot; every refusal names the scheme\'s reason', () => {
  let buyer: PrivateKeyAccount;
  let channel: { channelId: Hex; config: ChannelConfig };
  beforeAll(async () => {
    buyer = await fundedBuyer('5');
    channel = await openChannel(buyer);
  });

  it('a good voucher: valid, with the channel as the chain has it', async () => {
    const req = requirementsFor(seller.payTo);
    const res = await post('verify', seller.sellerKey, envelope({ type: 'voucher', channelConfig: channel.config, voucher: await voucher(buyer, channel.channelId, 2n * PRICE) }, req), req);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ isValid: true, payer: buyer.address, extra: { channelId: channel.channelId, balance: (10n * PRICE).toString(), totalClaimed: '0', withdrawRequestedAt: 0, refundNonce: '0' } });
  });

  it.each([
    ['a voucher signed by someone else', async () => ({ v: await voucher(privateKeyToAccount(generatePrivateKey()), channel.channelId, 2n * PRICE) }), 'invalid_batch_settlement_evm_voucher_signature'],
    ['a voucher above the deposit', async () => ({ v: await voucher(buyer, channel.channelId, 11n * PRICE) }), 'invalid_batch_settlement_evm_cumulative_exceeds_balance'],
    ['a voucher of another channel id than its config', async () => ({ v: await voucher(buyer, toHex(randomBytes(32)), 2n * PRICE) }), 'invalid_batch_settlement_evm_channel_id_mismatch'],
    ['a voucher for a channel paying another receiver', async () => ({ v: await voucher(buyer, channel.channelId, 2n * PRICE), payTo: privateKeyToAccount(generatePrivateKey()).address }), 'invalid_payment_requirements'],
    ['a voucher whose channel names another receiver authorizer', async () => ({ v: await voucher(buyer, channel.channelId, 2n * PRICE), authorizer: privateKeyToAccount(generatePrivateKey()).address }), 'invalid_batch_settlement_evm_receiver_authorizer_mismatch'],
  ] as const)('%s', async (_what, make, reason) => {
    const made = await make() as { v: Awaited<ReturnType<typeof voucher>>; payTo?: Address; authorizer?: Address };
    const req = requirementsFor(made.payTo ?? seller.payTo);
    if (made.authorizer) req.extra = { ...req.extra, receiverAuthorizer: made.authorizer };
    const res = await post('verify', seller.sellerKey, envelope({ type: 'voucher', channelConfig: channel.config, voucher: made.v }, req), req);
    expect(res.body).toMatchObject({ isValid: false, invalidReason: reason });
  });

  it('a voucher of a channel with no deposit: channel not found', async () => {
    const stranger = privateKeyToAccount(generatePrivateKey());
    const config: ChannelConfig = { ...channel.config, payer: stranger.address, payerAuthorizer: stranger.address, salt: toHex(randomBytes(32)) };
    const id = channelIdOf(config, 84532);
    const req = requirementsFor(seller.payTo);
    const res = await post('verify', seller.sellerKey, envelope({ type: 'voucher', channelConfig: config, voucher: await voucher(stranger, id, PRICE) }, req), req);
    expect(res.body).toMatchObject({ isValid: false, invalidReason: 'invalid_batch_settlement_evm_channel_not_found' });
  });

  it('a malformed payload and another scheme\'s requirements are refused by name', async () => {
    const req = requirementsFor(seller.payTo);
    expect((await post('verify', seller.sellerKey, envelope({ type: 'voucher', channelConfig: channel.config, voucher: { channelId: 'nope' } }, req), req)).body)
      .toMatchObject({ isValid: false, invalidReason: 'invalid_batch_settlement_evm_payload_type' });
    const other = { ...req, network: 'eip155:1' as const };
    expect((await post('verify', seller.sellerKey, envelope({ type: 'voucher', channelConfig: channel.config, voucher: await voucher(buyer, channel.channelId, PRICE) }, other), other)).body)
      .toMatchObject({ isValid: false, invalidReason: 'invalid_batch_settlement_evm_network_mismatch' });
  });
});

describe('/settle sends each action once', () => {
  it('the same claim sent twice at once is one transaction; sent again later, the same answer', async () => {
    const buyer = await fundedBuyer('5');
    const channel = await openChannel(buyer);
    const req = requirementsFor(seller.payTo);
    const v = await voucher(buyer, channel.channelId, 3n * PRICE);
    const claim = envelope({ type: 'claim', claims: [{ voucher: { channel: channel.config, maxClaimableAmount: v.maxClaimableAmount }, signature: v.signature, totalClaimed: v.maxClaimableAmount }] }, req);
    const [a, b] = await Promise.all([post('settle', seller.sellerKey, claim, req), post('settle', seller.sellerKey, claim, req)]);
    expect(a.body).toMatchObject({ success: true, transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/) });
    expect(b.body.transaction).toBe(a.body.transaction);
    const again = await post('settle', seller.sellerKey, claim, req);
    expect(again.body.transaction).toBe(a.body.transaction);
    expect(await channelState(channel.channelId)).toMatchObject({ totalClaimed: 3n * PRICE });
    const claimed = await testChain().publicClient.getContractEvents({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, eventName: 'Claimed', args: { channelId: channel.channelId }, fromBlock: 0n });
    expect(claimed).toHaveLength(1);
  });

  it('a claim sent by a process that died before recording it: asked again, the chain\'s claim is found and nothing is sent twice', async () => {
    const buyer = await fundedBuyer('5');
    const channel = await openChannel(buyer);
    const req = requirementsFor(seller.payTo);
    const v = await voucher(buyer, channel.channelId, 2n * PRICE);
    const row = { voucher: { channel: channel.config, maxClaimableAmount: v.maxClaimableAmount }, signature: v.signature, totalClaimed: v.maxClaimableAmount };
    const claim = envelope({ type: 'claim', claims: [row] }, req);
    // The first request: recorded and sent, the outcome never recorded (the process was killed). The same
    // state, staged: the claim on chain (sent with agentgate's authorizer signature by a relayer), and the
    // action record left `sending` long ago.
    const first = await post('settle', seller.sellerKey, claim, req);
    expect(first.body.success).toBe(true);
    const actions = server.app.db.collection('channel_actions');
    const record = await actions.findOne({ kind: 'claim', channelIds: channel.channelId });
    expect(record).toMatchObject({ status: 'succeeded', txHash: first.body.transaction });
    await actions.updateOne({ _id: record!._id }, { $set: { status: 'sending', createdAt: new Date(Date.now() - 10 * 60_000) }, $unset: { answer: '', txHash: '' } });
    const again = await post('settle', seller.sellerKey, claim, req);
    expect(again.body).toMatchObject({ success: true, transaction: first.body.transaction });
    expect(await actions.findOne({ _id: record!._id })).toMatchObject({ status: 'succeeded', txHash: first.body.transaction });
    const claimed = await testChain().publicClient.getContractEvents({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, eventName: 'Claimed', args: { channelId: channel.channelId }, fromBlock: 0n });
    expect(claimed).toHaveLength(1);
  });

  it.each(['deposit', 'refund'] as const)('a %s asked again while the first request is still recording it: the chain already shows it, and the second answers the first\'s outcome, not a refusal', async (kind) => {
    const buyer = await fundedBuyer('5');
    const req = requirementsFor(seller.payTo);
    let payload: PaymentPayload;
    if (kind === 'deposit') {
      const signer = toClientEvmSigner(buyer, testChain().publicClient as never);
      const config = new ChannelClientScheme(signer).buildChannelConfig(req);
      payload = envelope((await createBatchSettlementEIP3009DepositPayload(signer, 2, req, config, '50000', PRICE.toString())).payload as Record<string, unknown>, req);
    } else {
      const channel = await openChannel(buyer);
      const { balance } = await channelState(channel.channelId);
      payload = envelope({ type: 'refund', channelConfig: channel.config, voucher: await voucher(buyer, channel.channelId, PRICE), amount: balance.toString(), refundNonce: '0', claims: [] }, req);
    }
    const first = await post('settle', seller.sellerKey, payload, req);
    expect(first.body).toMatchObject({ success: true });
    // The first request as the second meets it: sent (the chain shows its deposit or refund), its outcome
    // not recorded yet. It records it a second later.
    const actions = server.app.db.collection('channel_actions');
    const record = await actions.findOne({ kind, txHash: first.body.transaction });
    await actions.updateOne({ _id: record!._id }, { $set: { status: 'sending' }, $unset: { answer: '' } });
    const recorded = new Promise((resolve) => setTimeout(resolve, 1_000)).then(() => actions.updateOne({ _id: record!._id }, { $set: { status: 'succeeded', answer: record!.answer } }));
    const second = await post('settle', seller.sellerKey, payload, req);
    await recorded;
    // Without waiting for the first, the second answered from the chain: an authorization used, or nothing to refund.
    expect(outcome(second.body)).toEqual({ success: true, transaction: first.body.transaction, errorReason: undefined, errorMessage: undefined });
  });

  it('nothing is signed or sent for a channel paying another seller: claims, refunds and settles of it are refused', async () => {
    const buyer = await fundedBuyer('5');
    const channel = await openChannel(buyer, 2);
    const other = await newSeller();
    const req = requirementsFor(other.payTo);
    const v = await voucher(buyer, channel.channelId, 2n * PRICE);
    const row = { voucher: { channel: channel.config, maxClaimableAmount: v.maxClaimableAmount }, signature: v.signature, totalClaimed: v.maxClaimableAmount };
    const before = await channelState(channel.channelId);
    const claim = await post('settle', other.sellerKey, envelope({ type: 'claim', claims: [row] }, req), req);
    expect(claim.body).toMatchObject({ success: false, errorReason: 'invalid_payment_requirements', transaction: '' });
    const refund = await post('settle', other.sellerKey, envelope({ type: 'refund', channelConfig: channel.config, voucher: v, amount: (8n * PRICE).toString(), refundNonce: '0', claims: [] }, req), req);
    expect(refund.body).toMatchObject({ success: false, errorReason: 'invalid_payment_requirements', transaction: '' });
    const sweep = await post('settle', other.sellerKey, envelope({ type: 'settle', receiver: seller.payTo, token: testChain().usdc }, req), req);
    expect(sweep.body).toMatchObject({ success: false, errorReason: 'invalid_payment_requirements' });
    expect(await channelState(channel.channelId)).toEqual(before);
  });

  it('a claim above a voucher\'s maximum is refused by the simulation, nothing sent; a settle with nothing claimed: nothing to settle', async () => {
    const buyer = await fundedBuyer('5');
    const channel = await openChannel(buyer);
    const req = requirementsFor(seller.payTo);
    const v = await voucher(buyer, channel.channelId, 2n * PRICE);
    const row = { voucher: { channel: channel.config, maxClaimableAmount: v.maxClaimableAmount }, signature: v.signature, totalClaimed: (3n * PRICE).toString() };
    const res = await post('settle', seller.sellerKey, envelope({ type: 'claim', claims: [row] }, req), req);
    expect(res.body).toMatchObject({ success: false, errorReason: 'invalid_batch_settlement_evm_claim_simulation_failed', transaction: '' });
    expect(await channelState(channel.channelId)).toMatchObject({ totalClaimed: 0n });
    const fresh = await newSeller();
    const req2 = requirementsFor(fresh.payTo);
    const sweep = await post('settle', fresh.sellerKey, envelope({ type: 'settle', receiver: fresh.payTo, token: testChain().usdc }, req2), req2);
    expect(sweep.body).toMatchObject({ success: false, errorReason: 'invalid_batch_settlement_evm_nothing_to_settle' });
  });
});

describe('deposits through /verify and /settle', () => {
  /** A deposit the official client signs for `buyer` to the seller: `amount` in, its first voucher for `max`. */
  async function depositOf(buyer: PrivateKeyAccount, amount: bigint, max: bigint, overrides: Partial<PaymentRequirements> = {}) {
    const req = { ...requirementsFor(seller.payTo), ...overrides };
    const signer = toClientEvmSigner(buyer, testChain().publicClient as never);
    const config = new ChannelClientScheme(signer).buildChannelConfig(req);
    const signed = await createBatchSettlementEIP3009DepositPayload(signer, 2, req, config, amount.toString(), max.toString());
    return { req, config, channelId: channelIdOf(config as ChannelConfig, 84532), payload: envelope(signed.payload as Record<string, unknown>, req) };
  }

  it('verified with the channel as it stands, then the same deposit settled twice at once: one transfer, one answer', async () => {
    const buyer = await fundedBuyer('1');
    const before = await usdcBalance(buyer.address);
    const { req, channelId, payload } = await depositOf(buyer, 50_000n, PRICE);
    const verified = await post('verify', seller.sellerKey, payload, req);
    expect(verified.body).toEqual({ isValid: true, payer: buyer.address, extra: { channelId, balance: '0', totalClaimed: '0', withdrawRequestedAt: 0, refundNonce: '0' } });
    const [a, b] = await Promise.all([post('settle', seller.sellerKey, payload, req), post('settle', seller.sellerKey, payload, req)]);
    // Both answers in one assertion: a failure shows the one that lost, with its errorReason and errorMessage.
    expect({ a: a.body, b: outcome(b.body) }).toMatchObject({
      a: { success: true, payer: buyer.address, amount: '50000', network: NETWORK, extra: { channelState: { channelId, balance: '50000', totalClaimed: '0' } } },
      b: { success: true, transaction: a.body.transaction, errorReason: undefined, errorMessage: undefined },
    });
    expect((await post('settle', seller.sellerKey, payload, req)).body.transaction).toBe(a.body.transaction);
    expect(await usdcBalance(buyer.address)).toBe(before - 50_000n);
    expect(await channelState(channelId)).toMatchObject({ balance: 50_000n });
  });

  it.each([
    ['more than the payer holds', async (buyer: PrivateKeyAccount) => depositOf(buyer, 2_000_000n, PRICE), 'invalid_batch_settlement_evm_insufficient_balance'],
    ['a first voucher above the deposit', async (buyer: PrivateKeyAccount) => depositOf(buyer, 5_000n, 6_000n), 'invalid_batch_settlement_evm_cumulative_exceeds_balance'],
    ['an authorization about to expire', async (buyer: PrivateKeyAccount) => depositOf(buyer, 5_000n, PRICE, { maxTimeoutSeconds: 3 }), 'invalid_batch_settlement_evm_payload_authorization_valid_before'],
    ['an amount other than the one signed', async (buyer: PrivateKeyAccount) => {
      const d = await depositOf(buyer, 5_000n, PRICE);
      (d.payload.payload as any).deposit.amount = '4000';
      return d;
    }, 'invalid_batch_settlement_evm_receive_authorization_signature'],
  ] as const)('refused, nothing moved: %s', async (_what, make, reason) => {
    const buyer = await fundedBuyer('1');
    const before = await usdcBalance(buyer.address);
    const { req, payload } = await make(buyer);
    expect((await post('verify', seller.sellerKey, payload, req)).body).toMatchObject({ isValid: false, invalidReason: reason, payer: buyer.address });
    expect((await post('settle', seller.sellerKey, payload, req)).body).toMatchObject({ success: false, errorReason: reason, transaction: '' });
    expect(await usdcBalance(buyer.address)).toBe(before);
  });
});
