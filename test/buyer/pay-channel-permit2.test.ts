// payments_pay through a payment channel whose seller asks for Permit2 deposits (x402 batch-settlement,
// `extra.assetTransferMethod: "permit2"`): our own seller middleware's route with `assetTransferMethod:
// 'permit2'`, on our backend. The wallet approves Permit2 once (relayer-sent, logged), the first call
// deposits through the Permit2 deposit collector, later calls are vouchers only, a top-up needs no second
// approval, a refused deposit moves nothing, and the mandate counts calls as for ERC-3009 deposits.
import express from 'express';
import { decodeFunctionData, getAddress, type Hex } from 'viem';
import { paymentMiddleware } from '../../adapters/express.js';
import { BATCH_SETTLEMENT_ADDRESS, batchSettlementAbi, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS, readChannelState, type ChannelDepositPermit } from '../../server/payments/schemes/batch-settlement/evm/chain.js';
import { permit2Allowance, permit2NonceUsed } from '../../server/chain/permit2.js';
import { authorizationState, type Authorization } from '../../server/chain/usdc.js';
import { chooseOffer, readChallenge } from '../../server/buyer/challenge.js';
import { decodeBase64Json, encodeBase64Json } from 'agentgate-x402-wire';
import { sendUsdc, testChain, usdcBalance } from '../support/chain.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { serve, setUpSeller, type RunningApp } from '../interop/seller.js';
import { createMandate, fundedAgent, pay } from './support.js';

const PRICE = 1_000n; // $0.001 a call

let server: TestServer;
let seller: Awaited<ReturnType<typeof setUpSeller>>;
let shop: RunningApp;
/** The deposit permits the wallet signed (the real signer, observed). */
let permits: ChannelDepositPermit[] = [];
let receiveAuthorizations: Authorization[] = [];
beforeAll(async () => {
  server = await startTestServer({ CHANNEL_SWEEP_EVERY_MS: '600000' });
  seller = await setUpSeller(server);
  const app = express();
  const channelRoute = { price: '$0.001', scheme: 'batch-settlement' as const, assetTransferMethod: 'permit2' as const, description: 'Weather, per call' };
  // The /unlisted routes are no registered endpoint: the backend refuses their calls, deposit included.
  const erc3009Route = { price: '$0.001', scheme: 'batch-settlement' as const, description: 'Weather, per call' };
  app.use(paymentMiddleware({ backendUrl: server.url, apiKey: seller.sellerKey, routes: { 'GET /weather': channelRoute, 'GET /unlisted': channelRoute, 'GET /unlisted-erc3009': erc3009Route } }));
  app.get(['/weather', '/unlisted', '/unlisted-erc3009'], (_req, res) => { res.json({ weather: 'sunny' }); });
  shop = await serve(app);
  const registered = await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: `${shop.url}/weather`, priceUsdc: '0.001' } });
  expect(registered.status).toBe(201);
  // Observes the deposit authorizations the wallet signs, signing them as always.
  const wallets = server.app.wallets;
  const sign = wallets.signChannelDepositPermit.bind(wallets);
  wallets.signChannelDepositPermit = (wallet, permit) => {
    permits.push(permit);
    return sign(wallet, permit);
  };
  const signReceive = wallets.signReceiveAuthorization.bind(wallets);
  wallets.signReceiveAuthorization = (wallet, authorization) => {
    receiveAuthorizations.push(authorization);
    return signReceive(wallet, authorization);
  };
}, 60_000);
beforeEach(() => { permits = []; receiveAuthorizations = []; });
afterAll(async () => {
  await shop?.close();
  await server?.close();
});

