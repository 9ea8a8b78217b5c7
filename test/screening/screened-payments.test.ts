/**
 * Sanctions screening as an operator turns it on (SCREENING_LIST_FILE, SANCTIONS_ORACLE_ADDRESS,
 * SCREENING_PROVIDER_URL) and as buyers meet it through the official clients: a payer or a payTo that a
 * source lists is refused with `sanctioned_address` on exact (EIP-3009 and Permit2), upto, auth-capture (at
 * the authorization, and again at the capture for a payer listed meanwhile), a channel deposit and a refund to a payer listed after it paid; nothing is claimed and nothing moves
 * on chain; the refusal is in the org's activity log and the metrics, naming the source. A provider that is down or slow refuses
 * (`screening_unavailable`, the default policy). Unlisted payments pass. The list is read again when
 * its file changes, without a restart.
 */
import { mkdtempSync, writeFileSync, appendFileSync, statSync } from 'node:fs';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { x402Client } from '@x402/core/client';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { toClientEvmSigner } from '@x402/evm';
import { AuthCaptureEvmScheme } from '@x402/evm/auth-capture/client';
import { ExactEvmScheme } from '@x402/evm/exact/client';
import { UptoEvmScheme } from '@x402/evm/upto/client';
import { wrapFetchWithPayment } from '@x402/fetch';
import type { Address } from 'viem';
import type { PrivateKeyAccount } from 'viem/accounts';
import type { RouteConfig } from '../../middleware/index.js';
import { listOnDevOracle } from '../../server/dev/chain/sanctions-oracle.js';
import { PUBLIC_SANCTIONS_ORACLE_ADDRESS } from '../../server/screening/oracle-source.js';
import { fundedBuyer, permit2ApprovedBuyer, testChain, usdcBalance } from '../support/chain.js';
import { officialChannelClient } from '../support/official-channel-client.js';
import { createMandate, fundedAgent, pay } from '../buyer/support.js';
import { authCaptureOperator, fundedOperator, heldPayment } from '../support/auth-capture.js';
import { screeningRefusalLogged } from './refusal-log.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { paidApp, serve, setUpSeller, type RunningApp } from '../interop/seller.js';

const NETWORK = 'eip155:84532' as const;
const METRICS_TOKEN = 'screening-test-metrics';

let server: TestServer;
let seller: Awaited<ReturnType<typeof setUpSeller>>;
let listFile: string;
let provider: { server: Server; url: string; mode: 'answer' | 'down' | 'slow'; listed: Set<string>; asked: string[] };
const shops: RunningApp[] = [];
const buyers: Record<'listed' | 'oracle' | 'escrow' | 'channel' | 'clean' | 'byProvider' | 'unlucky', PrivateKeyAccount> = {} as never;

async function startProvider() {
  const state = { mode: 'answer' as 'answer' | 'down' | 'slow', listed: new Set<string>(), asked: [] as string[] };
  const http = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      const { address } = JSON.parse(body) as { address: string };
      state.asked.push(address);
      if (state.mode === 'down') { res.writeHead(503).end('maintenance'); return; }
      const answer = () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ sanctioned: state.listed.has(address.toLowerCase()), reason: 'provider test list' }));
      if (state.mode === 'slow') setTimeout(answer, 1_500); else answer();
    });
  });
  http.listen(0, '127.0.0.1');
  await once(http, 'listening');
  return Object.assign(state, { server: http, url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/screen` });
}

beforeAll(async () => {
  [buyers.listed, buyers.escrow, buyers.channel, buyers.clean, buyers.byProvider, buyers.unlucky] = await Promise.all([fundedBuyer('1'), fundedBuyer('1'), fundedBuyer('1'), fundedBuyer('1'), fundedBuyer('1'), fundedBuyer('1')]);
  buyers.oracle = await permit2ApprovedBuyer();
  listFile = join(mkdtempSync(join(tmpdir(), 'screening-')), 'sdn-eth.txt');
  // As the OFAC SDN digital-currency lists are published: one address per line, in checksum case.
  writeFileSync(listFile, `# sanctioned ETH addresses\n${buyers.listed.address}\n${buyers.escrow.address} SDN test entry\n`);
  provider = await startProvider();
  provider.listed.add(buyers.byProvider.address.toLowerCase());
  await listOnDevOracle(testChain().rpcUrl, [buyers.oracle.address, buyers.channel.address]);
  server = await startTestServer({
    SCREENING_LIST_FILE: listFile, SCREENING_LIST_RELOAD_MS: '100', SANCTIONS_ORACLE_ADDRESS: PUBLIC_SANCTIONS_ORACLE_ADDRESS,
    SCREENING_PROVIDER_URL: provider.url, SCREENING_PROVIDER_TIMEOUT_MS: '1000', SCREENING_CACHE_TTL_MS: '0', METRICS_TOKEN: METRICS_TOKEN,
  });
  seller = await setUpSeller(server);
}, 120_000);

