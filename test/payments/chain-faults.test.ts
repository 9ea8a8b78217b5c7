// Settlement through RPC nodes that fail, on a chain that mines every second: a node that takes the
// settlement and never answers, a send lost on the way, every node gone while a payment settles (the
// answer is bounded, the settlement goes on, the payment-identifier retry gets the final result), and a
// chain that cannot be asked at all (503, nothing recorded). A fault-injecting proxy stands in front of
// a real anvil.
import type { Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { DEV_USDC_NAME } from '../../server/dev/chain/dev-chain.js';
import { DEV_BUYERS } from '../../server/dev/chain/dev-accounts.js';
import type { Authorization } from '../../server/chain/usdc.js';
import { startRpcProxy, type RpcProxy } from '../support/rpc-proxy.js';
import { paymentHeaderV1, signAuthorization } from '../support/chain.js';
import { redeem, setUpSeller, type TestSeller } from '../support/payments.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { counterValue, useBlockTimeChain } from '../support/block-time-chain.js';

const chainUnderTest = useBlockTimeChain();
const { balanceOf } = chainUnderTest;

/** A backend whose RPC URLs are the given proxies (in that order), on its own fresh relayer. */
async function serverBehind(proxies: RpcProxy[], overrides: Record<string, string> = {}): Promise<TestServer> {
  const relayerKey = generatePrivateKey();
  await chainUnderTest.fundGas(relayerKey);
  const chain = chainUnderTest.chain;
  return startTestServer({
    TRUST_PROXY: 'true', CHAIN_RPC_URL: proxies[0]!.url, ...(proxies.length > 1 ? { CHAIN_RPC_URLS: proxies.slice(1).map((p) => p.url).join(',') } : {}),
    CHAIN_RPC_TIMEOUT_MS: '1000', USDC_ADDRESS: chain.usdcAddress, WALLET_FACTORY_ADDRESS: chain.factoryAddress, RELAYER_PRIVATE_KEY: relayerKey,
    ...overrides,
  });
}

const buyer: PrivateKeyAccount = privateKeyToAccount(DEV_BUYERS[5]!.privateKey);
const sign = (seller: TestSeller) => signAuthorization(buyer, { to: seller.payTo, value: 10_000n }, { verifyingContract: chainUnderTest.chain.usdcAddress });

/** The settled records, once this server's record updates are written (they follow the answer: payments/records.ts). */
const settledRecords = async (server: TestServer) => { await server.app.payments.records.recordsWritten(); return server.app.payments.records.payments.find({ status: 'settled' }).lean(); };

it('a node that takes the settlement and never answers: the next node is asked, the payment settles once, recorded with the mined hash', async () => {
  const [primary, secondary] = [await startRpcProxy(chainUnderTest.chain.rpcUrl), await startRpcProxy(chainUnderTest.chain.rpcUrl)];
  const server = await serverBehind([primary, secondary]);
  try {
    const seller = await setUpSeller(server);
    primary.afterForward.hang({ method: 'eth_sendRawTransaction', times: 1 });
    const before = await balanceOf(seller.payTo);
    const result = await redeem(server.url, seller, paymentHeaderV1(await sign(seller)));
    expect(result.status).toBe(200);
    expect(primary.forwarded('eth_sendRawTransaction')).toBeGreaterThanOrEqual(1);
    expect(await balanceOf(seller.payTo)).toBe(before + 10_000n);
    const [record] = await settledRecords(server);
    expect(record!.txHash).toBe(result.body.paymentResponse.transaction);
    expect((await chainUnderTest.rpc('eth_getTransactionReceipt', [record!.txHash])).status).toBe('0x1');
  } finally {
    await server.close();
    await primary.close();
    await secondary.close();
  }
}, 60_000);

it('a send lost on the way (the node never got it, the client timed out) is broadcast again at the next block', async () => {
  const node = await startRpcProxy(chainUnderTest.chain.rpcUrl);
  const server = await serverBehind([node]);
  try {
    const seller = await setUpSeller(server);
    node.hang({ method: 'eth_sendRawTransaction', times: 1 });
    const before = await balanceOf(seller.payTo);
    const result = await redeem(server.url, seller, paymentHeaderV1(await sign(seller)));
    expect(result.status).toBe(200);
    expect(await balanceOf(seller.payTo)).toBe(before + 10_000n);
    expect(await counterValue(server.app.metrics, 'agentgate_settlement_transactions_total', { event: 'rebroadcast' })).toBeGreaterThanOrEqual(1);
  } finally {
    await server.close();
    await node.close();
  }
}, 60_000);

it('the chain goes away while a payment settles: the answer is settlement_pending within SETTLEMENT_TIMEOUT_MS; once the chain is back the same payment-identifier answers the settlement', async () => {
  const node = await startRpcProxy(chainUnderTest.chain.rpcUrl);
  const server = await serverBehind([node], { SETTLEMENT_TIMEOUT_MS: '3000' });
  try {
    const seller = await setUpSeller(server);
    const signed = await sign(seller);
    const requirements = {
      scheme: 'exact', network: 'eip155:84532', amount: '10000', asset: chainUnderTest.chain.usdcAddress, payTo: seller.payTo, maxTimeoutSeconds: 60,
      extra: { name: DEV_USDC_NAME, version: '2' },
    };
    const body = {
      x402Version: 2,
      paymentRequirements: requirements,
      paymentPayload: {
        x402Version: 2, resource: { url: seller.resource }, accepted: requirements,
        payload: { signature: signed.signature, authorization: wire(signed.authorization) },
        extensions: { 'payment-identifier': { info: { required: false, id: `retry_${Date.now()}_abcdefgh` } } },
      },
    };
    const settle = () => server.request('POST', '/v0/x402/settle', { key: seller.sellerKey, body });
    const before = await balanceOf(seller.payTo);
    // Verification reads the chain; from the send on, nothing gets through.
    const down = ['eth_sendRawTransaction', 'eth_getTransactionReceipt', 'eth_getTransactionByHash', 'eth_getTransactionCount'];
    node.refuse({ method: down });

    const started = Date.now();
    const first = await settle();
    expect(first.body).toMatchObject({ success: false, errorReason: 'settlement_pending', transaction: '' });
    // Bounded: the answer came at the timeout, not after the old 120 s receipt wait (the bound leaves a
    // CPU-starved machine room: the meaning is "not the 120 s", not how fast).
    expect(Date.now() - started).toBeLessThan(3000 + 15_000);
    expect(await balanceOf(seller.payTo)).toBe(before);

    node.clearFaults();
    const deadline = Date.now() + 30_000;
    let retry = await settle();
    while (!retry.body.success && Date.now() < deadline) retry = await settle();
    expect(retry.body).toMatchObject({ success: true, transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/) });
    expect(await balanceOf(seller.payTo)).toBe(before + 10_000n);
    const [record] = await settledRecords(server);
    expect(record!.txHash).toBe(retry.body.transaction);
    // Asked again, it answers the same: money moved once.
    expect((await settle()).body).toEqual(retry.body);
    expect(await balanceOf(seller.payTo)).toBe(before + 10_000n);
  } finally {
    await server.close();
    await node.close();
  }
}, 90_000);

it('a chain that cannot be asked at all: 503 chain_unavailable (not a refusal of the payment), nothing recorded', async () => {
  const node = await startRpcProxy(chainUnderTest.chain.rpcUrl);
  const server = await serverBehind([node]);
  try {
    const seller = await setUpSeller(server);
    await node.down();
    const result = await redeem(server.url, seller, paymentHeaderV1(await sign(seller)));
    expect(result.status).toBe(503);
    expect(result.body).toMatchObject({ error: 'chain_unavailable', status: 503 });
    expect(await server.app.payments.records.payments.countDocuments({})).toBe(0);
    const ready = await server.request('GET', '/ready');
    expect(ready.status).toBe(503);
    expect(ready.body.checks.chain).toMatch(/^down/);
    await node.up();
    expect((await redeem(server.url, seller, paymentHeaderV1(await sign(seller)))).status).toBe(200);
  } finally {
    await server.close();
    await node.close();
  }
}, 60_000);

function wire(a: Authorization) {
  return { from: a.from, to: a.to, value: a.value.toString(), validAfter: a.validAfter.toString(), validBefore: a.validBefore.toString(), nonce: a.nonce as Hex };
}