const weather = () => `${shop.url}/weather`;
const { publicClient, usdc } = testChain();
const deposits = (channelId: string) => publicClient.getContractEvents({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, eventName: 'Deposited', args: { channelId: channelId as Hex }, fromBlock: 0n });
const buyerVouchers = async (channelId: string) => (await server.app.db.collection('buyer_channel_vouchers').find({ channelId }).toArray()).map((v) => [BigInt(v.cumulative), v.status] as const).sort((a, b) => (a[0] < b[0] ? -1 : 1));
const approvalsOf = (identityId: string) => server.app.db.collection('activity_logs').find({ identityId, action: 'wallet.permit2_approved' }).toArray();
/** The collector a deposit transaction named (the batch-settlement contract's deposit(config, amount, collector, data)). */
async function collectorOf(txHash: Hex) {
  const tx = await publicClient.getTransaction({ hash: txHash });
  expect(getAddress(tx.to!)).toBe(BATCH_SETTLEMENT_ADDRESS);
  const call = decodeFunctionData({ abi: batchSettlementAbi, data: tx.input });
  expect(call.functionName).toBe('deposit');
  return getAddress((call.args as readonly unknown[])[2] as Hex);
}
const mandateOf = async (key: string) => (await server.request('GET', '/v0/payments/mandates', { key })).body.mandates[0];

