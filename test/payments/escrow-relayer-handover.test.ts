// A process that dies after broadcasting an escrow refund and before recording it, while that transaction
// still waits for a block: the process that takes the operator's relayer next must not send the refund a
// second time (the escrow would take both: a refund is not an authorization with a nonce of its own). It
// waits until the previous holder's transaction is mined, then records that one. On a chain of this
// file's own, whose mining the test controls.
import { AuthCaptureEvmScheme } from '@x402/evm/auth-capture/client';
import { createPublicClient, createWalletClient, http, parseUnits, type Address, type Hex, type PublicClient } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startDevChain, type DevChain } from '../../server/dev/chain/dev-chain.js';
import { DEV_BUYERS } from '../../server/dev/chain/dev-accounts.js';
import { DEV_USDC_NAME, DEV_USDC_VERSION } from '../../server/dev/chain/dev-chain.js';
import { AUTH_CAPTURE_ESCROW_ADDRESS, escrowState } from '../../server/payments/schemes/auth-capture/evm/chain.js';
import { balanceOf, usdcAbi } from '../../server/chain/usdc.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { rawRpc } from '../support/block-time-chain.js';

const NETWORK = 'eip155:84532';
const PRICE = 1_000_000n;
/** A first refund, sent and recorded normally (it also has the operator approve the refund collector once). */
const FIRST_REFUND = 100_000n;
const REFUND = 400_000n;

let chain: DevChain;
let client: PublicClient;
const rpc = (method: string, params: unknown[] = []) => rawRpc(chain.rpcUrl, method, params);
const relayerKey = generatePrivateKey();
const operator = privateKeyToAccount(relayerKey).address;
const servers: TestServer[] = [];

beforeAll(async () => {
  chain = await startDevChain({ mintAmountUsdc: '1000' });
  client = createPublicClient({ transport: http(chain.rpcUrl) });
  await rpc('anvil_setBalance', [operator, '0x56bc75e2d63100000']); // 100 ETH
  // Refunds are pulled from the operator (OperatorRefundCollector): it holds some USDC.
  const funder = privateKeyToAccount(DEV_BUYERS[1]!.privateKey);
  const hash = await createWalletClient({ transport: http(chain.rpcUrl), account: funder }).writeContract({ address: chain.usdcAddress, abi: usdcAbi, functionName: 'transfer', args: [operator, parseUnits('5', 6)], chain: null });
  await client.waitForTransactionReceipt({ hash });
}, 60_000);
afterAll(async () => {
  for (const s of servers) await s.close().catch(() => {});
  await chain?.stop();
});

/** A backend on this chain, relaying from the operator's key (a short lease, so a dead holder's passes quickly). */
async function backend(db?: string): Promise<TestServer> {
  const server = await startTestServer({
    CHAIN_RPC_URL: chain.rpcUrl, USDC_ADDRESS: chain.usdcAddress, WALLET_FACTORY_ADDRESS: chain.factoryAddress,
    // RELAYER_DRAIN_MS 0: a process that stops does not wait for its transactions, as one that dies.
    RELAYER_PRIVATE_KEY: relayerKey, RELAYER_LEASE_TTL_MS: '2000', RELAYER_DRAIN_MS: '0', ...(db ? { MONGODB_DB: db } : {}),
  });
  servers.push(server);
  return server;
}

