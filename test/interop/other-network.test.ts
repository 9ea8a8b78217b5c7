/**
 * A backend on a network other than Base: Arbitrum Sepolia (eip155:421614), an anvil node with that chain
 * id, Circle's FiatToken and Multicall3 and none of the x402 contracts (Permit2 and its proxies, the
 * escrow, batch settlement). What an operator and a seller would check: the official v2 client pays an
 * exact route there; /supported offers only what the chain can settle; a payment of a scheme whose
 * contracts are missing is refused naming them, never "settled" for money that did not move; the
 * operator's metrics and log say which schemes are off. And a chain without its token refuses to start.
 */
import { createPublicClient, http, parseUnits, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import pino from 'pino';
import { networkByName } from 'agentgate-x402-wire';
import { startAnvil, type AnvilNode } from '../../server/dev/chain/anvil.js';
import { deployDevChain, installMulticall3 } from '../../server/dev/chain/deploy.js';
import { DEV_ACCOUNTS, DEV_BUYERS, DEV_DEPLOYER } from '../../server/dev/chain/dev-accounts.js';
import { balanceOf } from '../../server/chain/usdc.js';
import { payWithV2 } from '../../examples/buyer/buyer.js';
import { createWeatherApp } from '../../examples/express-seller/server.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { startStorefront } from '../support/storefront.js';
import { registerEndpoint, serve, setUpSeller, type RunningApp } from './seller.js';

const NETWORK = networkByName('arbitrum-sepolia')!;
const lines: Array<Record<string, unknown>> = [];
let node: AnvilNode;
let usdc: Address;
let server: TestServer;
let app: RunningApp;
let seller: Awaited<ReturnType<typeof setUpSeller>>;

beforeAll(async () => {
  node = await startAnvil({ chainId: NETWORK.chainId });
  const deployment = await deployDevChain({ rpcUrl: node.rpcUrl, deployerKey: DEV_DEPLOYER.privateKey, mintTo: [DEV_BUYERS[0]!.address] });
  await installMulticall3({ rpcUrl: node.rpcUrl, deployerKey: DEV_DEPLOYER.privateKey });
  usdc = deployment.usdcAddress;
  const log = pino({ level: 'info' }, { write: (line: string) => { lines.push(JSON.parse(line)); } });
  // By CAIP-2 id; the token is the operator's own (not at Circle's address), so it names its domain.
  server = await startTestServer({
    CHAIN_RPC_URL: node.rpcUrl, CHAIN_NETWORK: NETWORK.caip2, USDC_ADDRESS: usdc, USDC_EIP712_NAME: 'USD Coin', USDC_EIP712_VERSION: '2',
    RELAYER_PRIVATE_KEY: DEV_ACCOUNTS[7]!.privateKey, WALLET_FACTORY_ADDRESS: deployment.factoryAddress,
  }, { log });
  seller = await setUpSeller(server);
  app = await serve(createWeatherApp({ backendUrl: server.url, apiKey: seller.sellerKey }));
  const registered = await registerEndpoint(server, seller.platformKey, { url: `${app.url}/weather`, priceUsdc: '0.01' });
  if (registered.status !== 201) throw new Error(`registration: ${registered.status} ${registered.text}`);
}, 120_000);

afterAll(async () => {
  await app?.close();
  await server?.close();
  await node?.stop();
});

test('the official v2 client pays an exact route settled on Arbitrum Sepolia', async () => {
  const unpaid = await fetch(`${app.url}/weather`);
  const required = JSON.parse(Buffer.from(unpaid.headers.get('payment-required')!, 'base64').toString());
  expect(required.accepts).toEqual([expect.objectContaining({ scheme: 'exact', network: 'eip155:421614', asset: usdc })]);

  const publicClient = createPublicClient({ transport: http(node.rpcUrl) });
  const before = await balanceOf({ client: publicClient as never, token: usdc, account: seller.payTo });
  const paid = await payWithV2(`${app.url}/weather`, DEV_BUYERS[0]!.privateKey, { chainId: NETWORK.chainId, address: usdc });
  expect(paid.status).toBe(200);
  expect(paid.settlement).toMatchObject({ success: true, network: 'eip155:421614' });
  expect(await balanceOf({ client: publicClient as never, token: usdc, account: seller.payTo })).toBe(before + parseUnits('0.01', 6));
  const records = await server.request('GET', '/v0/payments', { key: seller.platformKey });
  expect(records.body.payments[0]).toMatchObject({ status: 'settled', network: 'arbitrum-sepolia' });
});

test('/supported offers exact on eip155:421614 and leaves out the schemes whose contracts are missing', async () => {
  const supported = await server.request('GET', '/v0/x402/supported');
  expect(supported.status).toBe(200);
  const kinds = supported.body.kinds.map((k: { scheme: string; network: string }) => `${k.scheme} ${k.network}`);
  expect(kinds).toEqual(['exact arbitrum-sepolia', 'exact eip155:421614']);
});

test('a payment of a scheme whose contracts are missing is refused at /verify and /settle, naming them', async () => {
  const buyer = privateKeyToAccount(generatePrivateKey()).address;
  const requirements = {
    scheme: 'upto', network: NETWORK.caip2, amount: '10000', asset: usdc, payTo: seller.payTo, maxTimeoutSeconds: 60,
    extra: { assetTransferMethod: 'permit2', facilitatorAddress: privateKeyToAccount(DEV_ACCOUNTS[7]!.privateKey).address },
  };
  const body = {
    x402Version: 2, paymentRequirements: requirements,
    paymentPayload: { x402Version: 2, accepted: requirements, payload: { signature: '0x00', permit2Authorization: { from: buyer } } },
  };
  for (const path of ['/v0/x402/verify', '/v0/x402/settle']) {
    const answer = await server.request('POST', path, { key: seller.sellerKey, body });
    expect(answer.body).toMatchObject(path.endsWith('verify')
      ? { isValid: false, invalidReason: 'unsupported_scheme', invalidMessage: expect.stringContaining('Permit2 at 0x000000000022D473030F116dDEE9F6B43aC78BA3') }
      : { success: false, errorReason: 'unsupported_scheme', errorMessage: expect.stringContaining('X402UptoPermit2Proxy') });
  }
});

test('a seller cannot register a route whose only offer is a scheme the network cannot settle', async () => {
  const shop = await startStorefront(server.url, seller.sellerKey, { 'GET /completion': { price: { upto: '$0.50' } } });
  const registered = await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: shop.resource('/completion'), maxPriceUsdc: '0.50' } });
  expect(registered).toMatchObject({ status: 400, body: { error: 'endpoint_check_failed', message: expect.stringContaining('upto is not offered on eip155:421614: Permit2 at 0x000000000022D473030F116dDEE9F6B43aC78BA3') } });
  await shop.close();
});

