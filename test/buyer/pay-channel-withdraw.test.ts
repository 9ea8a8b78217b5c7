// The wallet takes a payment channel's deposit back without its seller (x402 batch-settlement's timed
// withdrawal): when the seller refuses the cooperative refund, or is gone, the owner key (the channel's
// payerAuthorizer, its gas sent by the relayer just before) starts the withdrawal of what the accepted
// vouchers did not commit, the seller's sweep claims its vouchers meanwhile, and once the channel's delay
// has passed on chain the buyer's idle round finalizes it. The chain is this file's own (its clock moves
// 15 minutes per withdrawal), with our seller middleware's route sold by channel on the same backend.
import { CHANNEL_WITHDRAW_DELAY } from 'agentgate-x402-wire';
import { randomBytes } from 'node:crypto';
import express from 'express';
import { createPublicClient, createWalletClient, http, parseUnits, toHex, type Address, type Hex, type PublicClient } from 'viem';
import { generatePrivateKey, nonceManager, privateKeyToAccount } from 'viem/accounts';
import { baseSepolia } from 'viem/chains';
import { paymentMiddleware } from '../../adapters/express.js';
import { BATCH_SETTLEMENT_ADDRESS, batchSettlementAbi, readChannelState } from '../../server/payments/schemes/batch-settlement/evm/chain.js';
import { balanceOf, usdcAbi } from '../../server/chain/usdc.js';
import { startDevChain, type DevChain } from '../../server/dev/chain/dev-chain.js';
import { DEV_BUYERS } from '../../server/dev/chain/dev-accounts.js';
import { TOOLS } from '../../server/tools.js';
import { buyerVoucherId } from '../../server/buyer/schemes/batch-settlement/evm/records.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { serve, setUpSeller, type RunningApp } from '../interop/seller.js';
import { createMandate, fundedAgent, pay } from './support.js';
import { vouchersOnceCaptured } from '../support/channel-captures.js';

const PRICE = 1_000n; // $0.001 a call
const WITHDRAW_DELAY = CHANNEL_WITHDRAW_DELAY; // what our middleware offers (the contract's minimum)
/** Shared with the second backend process (wallet keys are sealed under it). */
const MASTER_KEY = randomBytes(32).toString('hex');

let chain: DevChain;
let client: PublicClient;
let server: TestServer;
let seller: Awaited<ReturnType<typeof setUpSeller>>;
let shop: RunningApp;
const ownerAccount = privateKeyToAccount(DEV_BUYERS[1]!.privateKey, { nonceManager });

async function fundedRelayer(): Promise<Hex> {
  const key = generatePrivateKey();
  await client.request({ method: 'anvil_setBalance' as never, params: [privateKeyToAccount(key).address, toHex(parseUnits('100', 18))] as never });
  return key;
}
const backendOnChain = async (overrides: Record<string, string> = {}) => startTestServer({
  MASTER_KEY, CHANNEL_SWEEP_EVERY_MS: '600000', CHAIN_RPC_URL: chain.rpcUrl, USDC_ADDRESS: chain.usdcAddress, WALLET_FACTORY_ADDRESS: chain.factoryAddress,
  RELAYER_PRIVATE_KEY: await fundedRelayer(), ...overrides,
});
/** A wallet's owner sends it USDC on this test's chain, from a dev account that holds some. */
async function sendOnChain(to: Address, amount: bigint): Promise<void> {
  const owner = createWalletClient({ account: ownerAccount, chain: { ...baseSepolia, rpcUrls: { default: { http: [chain.rpcUrl] } } }, transport: http(chain.rpcUrl) });
  const hash = await owner.writeContract({ address: chain.usdcAddress, abi: usdcAbi, functionName: 'transfer', args: [to, amount] });
  expect((await client.waitForTransactionReceipt({ hash })).status).toBe('success');
}
/** Our middleware selling GET /weather by channel, paid through this backend (registered with the seller's org). */
async function channelShop() {
  const app = express();
  app.use(paymentMiddleware({ backendUrl: server.url, apiKey: seller.sellerKey, routes: { 'GET /weather': { price: '$0.001', scheme: 'batch-settlement', description: 'Weather, per call' } } }));
  app.get('/weather', (_req, res) => { res.json({ weather: 'sunny' }); });
  const running = await serve(app);
  const registered = await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: `${running.url}/weather`, priceUsdc: '0.001' } });
  expect(registered.status).toBe(201);
  return running;
}