describe('payments_pay through a channel whose seller asks for Permit2 deposits', () => {
  it('the route\'s 402 asks for Permit2 deposits', async () => {
    const res = await fetch(weather());
    expect(res.status).toBe(402);
    const required = decodeBase64Json(res.headers.get('payment-required')!);
    expect(required.ok && (required.value as any).accepts).toEqual([expect.objectContaining({ scheme: 'batch-settlement', amount: PRICE.toString(), extra: expect.objectContaining({ assetTransferMethod: 'permit2' }) })]);
  });

  it('approves Permit2 once (relayer-sent, logged), deposits through the Permit2 collector, then pays by vouchers only', async () => {
    const agent = await fundedAgent(server, '1');
    await createMandate(server, agent.key);
    const before = await usdcBalance(agent.address);
    expect(await permit2Allowance(publicClient as never, usdc, agent.address)).toBe(0n);

    const first = await pay(server, agent.key, { url: weather() });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({
      ok: true, paid: true, status: 200, content: { weather: 'sunny' }, payer: agent.address, recipient: seller.payTo,
      cost: { amountUsdc: '0.001', scheme: 'batch-settlement', channel: { cumulativeUsdc: '0.001', depositUsdc: '0.01' } },
      txHash: expect.stringMatching(/^0x[0-9a-f]{64}$/),
    });
    const channelId: string = first.body.cost.channel.channelId;
    // The deposit went through the Permit2 collector, by the permit the wallet signed: its nonce is spent.
    expect(await collectorOf(first.body.txHash)).toBe(PERMIT2_DEPOSIT_COLLECTOR_ADDRESS);
    expect(permits).toHaveLength(1);
    expect(permits[0]).toMatchObject({ from: agent.address, token: usdc, amount: 10n * PRICE, spender: PERMIT2_DEPOSIT_COLLECTOR_ADDRESS, channelId });
    expect(permits[0]!.deadline).toBeLessThanOrEqual(BigInt(Math.floor(Date.now() / 1000) + 300));
    expect(await permit2NonceUsed(publicClient as never, agent.address, permits[0]!.nonce)).toBe(true);
    // The one-time approval: on the chain, on the wallet record, in the activity log.
    expect(await permit2Allowance(publicClient as never, usdc, agent.address)).toBeGreaterThan(10n ** 30n);
    const wallet = await server.app.db.collection('wallets').findOne({ identityId: agent.owner.identityId });
    expect(wallet?.permit2ApprovalTx).toMatch(/^0x[0-9a-f]{64}$/);
    expect(await approvalsOf(agent.owner.identityId)).toEqual([expect.objectContaining({ metadata: expect.objectContaining({ txHash: wallet?.permit2ApprovalTx }) })]);

    for (let i = 2; i <= 4; i++) {
      const res = await pay(server, agent.key, { url: weather() });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ content: { weather: 'sunny' }, txHash: null, cost: { channel: { channelId, cumulativeUsdc: `0.00${i}`, depositUsdc: '0' } } });
    }
    expect(permits).toHaveLength(1);
    expect(await deposits(channelId)).toHaveLength(1);
    expect(await usdcBalance(agent.address)).toBe(before - 10n * PRICE);
    expect(await readChannelState(publicClient as never, channelId as Hex)).toMatchObject({ balance: 10n * PRICE, totalClaimed: 0n });
    expect(await buyerVouchers(channelId)).toEqual([1n, 2n, 3n, 4n].map((n) => [n * PRICE, 'accepted']));

    // The mandate counts the calls, not the deposit, as for an ERC-3009 deposit.
    expect(await mandateOf(agent.key)).toMatchObject({ spentTodayUsdc: '0.004', callCount: 4 });
    const activity = await server.request('GET', '/v0/payments/activity', { key: agent.key });
    expect(activity.body.activity.map((a: any) => [a.scheme, a.status, a.channel.cumulativeUsdcRaw, a.channel.depositUsdcRaw])).toEqual([
      ['batch-settlement', 'settled', '4000', '0'], ['batch-settlement', 'settled', '3000', '0'], ['batch-settlement', 'settled', '2000', '0'], ['batch-settlement', 'settled', '1000', '10000'],
    ]);
  });

  it('a top-up deposits through Permit2 again without a second approval', async () => {
    const agent = await fundedAgent(server, '0.002');
    await createMandate(server, agent.key);
    const first = await pay(server, agent.key, { url: weather() });
    expect(first.body.cost.channel.depositUsdc).toBe('0.002'); // all the wallet had
    const channelId: string = first.body.cost.channel.channelId;
    expect((await pay(server, agent.key, { url: weather() })).status).toBe(200);
    expect((await pay(server, agent.key, { url: weather() })).body).toMatchObject({ ok: false, error: 'balance_insufficient' });

    await sendUsdc(agent.address, 1_000_000n); // the owner tops the wallet up
    const topUp = await pay(server, agent.key, { url: weather() });
    expect(topUp.body).toMatchObject({ txHash: expect.stringMatching(/^0x[0-9a-f]{64}$/), cost: { channel: { channelId, cumulativeUsdc: '0.003', depositUsdc: '0.01' } } });
    expect(await collectorOf(topUp.body.txHash)).toBe(PERMIT2_DEPOSIT_COLLECTOR_ADDRESS);
    expect(await deposits(channelId)).toHaveLength(2);
    expect(permits.map((p) => p.amount)).toEqual([2n * PRICE, 10n * PRICE]);
    expect(await approvalsOf(agent.owner.identityId)).toHaveLength(1);
    expect(await mandateOf(agent.key)).toMatchObject({ spentTodayUsdc: '0.003', callCount: 3 });
  });

  it('a deposit the seller refuses moves nothing: no deposit, the permit unused and short-lived, the price back on the mandate', async () => {
    const agent = await fundedAgent(server, '1');
    await createMandate(server, agent.key);
    const before = await usdcBalance(agent.address);

    const refused = await pay(server, agent.key, { url: `${shop.url}/unlisted` });
    expect(refused.body).toMatchObject({ ok: false, error: 'settle_failed', message: expect.stringContaining('resource_not_registered') });
    expect(permits).toHaveLength(1);
    const { channelId, nonce, deadline } = permits[0]!;
    expect(await usdcBalance(agent.address)).toBe(before);
    expect(await deposits(channelId)).toEqual([]);
    expect(await readChannelState(publicClient as never, channelId)).toMatchObject({ balance: 0n });
    // Left to expire (the relayer cannot retire a Permit2 nonce for the account): soon, and unused.
    expect(await permit2NonceUsed(publicClient as never, agent.address, nonce)).toBe(false);
    expect(deadline).toBeLessThanOrEqual(BigInt(Math.floor(Date.now() / 1000) + 300));
    // Nothing counted: no voucher kept, the record failed, the reserved price released.
    expect(await buyerVouchers(channelId.toLowerCase())).toEqual([]);
    const [record] = await server.app.db.collection('outgoing_payments').find({ identityId: agent.owner.identityId }).toArray();
    expect(record).toMatchObject({ status: 'failed', scheme: 'batch-settlement', channel: { depositUsdcRaw: '10000' } });
    expect(await mandateOf(agent.key)).toMatchObject({ spentTodayUsdc: '0', callCount: 0 });

    // The registered route is paid from the same wallet as usual.
    const paid = await pay(server, agent.key, { url: weather() });
    expect(paid.body).toMatchObject({ ok: true, cost: { channel: { cumulativeUsdc: '0.001', depositUsdc: '0.01' } } });
    expect(await usdcBalance(agent.address)).toBe(before - 10n * PRICE);
  });

  it('an ERC-3009 deposit refused the same way is cancelled on chain (what a Permit2 one cannot be)', async () => {
    const agent = await fundedAgent(server, '1');
    await createMandate(server, agent.key);
    const before = await usdcBalance(agent.address);
    const refused = await pay(server, agent.key, { url: `${shop.url}/unlisted-erc3009` });
    expect(refused.body).toMatchObject({ ok: false, error: 'settle_failed', message: expect.stringContaining('resource_not_registered') });
    expect(permits).toEqual([]);
    expect(receiveAuthorizations).toHaveLength(1);
    expect(receiveAuthorizations[0]).toMatchObject({ from: agent.address, value: 10n * PRICE });
    // The nonce is spent by the cancellation: the signed authorization can never deposit.
    expect(await authorizationState({ client: publicClient as never, token: usdc, authorizer: agent.address, nonce: receiveAuthorizations[0]!.nonce })).toBe(true);
    expect(await usdcBalance(agent.address)).toBe(before);
    expect(await mandateOf(agent.key)).toMatchObject({ spentTodayUsdc: '0', callCount: 0 });
  });
});