afterAll(async () => {
  for (const shop of shops) await shop.close();
  await server?.close();
  provider?.server.close();
});

/** Our Express middleware selling GET /paid with `route`, registered with the backend as a seller does. */
async function shop(route: RouteConfig, register: Record<string, string>): Promise<string> {
  const running = await serve(paidApp('Express', { backendUrl: server.url, apiKey: seller.sellerKey, routes: { 'GET /paid': route } }, 'GET', '/paid', (_q, payment) => {
    if (payment.scheme === 'upto') payment.charge('$0.01');
    return { status: 200, body: { served: true } };
  }));
  shops.push(running);
  const registered = await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: `${running.url}/paid`, ...register } });
  expect([registered.status, registered.text]).toEqual([201, expect.any(String)]);
  return `${running.url}/paid`;
}

const limits = () => [{ network: NETWORK, asset: testChain().usdc, maxAmountPerPayment: '1000000' }];
const exactClient = (buyer: PrivateKeyAccount) => wrapFetchWithPayment(fetch, new x402Client().register(NETWORK, new ExactEvmScheme(toClientEvmSigner(buyer, testChain().publicClient as never))).setSpendControls({ allowedAssets: limits() }));
const uptoClient = (buyer: PrivateKeyAccount) => wrapFetchWithPayment(fetch, new x402Client().register(NETWORK, new UptoEvmScheme(buyer)).setSpendControls({ allowedAssets: limits() }));
const escrowClient = (buyer: PrivateKeyAccount) => wrapFetchWithPayment(fetch, new x402Client().register(NETWORK, new AuthCaptureEvmScheme(buyer)).setSpendControls({ allowedAssets: limits() }));

/** The refusal the buyer sees: a 402 whose PAYMENT-REQUIRED header names the reason. */
async function refusalOf(res: Response) {
  expect(res.status).toBe(402);
  const required = decodePaymentRequiredHeader(res.headers.get('payment-required')!);
  return { error: required.error };
}

async function paymentsOf(payer: Address) {
  const list = await server.request('GET', '/v0/payments', { key: seller.platformKey });
  return list.body.payments.filter((p: { payerAddress: string }) => p.payerAddress.toLowerCase() === payer.toLowerCase());
}

/** The org's activity log entry of a screening refusal of `address`, once it is written. */
const refusalLogged = (address: Address, key = seller.platformKey) => screeningRefusalLogged(server, key, address);