test('the operator sees which schemes are off on the network: one log line each and agentgate_scheme_available', async () => {
  const refused = lines.filter((l) => l.msg && String(l.msg).startsWith('scheme refused on this network'));
  expect(refused.map((l) => l.scheme).sort()).toEqual(['auth-capture', 'batch-settlement', 'upto']);
  expect(refused.every((l) => l.network === 'eip155:421614' && l.level === 50)).toBe(true);
  const text = await server.app.metrics.registry.metrics();
  expect(text).toContain('agentgate_scheme_available{network="eip155:421614",scheme="exact"} 1');
  expect(text).toContain('agentgate_scheme_available{network="eip155:421614",scheme="upto"} 0');
  expect(text).toContain('agentgate_scheme_available{network="eip155:421614",scheme="auth-capture"} 0');
  expect(text).toContain('agentgate_scheme_available{network="eip155:421614",scheme="batch-settlement"} 0');
});

test('a network whose token has no code refuses to start, saying so', async () => {
  await expect(startTestServer({
    CHAIN_RPC_URL: node.rpcUrl, CHAIN_NETWORK: 'arbitrum-sepolia', USDC_ADDRESS: privateKeyToAccount(generatePrivateKey()).address,
    RELAYER_PRIVATE_KEY: DEV_ACCOUNTS[8]!.privateKey,
  })).rejects.toThrow(/the token \(USDC_ADDRESS\) at 0x[0-9a-fA-F]{40} has no code on eip155:421614/);
});

test('CHAIN_NETWORK names a network of the table; another is refused with the list', async () => {
  await expect(startTestServer({ CHAIN_RPC_URL: node.rpcUrl, CHAIN_NETWORK: 'eip155:999999' })).rejects.toThrow(/CHAIN_NETWORK.*must be a network of the table.*arbitrum-sepolia/s);
});
