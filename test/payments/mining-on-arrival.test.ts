// A chain that mines each transaction as it arrives, but a few milliseconds after answering the send (as
// anvil does: its miner is a task of its own). The receipt asked for right after the send is not there
// yet; the relayer asks again over the next tens of milliseconds, so the block clock still reads the
// chain as mining on arrival and no payment waits for a block poll. Asking once, every receipt was missed,
// the clock took our own sequential blocks for a cadence and each payment waited ~100 ms for a poll.
// Here anvil's own automine is off and a block is mined 20 ms after the node answered each send.
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { parseEther, toHex } from 'viem';
import { startDevChain, type DevChain } from '../../server/dev/chain/dev-chain.js';
import { DEV_BUYERS } from '../../server/dev/chain/dev-accounts.js';
import { startRpcProxy, type RpcProxy } from '../support/rpc-proxy.js';
import { paymentHeaderV1, signAuthorization } from '../support/chain.js';
import { redeem, setUpSeller } from '../support/payments.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { rawRpc } from '../support/block-time-chain.js';

let chain: DevChain;
let proxy: RpcProxy;
let server: TestServer;

const rpc = (method: string, params: unknown[] = []) => rawRpc(chain.rpcUrl, method, params);

beforeAll(async () => {
  chain = await startDevChain({ mintAmountUsdc: '1000' });
  await rpc('evm_setAutomine', [false]);
  proxy = await startRpcProxy(chain.rpcUrl);
  proxy.onAnswered('eth_sendRawTransaction', () => { setTimeout(() => { rpc('evm_mine').catch(() => {}); }, 20); });
  const relayerKey = generatePrivateKey();
  await rpc('anvil_setBalance', [privateKeyToAccount(relayerKey).address, toHex(parseEther('10'))]);
  server = await startTestServer({ CHAIN_RPC_URL: proxy.url, USDC_ADDRESS: chain.usdcAddress, WALLET_FACTORY_ADDRESS: chain.factoryAddress, RELAYER_PRIVATE_KEY: relayerKey });
}, 60_000);

afterAll(async () => {
  await server?.close();
  await proxy?.close();
  await chain?.stop();
});

test('sequential payments on a chain that mines just after answering each send: the clock reads it as mining on arrival', async () => {
  const seller = await setUpSeller(server);
  const buyer = privateKeyToAccount(DEV_BUYERS[0]!.privateKey);
  for (let i = 0; i < 6; i++) {
    const header = paymentHeaderV1(await signAuthorization(buyer, { to: seller.payTo, value: 10_000n }, { verifyingContract: chain.usdcAddress }));
    const result = await redeem(server.url, seller, header);
    expect(result.status).toBe(200);
  }
  // Receipts were asked for again after a first ask that came before the block (on a loaded machine not
  // every transaction's first ask is that early, so not every one is asked twice): the case this test is about.
  expect(proxy.calls('eth_getTransactionReceipt')).toBeGreaterThan(6);
  const clock = server.app.settlement!.clock;
  expect(clock.minesOnArrival).toBe(true);
  expect(clock.intervalMs).toBeUndefined();
}, 60_000);
