// Refunds on a fresh `agentgate dev`, as a newcomer meets them: the real dev command as a child process
// with a state folder of its own, a seller route offering `auth-capture` (Express, our middleware, the dev
// seller's keys) paid by dev account 1 with the official @x402/evm auth-capture client, then refunded the
// three ways the docs give: the curl snippet of docs/sellers/refunds.md as written, `./agentgate payments
// refund`, and the payments_refund MCP tool. The relayer (dev account 0) is the escrow's operator, which
// funds refunds: on a fresh dev chain it must hold test USDC. An `exact` payment to an identity's agentgate
// wallet is refunded from that wallet, which needs nothing of the relayer but gas.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import express from 'express';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { x402Client } from '@x402/core/client';
import { AuthCaptureEvmScheme } from '@x402/evm/auth-capture/client';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import { createPublicClient, http, type Address } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { paymentMiddleware } from '../../adapters/express.js';
import { syncEndpoints, type RouteConfig } from '../../middleware/index.js';
import { balanceOf } from '../../server/chain/usdc.js';
import { DEV_ACCOUNTS } from '../../server/dev/chain/dev-accounts.js';
import type { DevSellerFile } from '../../server/dev/dev-seller.js';
import { startDevProcess, type DevProcess } from '../support/dev-process.js';

const NETWORK = 'eip155:84532';
const run = promisify(execFile);

let state: string;
let dev: DevProcess;
let seller: DevSellerFile;
const closers: Array<() => Promise<void>> = [];

beforeAll(async () => {
  dev = await startDevProcess('refunds');
  ({ state, seller } = dev);
}, 180_000);

afterAll(async () => {
  for (const close of closers) await close();
  await dev?.stop();
}, 60_000);

const usdc = async (account: Address) => balanceOf({ client: createPublicClient({ transport: http(seller.rpcUrl) }), token: seller.usdcAddress, account });