beforeAll(async () => {
  chain = await startDevChain({ mintAmountUsdc: '1000' });
  client = createPublicClient({ chain: { ...baseSepolia, rpcUrls: { default: { http: [chain.rpcUrl] } } }, transport: http(chain.rpcUrl), pollingInterval: 100 }) as PublicClient;
  // The seller's sweep runs when a test asks for it, never on its own.
  server = await backendOnChain();
  seller = await setUpSeller(server);
  shop = await channelShop();
}, 120_000);
afterAll(async () => {
  await shop?.close();
  await server?.close();
  await chain?.stop();
});

const usdcBalance = (account: Address) => balanceOf({ client: client as never, token: chain.usdcAddress, account });
const channelState = (channelId: string) => readChannelState(client as never, channelId as Hex);
const pendingOnChain = async (channelId: string) => (await client.readContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, functionName: 'pendingWithdrawals', args: [channelId as Hex] }))[0];
const initiated = (channelId: string) => client.getContractEvents({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, eventName: 'WithdrawInitiated', args: { channelId: channelId as Hex }, fromBlock: 0n });
const deposits = (channelId: string) => client.getContractEvents({ address: BATCH_SETTLEMENT_ADDRESS, abi: batchSettlementAbi, eventName: 'Deposited', args: { channelId: channelId as Hex }, fromBlock: 0n });
const withdraw = (key: string, channelId: string, on = server) => on.request('POST', `/v0/wallet/channels/${channelId}/withdraw`, { key });
const listed = async (key: string, channelId: string) => (await server.request('GET', '/v0/wallet/channels', { key })).body.channels.find((c: any) => c.channelId === channelId);
const logsOf = async (key: string, action: string) => (await server.request('GET', '/v0/logs?limit=100', { key })).body.logs.filter((l: any) => l.action === action);
/**
 * Runs `during` with the chain's clock `seconds` ahead, then sets it back to the wall clock: the backend
 * signs deposit authorizations by its own clock, as on Base, where the chain's clock is the wall clock.
 */
async function withChainTimeAhead<T>(seconds: number, during: () => Promise<T>): Promise<T> {
  await client.request({ method: 'evm_increaseTime' as never, params: [toHex(seconds)] as never });
  await client.request({ method: 'evm_mine' as never, params: [] as never });
  try {
    return await during();
  } finally {
    await client.request({ method: 'evm_setTime' as never, params: [Math.floor(Date.now() / 1000)] as never });
    await client.request({ method: 'evm_mine' as never, params: [] as never });
  }
}
let rounds = 0;
const buyerRound = (idleMs = 3_600_000) => server.app.buyer.channels.refundIdle({ idleMs, round: `withdraw-test-${process.pid}-${Date.now()}-${++rounds}` });
/** The seller's sweep, claiming (its idle refund far off, so a withdrawing channel is claimed, not refunded). */
const sellerSweep = () => server.app.payments.batchSettlement.sweep.run(
  { everyMs: 1, idleRefundMs: 10 * 86_400_000, round: `seller-test-${process.pid}-${Date.now()}-${++rounds}` }, (orgId) => server.app.payments.acceptance.accepting(orgId));

/** An agent that paid `calls` calls through a new channel (ten calls deposited): its channel id. */
async function agentWithChannel(calls: number, url = `${shop.url}/weather`, usdc = '1') {
  const agent = await fundedAgent(server, usdc, sendOnChain);
  await createMandate(server, agent.key);
  const before = await usdcBalance(agent.address);
  const first = await pay(server, agent.key, { url });
  expect([first.status, first.body.message]).toEqual([200, undefined]);
  const channelId: string = first.body.cost.channel.channelId;
  for (let i = 2; i <= calls; i++) expect((await pay(server, agent.key, { url })).status).toBe(200);
  return { agent, channelId, before };
}