/** The server's /metrics, as Prometheus scrapes it. */
const metricsText = async () => (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();

/**
 * Waits until the server has loaded the list file as it is now (it looks every 100 ms here): its gauges show
 * the file's addresses and modification time, as an operator checks after a refresh.
 */
async function listLoaded(addresses: number): Promise<void> {
  const modified = statSync(listFile).mtimeMs / 1000;
  let seen = '';
  for (const until = Date.now() + 20_000; Date.now() < until; await new Promise((r) => setTimeout(r, 50))) {
    const text = await metricsText();
    const value = (name: string) => Number(text.split('\n').find((l) => l.startsWith(`${name} `))?.split(' ').pop());
    seen = `${value('agentgate_screening_list_addresses')} addresses, modified ${value('agentgate_screening_list_modified_timestamp_seconds')}`;
    if (value('agentgate_screening_list_addresses') === addresses && Math.abs(value('agentgate_screening_list_modified_timestamp_seconds') - modified) < 0.001) return;
  }
  throw new Error(`the server did not load the list file (${addresses} addresses, modified ${modified}); it shows ${seen}`);
}

/** The list as beforeAll wrote it, loaded again (a test that listed someone puts it back). */
async function listAsAtStart(): Promise<void> {
  writeFileSync(listFile, `${buyers.listed.address}\n${buyers.escrow.address} SDN test entry\n`);
  await listLoaded(2);
}

async function refusalsCounted(source: string, role: string): Promise<number> {
  const text = await metricsText();
  const line = text.split('\n').find((l) => l.startsWith('agentgate_screening_refusals_total{') && l.includes(`source="${source}"`) && l.includes(`role="${role}"`) && l.includes('reason="sanctioned_address"'));
  return line ? Number(line.split(' ').pop()) : 0;
}

it('exact (EIP-3009): a payer on the list file is refused before anything moves; the refusal is logged with its source; an unlisted payer pays', async () => {
  // Each process shows the list it has loaded, as an operator checks it.
  await listLoaded(2);
  const url = await shop({ price: '$0.01', description: 'Report' }, { priceUsdc: '0.01' });
  const before = await usdcBalance(buyers.listed.address);
  const refused = await exactClient(buyers.listed)(url);
  expect(await refusalOf(refused)).toEqual({ error: expect.stringContaining('sanctioned_address') });
  expect(await usdcBalance(buyers.listed.address)).toBe(before);
  expect(await paymentsOf(buyers.listed.address)).toEqual([]);
  const entry = await refusalLogged(buyers.listed.address);
  expect(entry).toMatchObject({ status: 'failure', metadata: { reason: 'sanctioned_address', source: 'list', role: 'payer', network: 'base-sepolia', scheme: 'exact' } });
  expect(await refusalsCounted('list', 'payer')).toBeGreaterThanOrEqual(1);

  const cleanBefore = await usdcBalance(buyers.clean.address);
  const paid = await exactClient(buyers.clean)(url);
  expect([paid.status, await paid.json()]).toEqual([200, { served: true }]);
  expect(await usdcBalance(buyers.clean.address)).toBe(cleanBefore - 10_000n);
  expect(provider.asked.map((a) => a.toLowerCase())).toContain(buyers.clean.address.toLowerCase());
});

it('exact (Permit2): a payer the chain\'s sanctions oracle lists is refused; nothing moves', async () => {
  const url = await shop({ price: '$0.01', assetTransferMethod: 'permit2', description: 'Report' }, { priceUsdc: '0.01' });
  const before = await usdcBalance(buyers.oracle.address);
  const refused = await exactClient(buyers.oracle)(url);
  expect(await refusalOf(refused)).toEqual({ error: expect.stringContaining('sanctioned_address') });
  expect(await usdcBalance(buyers.oracle.address)).toBe(before);
  expect(await paymentsOf(buyers.oracle.address)).toEqual([]);
  expect(await refusalLogged(buyers.oracle.address)).toMatchObject({ metadata: { source: 'oracle', role: 'payer' } });
});

it('upto: a payTo added to the list file is refused once the file is read again (no restart); nothing moves', async () => {
  const url = await shop({ price: { upto: '$0.05' }, description: 'Completion' }, { maxPriceUsdc: '0.05' });
  const buyer = await permit2ApprovedBuyer();
  const paid = await uptoClient(buyer)(url);
  expect(paid.status).toBe(200);
  appendFileSync(listFile, `${seller.payTo}\n`);
  try {
    await listLoaded(3);
    const before = await usdcBalance(buyer.address);
    const refused = await uptoClient(buyer)(url);
    expect(await refusalOf(refused)).toEqual({ error: expect.stringContaining('sanctioned_address') });
    expect(await usdcBalance(buyer.address)).toBe(before);
    expect(await refusalLogged(seller.payTo)).toMatchObject({ metadata: { source: 'list', role: 'payTo', scheme: 'upto' } });
  } finally {
    await listAsAtStart();
  }
});

it('refunds: a refund to a payer listed after it paid is refused (403 sanctioned_address) and nothing moves; once delisted, it goes through', async () => {
  const url = await shop({ price: '$0.25', scheme: 'auth-capture', description: 'Annual report' }, { priceUsdc: '0.25' });
  const buyer = await fundedBuyer('1');
  expect((await escrowClient(buyer)(url)).status).toBe(200);
  const [payment] = await eventuallySettled(buyer.address);
  appendFileSync(listFile, `${buyer.address}\n`);
  try {
    await listLoaded(3);
    const before = await usdcBalance(buyer.address);
    const refused = await server.request('POST', `/v0/payments/${payment.id}/refund`, { key: seller.platformKey, body: { reason: 'not delivered' } });
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ error: 'sanctioned_address', message: expect.stringContaining(buyer.address) });
    expect(await usdcBalance(buyer.address)).toBe(before);
    expect(await refusalLogged(buyer.address)).toMatchObject({ metadata: { source: 'list', role: 'payer' } });
  } finally {
    await listAsAtStart();
  }
  // Delisted: refunded from the operator account that funds auth-capture refunds (which the operator keeps funded).
  await fundedOperator(server, '1');
  const before = await usdcBalance(buyer.address);
  const refunded = await server.request('POST', `/v0/payments/${payment.id}/refund`, { key: seller.platformKey, body: { reason: 'not delivered' } });
  expect([refunded.status, refunded.body.status]).toEqual([200, 'refunded']);
  expect(await usdcBalance(buyer.address)).toBe(before + 250_000n);
});