async function call(method: string, path: string, key?: string, body?: unknown) {
  const res = await fetch(`${seller.backendUrl}${path}`, {
    method, headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: await res.json() as any };
}

/** An Express app selling `GET /report` for $0.25 with `route`'s scheme, its route registered as syncEndpoints does it. */
async function sell(keys: { sellerKey: string; platformKey: string }, route: Pick<RouteConfig, 'scheme'>): Promise<string> {
  const routes = { 'GET /report': { price: '$0.25', description: 'Quarterly report', ...route } satisfies RouteConfig };
  const app = express();
  app.use(paymentMiddleware({ backendUrl: seller.backendUrl, apiKey: keys.sellerKey, routes }));
  app.get('/report', (_req, res) => { res.json({ report: 'quarterly', paymentId: res.locals.payment.paymentId }); });
  const listening = app.listen(0, '127.0.0.1');
  await once(listening, 'listening');
  closers.push(() => new Promise((resolve) => { listening.closeAllConnections(); listening.close(() => resolve()); }));
  const origin = `http://127.0.0.1:${(listening.address() as AddressInfo).port}`;
  await syncEndpoints({ backendUrl: seller.backendUrl, platformKey: keys.platformKey, publicOrigin: origin, routes });
  return `${origin}/report`;
}

/** The official client pays known tokens only: the dev chain's USDC is named, as examples/buyer does. */
const devToken = (client: x402Client) => client.setSpendControls({ allowedAssets: [{ network: NETWORK, asset: seller.usdcAddress, maxAmountPerPayment: '1000000' }] });

/** The curl snippet under "## Refund" in docs/sellers/refunds.md, run by bash as written. */
async function docsRefund(paymentId: string, platformKey: string) {
  const page = readFileSync('docs/sellers/refunds.md', 'utf8');
  const section = page.slice(page.indexOf('## Refund\n'));
  const snippet = /```bash\n([\s\S]*?)```/.exec(section)![1]!;
  expect(snippet).toContain('/refund');
  const { stdout } = await run('bash', ['-c', snippet], { env: { ...process.env, BASE: seller.backendUrl, PLATFORM_KEY: platformKey, PAYMENT_ID: paymentId } });
  return JSON.parse(stdout);
}

test('an auth-capture payment is refunded on a fresh dev through the docs snippet, the CLI and MCP; the buyer gets each amount back on chain', async () => {
  const url = await sell(seller, { scheme: 'auth-capture' });
  const buyer = privateKeyToAccount(seller.buyerPrivateKey);
  const operator = (await call('GET', '/v0/x402/supported')).body.kinds.find((k: any) => k.scheme === 'auth-capture').extra.captureAuthorizer as Address;
  expect(operator).toBe(DEV_ACCOUNTS[0]!.address); // the relayer `agentgate dev` sends with

  const paid = await wrapFetchWithPayment(fetch, devToken(new x402Client().register(NETWORK, new AuthCaptureEvmScheme(buyer))))(url);
  const body = await paid.json() as { paymentId: string };
  expect([paid.status, body]).toEqual([200, { report: 'quarterly', paymentId: expect.stringMatching(/^pay_/) }]);
  const id = body.paymentId;
  const [buyerPaid, operatorBefore] = [await usdc(buyer.address), await usdc(operator)];

  const refunded = await docsRefund(id, seller.platformKey);
  expect(refunded).toMatchObject({ paymentId: id, status: 'refunded', amountUsdcRaw: '100000', receipt: { body: { kind: 'refund' } } });
  expect(await usdc(buyer.address)).toBe(buyerPaid + 100_000n);
  // The snippet names its Idempotency-Key after the payment: run again, it answers the same refund.
  expect((await docsRefund(id, seller.platformKey)).id).toBe(refunded.id);
  expect(await usdc(buyer.address)).toBe(buyerPaid + 100_000n);

  // The checkout's command (README), which finds the running dev server by its state folder.
  const { AGENTGATE_URL: _elsewhere, ...inherited } = process.env;
  const cli = await run('./agentgate', ['payments', 'refund', id, '--amount', '0.05', '--reason', 'wrong city', '--key', seller.platformKey], {
    env: { ...inherited, AGENTGATE_STATE_DIR: state, AGENTGATE_CREDENTIALS: join(state, 'no-credentials.json') }, timeout: 60_000,
  });
  expect(cli.stdout).toContain(`refunded 0.05 USDC of ${id}`);
  expect(await usdc(buyer.address)).toBe(buyerPaid + 150_000n);

  // An agent that sells: an identity of the dev seller's org, with its key, over POST /mcp.
  const agent = await call('POST', '/v0/platform/identities', seller.platformKey, {});
  expect(agent.status).toBe(201);
  const mcp = new Client({ name: 'dev-refund-test', version: '1.0.0' });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${seller.backendUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${agent.body.rawKey}` } } }));
  try {
    const result = await mcp.callTool({ name: 'payments_refund', arguments: { id, amount: '0.05', reason: 'agent refund' } });
    expect(JSON.parse((result.content as Array<{ text: string }>)[0]!.text)).toMatchObject({ paymentId: id, status: 'refunded', amountUsdcRaw: '50000' });
  } finally {
    await mcp.close();
  }
  expect(await usdc(buyer.address)).toBe(buyerPaid + 200_000n);
  // Fronted by the operator: the escrow's refund collector pulled each refund from it.
  expect(await usdc(operator)).toBe(operatorBefore - 200_000n);
}, 180_000);

test('an exact payment to an identity\'s agentgate wallet is refunded from that wallet on a fresh dev; the faucet never spends the refund money', async () => {
  // A new seller org, set up as refunds.md says: its identity's wallet as payTo, a mandate for refunds.
  const signup = await call('POST', '/v0/agent-signup', undefined, {});
  const [platformKey, identityKey] = [signup.body.platform_key as string, signup.body.identity.rawKey as string];
  const wallet = (await call('GET', '/v0/wallet', identityKey)).body.address as Address;
  expect((await call('PUT', '/v0/payments/acceptance', platformKey, { enabled: true, payTo: wallet })).status).toBe(200);
  const sellerKey = (await call('POST', '/v0/payments/seller-keys', platformKey, { name: 'exact refunds' })).body.apiKey as string;
  const mandate = await call('POST', '/v0/payments/mandates', identityKey, { maxPerCallUsdc: '1', dailyCapUsdc: '5', validUntil: new Date(Date.now() + 86_400_000).toISOString() });
  expect(mandate.status).toBe(201);
  const url = await sell({ sellerKey, platformKey }, { scheme: 'exact' });

  const buyer = privateKeyToAccount(DEV_ACCOUNTS[2]!.privateKey);
  const paid = await wrapFetchWithPayment(fetch, devToken(registerExactEvmScheme(new x402Client(), { signer: buyer })))(url);
  const { paymentId } = await paid.json() as { paymentId: string };
  expect(paid.status).toBe(200);
  expect(await usdc(wallet)).toBe(250_000n);
  const buyerPaid = await usdc(buyer.address);

  const refunded = await docsRefund(paymentId, platformKey);
  expect(refunded).toMatchObject({ paymentId, status: 'refunded', amountUsdcRaw: '100000' });
  expect(await usdc(buyer.address)).toBe(buyerPaid + 100_000n);
  expect(await usdc(wallet)).toBe(150_000n);

  // The dev faucet key is the relayer, whose USDC funds escrow refunds: it mints instead of paying from it.
  const relayerBefore = await usdc(DEV_ACCOUNTS[0]!.address);
  expect((await call('POST', '/v0/dev/faucet', identityKey, { amountUsdc: '5' })).status).toBe(200);
  expect(await usdc(wallet)).toBe(5_150_000n);
  expect(await usdc(DEV_ACCOUNTS[0]!.address)).toBe(relayerBefore);
}, 120_000);