describe('choosing a channel offer by its deposit method', () => {
  const ours = { network: 'base-sepolia', caip2: 'eip155:84532', usdc: testChain().usdc };
  const resource = { url: 'https://seller.example/weather', description: '', mimeType: 'application/json' };
  const channel = {
    scheme: 'batch-settlement', network: ours.caip2, amount: '1000', asset: ours.usdc, payTo: '0x1111111111111111111111111111111111111111', maxTimeoutSeconds: 60,
    extra: { name: 'USDC', version: '2', receiverAuthorizer: '0x2222222222222222222222222222222222222222', withdrawDelay: 900 },
  };
  const permit2Channel = { ...channel, extra: { ...channel.extra, assetTransferMethod: 'permit2' } };
  const exact = { scheme: 'exact', network: ours.caip2, amount: '1000', asset: ours.usdc, payTo: channel.payTo, maxTimeoutSeconds: 60, extra: { name: 'USDC', version: '2' } };
  const challengeOf = (...accepts: unknown[]) => readChallenge({
    status: 402, url: resource.url, body: Buffer.from(''), bodyText: '',
    headers: { 'payment-required': encodeBase64Json({ x402Version: 2, resource, accepts }) },
  })!;

  it('pays a Permit2 channel before exact, and an ERC-3009 channel before a Permit2 one (no approval to send)', () => {
    const method = (choice: ReturnType<typeof chooseOffer>) => (choice.ok && choice.offer.scheme === 'batch-settlement' ? choice.offer.requirement.extra.assetTransferMethod ?? 'eip3009' : choice.ok && choice.offer.scheme);
    expect(method(chooseOffer(challengeOf(exact, permit2Channel), ours))).toBe('permit2');
    expect(method(chooseOffer(challengeOf(permit2Channel, channel), ours))).toBe('eip3009');
    expect(method(chooseOffer(challengeOf(channel, permit2Channel), ours))).toBe('eip3009');
  });
});

describe('seller middleware: assetTransferMethod on a channel route', () => {
  const options = (route: Record<string, unknown>) => ({ backendUrl: server.url, apiKey: seller.sellerKey, routes: { 'GET /x': { price: '$0.01', ...route } as never } });
  it('takes permit2 on batch-settlement and exact routes, and refuses it on auth-capture at start-up', () => {
    expect(() => paymentMiddleware(options({ scheme: 'batch-settlement', assetTransferMethod: 'permit2' }))).not.toThrow();
    expect(() => paymentMiddleware(options({ scheme: 'batch-settlement', price: { upto: '$0.01' }, assetTransferMethod: 'permit2' }))).not.toThrow();
    expect(() => paymentMiddleware(options({ scheme: 'auth-capture', assetTransferMethod: 'permit2' }))).toThrow(/for exact routes and batch-settlement routes/);
    expect(() => paymentMiddleware(options({ price: { upto: '$0.50' }, assetTransferMethod: 'permit2' }))).toThrow(/for exact routes and batch-settlement routes/);
  });
});