const balance = (account: Address) => balanceOf({ client: client as never, token: chain.usdcAddress, account });
const nonces = async () => ({
  mined: await client.getTransactionCount({ address: operator, blockTag: 'latest' }),
  pending: await client.getTransactionCount({ address: operator, blockTag: 'pending' }),
});
async function until(what: string, condition: () => Promise<boolean> | boolean) {
  for (const deadline = Date.now() + 30_000; !(await condition());) {
    if (Date.now() > deadline) throw new Error(`still waiting after 30 s for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

it('a refund broadcast by a process that died before recording it is not sent again by the next holder of the relayer: refunded once', async () => {
  const first = await backend();
  const agent = await signUp(first);
  const payTo = privateKeyToAccount(generatePrivateKey()).address;
  await first.request('PUT', '/v0/payments/acceptance', { key: agent.platform_key, body: { enabled: true, payTo } });
  const sellerKey = (await first.request('POST', '/v0/payments/seller-keys', { key: agent.platform_key, body: {} })).body.apiKey;

  // A payment authorized into escrow and captured (the chain mines on arrival for now).
  const buyer = privateKeyToAccount(DEV_BUYERS[0]!.privateKey);
  const now = Math.floor(Date.now() / 1000);
  const reqs = {
    scheme: 'auth-capture', network: NETWORK, amount: String(PRICE), asset: chain.usdcAddress, payTo, maxTimeoutSeconds: 120,
    extra: { name: DEV_USDC_NAME, version: DEV_USDC_VERSION, authCaptureEscrow: AUTH_CAPTURE_ESCROW_ADDRESS, captureAuthorizer: operator, captureDeadline: now + 3600, refundDeadline: now + 86_400, minFeeBps: 0, maxFeeBps: 0, feeRecipient: '0x0000000000000000000000000000000000000000' },
  };
  const { payload } = await new AuthCaptureEvmScheme(buyer).createPaymentPayload(2, reqs as never);
  const settled = await first.request('POST', '/v0/x402/settle', { key: sellerKey, body: { x402Version: 2, paymentPayload: { x402Version: 2, resource: { url: 'https://shop.example/r' }, accepted: reqs, payload }, paymentRequirements: reqs } });
  expect(settled.body.success).toBe(true);
  const id = settled.body.extensions.authCapture.paymentId as string;
  expect((await first.request('POST', `/v0/payments/holds/${id}/capture`, { key: sellerKey, body: {} })).status).toBe(200);
  const escrowHash = (await first.app.payments.records.payments.findById(id).lean())!.escrow!.hash as Hex;
  const refunded = await first.request('POST', `/v0/payments/${id}/refund`, { key: agent.platform_key, body: { amount: '0.1', reason: 'first' } });
  expect(refunded.body).toMatchObject({ status: 'refunded', amountUsdcRaw: String(FIRST_REFUND) });
  const buyerBefore = await balance(buyer.address);

  // Blocks stop. The refund is broadcast, and its process dies before the transaction is mined and before
  // its hash is recorded (the record is put back as such a crash leaves it).
  await rpc('evm_setAutomine', [false]);
  const ops = first.app.payments.authCapture.operations.ops;
  void first.request('POST', `/v0/payments/${id}/refund`, { key: agent.platform_key, body: { amount: '0.4', reason: 'partial' } }).catch(() => undefined);
  let refundId = '';
  await until('the refund to be broadcast', async () => {
    const op = await ops.findOne({ paymentId: id, kind: 'refund', status: 'pending' }).lean();
    refundId = op?._id ?? '';
    return !!op?.txHash;
  });
  const broadcast = (await ops.findById(refundId).lean())!.txHash as Hex;
  const db = first.config.MONGODB_DB;
  await first.app.close().catch(() => {});
  first.http.closeAllConnections();
  first.http.close();
  const second = await backend(db);
  const secondOps = second.app.payments.authCapture.operations.ops;
  await secondOps.updateOne({ _id: refundId }, { $set: { createdAt: new Date(Date.now() - 3_600_000) }, $unset: { txHash: 1 } });
  const left = await nonces();
  expect(left.pending).toBe(left.mined + 1); // the dead process's refund, waiting for a block

  // The next process holds the relayer and sweeps: the refund waits for the transaction it cannot see as its own.
  await until('the second process to hold the relayer', () => second.app.settlement!.settler.available());
  let swept = false;
  void second.app.payments.authCapture.operations.sweep().then(() => second.app.payments.authCapture.operations.sweep()).finally(() => { swept = true; });
  // Either the sweeps end (the refund waits) or a second refund reaches the node (and would wait for a block).
  await until('the sweeps to end, or a second transaction', async () => swept || (await nonces()).pending > left.pending);
  const waiting = await nonces();
  expect(waiting.pending).toBe(waiting.mined + 1); // nothing more was sent
  expect(await secondOps.findById(refundId).lean()).toMatchObject({ status: 'pending' });

  // The block comes: the dead process's refund is mined, and the sweep records it.
  await rpc('evm_mine');
  await rpc('evm_setAutomine', [true]);
  await until('the refund to be recorded', async () => {
    await second.app.payments.authCapture.operations.sweep();
    return (await secondOps.findById(refundId).lean())?.status === 'done';
  });
  // Recorded with the dead process's transaction: the one it broadcast, or (were it re-signed with a higher
  // fee before it died) a replacement at the same nonce; never a transaction of its own.
  const recorded = await secondOps.findById(refundId).lean();
  expect(recorded).toMatchObject({ status: 'done' });
  expect((await client.getTransaction({ hash: recorded!.txHash as Hex })).nonce).toBe(left.mined);
  if (recorded!.txHash !== broadcast) console.warn(`the refund was mined as ${recorded!.txHash}, a replacement of the broadcast ${broadcast} at nonce ${left.mined}`);
  expect(await balance(buyer.address)).toBe(buyerBefore + REFUND);
  expect(await escrowState(client as never, escrowHash)).toMatchObject({ refundable: PRICE - FIRST_REFUND - REFUND });
}, 90_000);