/** The buyer's payments once the capture is recorded (the record is written a moment after the answer). */
async function eventuallySettled(payer: Address) {
  for (let i = 0; i < 50; i++) {
    const found = await paymentsOf(payer);
    if (found.length && found.every((p: { status: string }) => p.status === 'settled')) return found;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no settled payment of ${payer}`);
}

it('auth-capture: a listed payer\'s authorization is refused; nothing is held in the escrow', async () => {
  const url = await shop({ price: '$0.25', scheme: 'auth-capture', description: 'Quarterly report' }, { priceUsdc: '0.25' });
  const before = await usdcBalance(buyers.escrow.address);
  const refused = await escrowClient(buyers.escrow)(url);
  expect(await refusalOf(refused)).toEqual({ error: expect.stringContaining('sanctioned_address') });
  expect(await usdcBalance(buyers.escrow.address)).toBe(before);
  expect(await paymentsOf(buyers.escrow.address)).toEqual([]);
  expect(await refusalLogged(buyers.escrow.address)).toMatchObject({ metadata: { source: 'list', detail: 'SDN test entry', scheme: 'auth-capture' } });
});

it('auth-capture: a payer listed after the authorization was held is screened again at the capture, which is refused; nothing is captured, and the hold can still be released to the buyer', async () => {
  const operator = await authCaptureOperator(server);
  const buyer = await fundedBuyer('1');
  const { id } = await heldPayment(server, seller, { amount: 250_000n, operator, buyer });
  const held = await usdcBalance(buyer.address);
  appendFileSync(listFile, `${buyer.address}\n`);
  try {
    await listLoaded(3);
    const payToBefore = await usdcBalance(seller.payTo);
    const refused = await server.request('POST', `/v0/payments/holds/${id}/capture`, { key: seller.sellerKey, body: {} });
    expect(refused.body).toMatchObject({ error: 'sanctioned_address', status: 402, message: expect.stringContaining('the hold stays') });
    expect(await usdcBalance(seller.payTo)).toBe(payToBefore);
    expect(await refusalLogged(buyer.address)).toMatchObject({ metadata: { source: 'list', role: 'payer', scheme: 'auth-capture' } });
  } finally {
    await listAsAtStart();
  }
  // Still held: the seller releases it, and the escrow gives the buyer back what it held.
  const released = await server.request('POST', `/v0/payments/holds/${id}/release`, { key: seller.sellerKey, body: {} });
  expect(released.status).toBe(200);
  expect(await usdcBalance(buyer.address)).toBe(held + 250_000n);
});

it('batch-settlement: a channel deposit from a payer the oracle lists is refused; no deposit reaches the chain', async () => {
  const url = await shop({ price: '$0.001', scheme: 'batch-settlement', description: 'Weather, per call' }, { priceUsdc: '0.001' });
  const before = await usdcBalance(buyers.channel.address);
  const client = officialChannelClient(buyers.channel);
  const refused = await client.paying(url);
  expect(await refusalOf(refused)).toEqual({ error: expect.stringContaining('sanctioned_address') });
  expect(await usdcBalance(buyers.channel.address)).toBe(before);
  expect(await refusalLogged(buyers.channel.address)).toMatchObject({ metadata: { source: 'oracle', scheme: 'batch-settlement' } });
});

it('the HTTP provider: a payer it lists is refused; when it is down or slower than its timeout, payments are refused as unscreened (the default policy)', async () => {
  const url = await shop({ price: '$0.01', description: 'Report' }, { priceUsdc: '0.01' });
  const refused = await exactClient(buyers.byProvider)(url);
  expect(await refusalOf(refused)).toEqual({ error: expect.stringContaining('sanctioned_address') });
  expect(await refusalLogged(buyers.byProvider.address)).toMatchObject({ metadata: { source: 'provider', detail: 'provider test list' } });
  for (const mode of ['down', 'slow'] as const) {
    provider.mode = mode;
    try {
      const before = await usdcBalance(buyers.unlucky.address);
      const unscreened = await exactClient(buyers.unlucky)(url);
      expect(await refusalOf(unscreened)).toEqual({ error: expect.stringContaining('screening_unavailable') });
      expect(await usdcBalance(buyers.unlucky.address)).toBe(before);
    } finally {
      provider.mode = 'answer';
    }
  }
  const paid = await exactClient(buyers.unlucky)(url);
  expect(paid.status).toBe(200);
});

it('the facilitator API: /verify answers a listed payer isValid false with sanctioned_address', async () => {
  const url = await shop({ price: '$0.01', description: 'Report' }, { priceUsdc: '0.01' });
  const required = decodePaymentRequiredHeader((await fetch(url)).headers.get('payment-required')!);
  const client = new x402Client().register(NETWORK, new ExactEvmScheme(toClientEvmSigner(buyers.listed, testChain().publicClient as never))).setSpendControls({ allowedAssets: limits() });
  const payload = await client.createPaymentPayload(required);
  const verified = await server.request('POST', '/v0/x402/verify', { key: seller.sellerKey, body: { x402Version: 2, paymentPayload: payload, paymentRequirements: required.accepts[0] } });
  expect(verified.body).toMatchObject({ isValid: false, invalidReason: 'sanctioned_address', payer: buyers.listed.address });
});

it('payments_pay: an agent wallet the oracle lists is refused (403) before anything is reserved or signed', async () => {
  const url = await shop({ price: '$0.01', description: 'Report' }, { priceUsdc: '0.01' });
  const agent = await fundedAgent(server, '1');
  await createMandate(server, agent.key);
  await listOnDevOracle(testChain().rpcUrl, [agent.address]);
  const before = await usdcBalance(agent.address);
  const refused = await pay(server, agent.key, { url });
  expect(refused.status).toBe(403);
  expect(refused.body).toMatchObject({ ok: false, error: 'sanctioned_address', code: 'sanctioned_address', status: 403, message: expect.stringContaining('paying wallet') });
  expect(await usdcBalance(agent.address)).toBe(before);
  expect(await refusalLogged(agent.address, agent.platform_key)).toMatchObject({ metadata: { role: 'wallet', source: 'oracle', door: 'payments_pay' } });
});