describe('taking a channel back from a seller that does not refund', () => {
  it('the wallet starts the withdrawal itself; the seller claims its calls first; after the delay the round finalizes and exactly the rest comes back; the channel takes deposits again', async () => {
    const { agent, channelId, before } = await agentWithChannel(3);
    expect(await usdcBalance(agent.address)).toBe(before - 10n * PRICE);
    // Our middleware takes no refund request from a buyer: the cooperative refund is refused.
    const asked = await server.request('POST', `/v0/wallet/channels/${channelId}/refund`, { key: agent.key });
    expect([asked.status, asked.body.error]).toEqual([502, 'settle_failed']);

    const started = await withdraw(agent.key, channelId);
    expect(started.status).toBe(200);
    expect(started.body).toMatchObject({
      ok: true, channelId, status: 'pending', startedBy: 'request', amountUsdc: '0.007',
      txHash: expect.stringMatching(/^0x[0-9a-f]{64}$/), fundingTxHash: expect.stringMatching(/^0x[0-9a-f]{64}$/), finalizeTxHash: null, withdrawnUsdc: null,
    });
    expect(new Date(started.body.finalizableAt).getTime() - new Date(started.body.startedAt).getTime()).toBe(WITHDRAW_DELAY * 1000);
    expect(await pendingOnChain(channelId)).toBe(7n * PRICE);

    // The relayer gave the owner key its gas; the owner key sent the start.
    const wallet = (await server.app.db.collection('wallets').findOne({ identityId: agent.owner.identityId }))!;
    const funding = await client.getTransaction({ hash: started.body.fundingTxHash });
    expect(funding.from.toLowerCase()).toBe(privateKeyToAccount(server.config.RELAYER_PRIVATE_KEY as Hex).address.toLowerCase());
    expect(funding.to!.toLowerCase()).toBe(wallet.ownerAddress.toLowerCase());
    expect(funding.value).toBeGreaterThan(0n);
    const start = await client.getTransaction({ hash: started.body.txHash });
    expect([start.from.toLowerCase(), start.to!.toLowerCase()]).toEqual([wallet.ownerAddress.toLowerCase(), BATCH_SETTLEMENT_ADDRESS.toLowerCase()]);
    const [startLog] = await logsOf(agent.key, 'payments.channel_withdrawal_started');
    expect(startLog).toMatchObject({ targetId: channelId, metadata: { txHash: started.body.txHash, fundingTxHash: started.body.fundingTxHash, amountUsdcRaw: '7000', startedBy: 'request' } });

    // A paid call on the withdrawing channel is refused, saying when the withdrawal finishes; nothing moves.
    const refused = await pay(server, agent.key, { url: `${shop.url}/weather` });
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ ok: false, error: 'channel_withdrawal_pending' });
    expect(refused.body.message).toContain(started.body.finalizableAt);
    expect(await usdcBalance(agent.address)).toBe(before - 10n * PRICE);
    expect(await deposits(channelId)).toHaveLength(1);
    expect((await server.app.db.collection('buyer_channel_vouchers').find({ channelId }).toArray()).map((v) => v.cumulative).sort()).toEqual(['1000', '2000', '3000']);
    expect((await server.request('GET', '/v0/payments/mandates', { key: agent.key })).body.mandates[0]).toMatchObject({ spentTodayUsdc: '0.003', callCount: 3 });
    expect(await listed(agent.key, channelId)).toMatchObject({ withdrawalPending: true, withdrawal: { status: 'pending', amountUsdc: '0.007', finalizableAt: started.body.finalizableAt, txHash: started.body.txHash } });

    // The seller's sweep claims a withdrawing channel's vouchers at once.
    await vouchersOnceCaptured(server.app.db, channelId);
    expect((await sellerSweep())!.claimed).toBeGreaterThanOrEqual(1);
    expect(await channelState(channelId)).toMatchObject({ balance: 10n * PRICE, totalClaimed: 3n * PRICE });

    // Not before the delay has passed on the chain's clock.
    await buyerRound();
    expect(await listed(agent.key, channelId)).toMatchObject({ withdrawal: { status: 'pending' } });
    expect((await withChainTimeAhead(WITHDRAW_DELAY + 1, buyerRound))!.withdrawalsFinished).toBeGreaterThanOrEqual(1);

    expect(await usdcBalance(agent.address)).toBe(before - 3n * PRICE);
    expect(await channelState(channelId)).toMatchObject({ balance: 3n * PRICE, totalClaimed: 3n * PRICE, withdrawRequestedAt: 0 });
    const done = await listed(agent.key, channelId);
    expect(done).toMatchObject({
      withdrawalPending: false, refundedUsdc: '0.007', balanceUsdc: '0.003', availableUsdc: '0',
      withdrawal: { status: 'finalized', withdrawnUsdc: '0.007', finalizeTxHash: expect.stringMatching(/^0x[0-9a-f]{64}$/) },
    });
    const [withdrawnLog] = await logsOf(agent.key, 'payments.channel_withdrawn');
    expect(withdrawnLog).toMatchObject({ targetId: channelId, metadata: { txHash: done.withdrawal.finalizeTxHash, withdrawnUsdcRaw: '7000', requestedUsdcRaw: '7000' } });
    expect(withdrawnLog.metadata.fundingTxHash === null || /^0x[0-9a-f]{64}$/.test(withdrawnLog.metadata.fundingTxHash)).toBe(true);
    const finalize = await client.getTransaction({ hash: done.withdrawal.finalizeTxHash });
    expect(finalize.from.toLowerCase()).toBe(wallet.ownerAddress.toLowerCase());

    // The channel is the wallet's again: the next call deposits anew.
    const again = await pay(server, agent.key, { url: `${shop.url}/weather` });
    expect(again.body).toMatchObject({ status: 200, txHash: expect.stringMatching(/^0x[0-9a-f]{64}$/), cost: { channel: { channelId, cumulativeUsdc: '0.004', depositUsdc: '0.01' } } });
    expect(await deposits(channelId)).toHaveLength(2);
  });

  it('a seller that is gone: the idle round starts the withdrawal by itself and finishes it after the delay', async () => {
    const gone = await channelShop();
    const { agent, channelId, before } = await agentWithChannel(2, `${gone.url}/weather`);
    await gone.close();

    const round = await buyerRound(0);
    expect(round!.withdrawalsStarted).toBeGreaterThanOrEqual(1);
    const channel = await listed(agent.key, channelId);
    expect(channel).toMatchObject({ withdrawalPending: true, withdrawal: { status: 'pending', startedBy: 'idle_round', amountUsdc: '0.008' } });
    expect(await pendingOnChain(channelId)).toBe(8n * PRICE);
    const [startLog] = await logsOf(agent.key, 'payments.channel_withdrawal_started');
    expect(startLog).toMatchObject({ targetId: channelId, metadata: { txHash: channel.withdrawal.txHash, fundingTxHash: channel.withdrawal.fundingTxHash, startedBy: 'idle_round' } });

    // The seller's backend still claims its calls (its sweep, not its app); then the delay passes.
    await vouchersOnceCaptured(server.app.db, channelId);
    await sellerSweep();
    expect(await channelState(channelId)).toMatchObject({ totalClaimed: 2n * PRICE });
    expect((await withChainTimeAhead(WITHDRAW_DELAY + 1, buyerRound))!.withdrawalsFinished).toBeGreaterThanOrEqual(1);
    expect(await usdcBalance(agent.address)).toBe(before - 2n * PRICE);
    expect(await listed(agent.key, channelId)).toMatchObject({ withdrawalPending: false, refundedUsdc: '0.008', withdrawal: { status: 'finalized', withdrawnUsdc: '0.008' } });
  });

  it('one withdrawal at a time: two concurrent requests on two backend processes start exactly one, and a later one is refused while it is pending', async () => {
    const { agent, channelId } = await agentWithChannel(2);
    const second = await backendOnChain({ MONGODB_DB: server.config.MONGODB_DB });
    try {
      const answers = await Promise.all([withdraw(agent.key, channelId, server), withdraw(agent.key, channelId, second)]);
      // Each answer is the start, a refusal because the other is starting it, or, from a process that
      // cannot send transactions yet (it has just started and holds no relayer lease), a clear 503 that
      // started nothing. Never two starts.
      for (const a of answers) {
        expect([200, 409, 503]).toContain(a.status);
        if (a.status === 409) expect(a.body).toMatchObject({ error: 'withdrawal_pending', status: 409 });
        if (a.status === 503) expect(['relayer_unavailable', 'wallet_unavailable']).toContain(a.body.error);
      }
      expect(answers.filter((a) => a.status === 200).length).toBeLessThanOrEqual(1);
      // A 503 that won the insert gave the start back: asked again of the process that can send, it starts.
      if (!answers.some((a) => a.status === 200)) expect((await withdraw(agent.key, channelId, server)).status).toBe(200);
    } finally {
      await second.stop();
    }
    expect(await initiated(channelId)).toHaveLength(1);
    expect(await server.app.db.collection('buyer_channel_withdrawals').countDocuments({ channelId })).toBe(1);
    expect(await logsOf(agent.key, 'payments.channel_withdrawal_started')).toHaveLength(1);

    const again = await withdraw(agent.key, channelId);
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({ error: 'withdrawal_pending', withdrawal: { status: 'pending', amountUsdc: '0.008' } });
    expect(again.body.message).toContain(again.body.withdrawal.finalizableAt);
    expect(await initiated(channelId)).toHaveLength(1);
  });

  it('refuses clearly: another identity\'s channel (404), a malformed id (400), no payments:spend (403), a call still out (409), nothing left above the vouchers (422); the MCP tool starts one', async () => {
    const { agent, channelId } = await agentWithChannel(1);
    const other = await fundedAgent(server, '0', sendOnChain);
    expect((await withdraw(other.key, channelId)).status).toBe(404);
    const malformed = await withdraw(agent.key, '0x1234');
    expect([malformed.status, malformed.body.error]).toEqual([400, 'validation_error']);

    // A call out on the channel: its voucher decides what is committed.
    const vouchers = server.app.db.collection('buyer_channel_vouchers');
    const last = (await vouchers.findOne({ channelId }))!;
    const outId = buyerVoucherId(channelId, (last.seq ?? 1) + 1);
    await vouchers.insertOne({ ...last, _id: outId as never, seq: (last.seq ?? 1) + 1, cumulative: '2000', status: 'pending', createdAt: new Date() });
    const busy = await withdraw(agent.key, channelId);
    expect([busy.status, busy.body.error]).toEqual([409, 'channel_busy']);
    await vouchers.deleteOne({ _id: outId as never });

    // The vouchers commit the whole deposit: nothing to withdraw.
    const small = await agentWithChannel(2, `${shop.url}/weather`, '0.002');
    const nothing = await withdraw(small.agent.key, small.channelId);
    expect([nothing.status, nothing.body.error]).toEqual([422, 'nothing_to_withdraw']);
    expect(await initiated(small.channelId)).toHaveLength(0);

    const tool = TOOLS.find((t) => t.name === 'payments_withdraw_channel')!;
    const principal = { tier: 'identity' as const, keyId: 'k', orgId: agent.org_id, identityId: agent.identity.identityId, scopes: new Set(['payments:spend']) };
    expect(tool.scope).toBe('payments:spend');
    const byTool = await tool.run(server.app, principal, tool.input.parse({ id: channelId })) as any;
    expect(byTool).toMatchObject({ ok: true, channelId, status: 'pending', amountUsdc: '0.009' });
    expect(await pendingOnChain(channelId)).toBe(9n * PRICE);

    await server.request('PATCH', `/v0/platform/identities/${other.identity.identityId}`, { key: other.platform_key, body: { removeScopes: ['payments:spend'] } });
    expect((await withdraw(other.key, channelId)).status).toBe(403);
  });
});
