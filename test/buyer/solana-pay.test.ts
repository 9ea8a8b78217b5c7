/**
 * payments_pay on Solana: each identity has a Solana wallet beside its EVM one (its key held here, sealed
 * at rest), GET /v0/wallet shows its balance per network, and payments_pay pays a seller's `exact` offer
 * on Solana under the same mandates and caps. The sellers: an official @x402/express seller settled by the
 * official @x402/svm facilitator in-process (nothing of ours between the buyer and the chain), and our
 * Express example seller offering Base and Solana, settled by this backend.
 */
import express from 'express';
import { generateKeyPairSigner, type KeyPairSigner } from '@solana/kit';
import { x402Facilitator } from '@x402/core/facilitator';
import type { FacilitatorClient } from '@x402/core/server';
import { paymentMiddleware as officialPaymentMiddleware, x402ResourceServer } from '@x402/express';
import { ExactSvmScheme as OfficialSvmServerScheme } from '@x402/svm/exact/server';
import { ExactSvmScheme as OfficialSvmFacilitatorScheme } from '@x402/svm/exact/facilitator';
import { toFacilitatorSvmSigner } from '@x402/svm';
import type { DevSolana } from '../../server/dev/solana/dev-solana.js';
import { solanaAccount, solanaForTests } from '../support/solana.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { registerEndpoint, serve, setUpSeller, type RunningApp } from '../interop/seller.js';
import { createWeatherApp } from '../../examples/express-seller/server.js';
import { createMandate, fundedAgent, pay } from './support.js';

const DEVNET = 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1';
const PRICE = 20_000n;
let chain: DevSolana;
let server: TestServer;
let official: RunningApp & { payTo: KeyPairSigner };
let ours: RunningApp & { payTo: KeyPairSigner };

/** An official @x402/express seller of GET /quote on Solana Devnet only, settled by the official SVM facilitator in-process. */
async function officialSolanaSeller(): Promise<RunningApp & { payTo: KeyPairSigner }> {
  const feePayer = await generateKeyPairSigner();
  chain.ledger.airdrop(feePayer.address, 10_000_000_000n);
  const facilitator = new x402Facilitator().register(DEVNET as never, new OfficialSvmFacilitatorScheme(toFacilitatorSvmSigner(feePayer, { defaultRpcUrl: chain.rpcUrl })));
  const resourceServer = new x402ResourceServer(facilitator as unknown as FacilitatorClient).register(DEVNET as never, new OfficialSvmServerScheme());
  const payTo = await solanaAccount(chain);
  const app = express();
  app.use(officialPaymentMiddleware({
    'GET /quote': { accepts: [{ scheme: 'exact', network: DEVNET as never, payTo: payTo.address, price: { asset: chain.usdcMint, amount: String(PRICE) } }], description: 'Quote', mimeType: 'application/json' },
  }, resourceServer));
  app.get('/quote', (_req, res) => { res.json({ quote: 42 }); });
  return { ...await serve(app), payTo };
}

/** Our Express example seller ($0.01 on Base Sepolia and on Solana Devnet), settled by this backend. */
async function ourSeller(): Promise<RunningApp & { payTo: KeyPairSigner }> {
  const seller = await setUpSeller(server);
  const payTo = await solanaAccount(chain);
  const acceptance = await server.request('PUT', '/v0/payments/acceptance', { key: seller.platformKey, body: { enabled: true, payTo: seller.payTo, payToByNetwork: { 'solana-devnet': payTo.address } } });
  if (acceptance.status !== 200) throw new Error(`acceptance: ${acceptance.status} ${acceptance.text}`);
  const running = await serve(createWeatherApp({ backendUrl: server.url, apiKey: seller.sellerKey }));
  const registered = await registerEndpoint(server, seller.platformKey, { url: `${running.url}/weather`, priceUsdc: '0.01' });
  if (registered.status !== 201) throw new Error(`endpoint: ${registered.status} ${registered.text}`);
  return { ...running, payTo };
}

/** An agent whose Solana wallet holds `usdc` atomic USDC (its token account made, and no SOL: fees are the facilitator's). */
async function solanaAgent(usdc: bigint) {
  const agent = await fundedAgent(server, '0');
  const wallet = await server.request('GET', '/v0/wallet', { key: agent.key });
  const solana = (wallet.body.networks as Array<{ caip2: string; address: string }>).find((n) => n.caip2 === DEVNET)!;
  await chain.fund(solana.address as never, usdc, 0n);
  return { ...agent, solana: solana.address };
}

beforeAll(async () => {
  const solana = await solanaForTests();
  chain = solana.chain;
  server = await startTestServer({ NETWORKS: 'base-sepolia,solana-devnet', ...solana.env });
  official = await officialSolanaSeller();
  ours = await ourSeller();
}, 60_000);

afterAll(async () => {
  await official?.close();
  await ours?.close();
  await server?.close();
  await chain?.stop();
});

test('every identity has a Solana wallet beside its EVM one; GET /v0/wallet shows its balance per network, and its key is sealed at rest', async () => {
  const agent = await solanaAgent(250_000n);
  const wallet = await server.request('GET', '/v0/wallet', { key: agent.key });
  expect(wallet.status).toBe(200);
  expect(wallet.body.networks).toEqual(expect.arrayContaining([
    expect.objectContaining({ network: 'base-sepolia', balanceUsdc: '0' }),
    { network: 'solana-devnet', caip2: DEVNET, address: agent.solana, deployed: true, balanceUsdc: '0.25', balanceUsdcRaw: '250000' },
  ]));
  // The same address on every read; the stored key is sealed (no 32-byte seed in the clear).
  expect((await server.request('GET', '/v0/wallet', { key: agent.key })).body.networks).toContainEqual(expect.objectContaining({ caip2: DEVNET, address: agent.solana }));
  const stored = await server.app.db.collection('solana_wallets').findOne({ address: agent.solana });
  expect(stored).toMatchObject({ identityId: agent.owner.identityId, secretKey: expect.objectContaining({ ciphertext: expect.any(String) }) });
  expect(JSON.stringify(stored)).not.toMatch(/"[0-9a-f]{64}"/);
});

test("payments_pay pays an official seller's Solana offer under the mandate: the seller is paid, the mandate counts it", async () => {
  const agent = await solanaAgent(100_000n);
  const { mandateId } = await createMandate(server, agent.key, { maxPerCallUsdc: '0.05', dailyCapUsdc: '0.05' });
  const payToBefore = await chain.usdcBalance(official.payTo.address);
  const res = await pay(server, agent.key, { url: `${official.url}/quote`, mandateId });
  expect(res.status).toBe(200);
  expect(res.body).toMatchObject({ paid: true, status: 200, cost: { amountUsdc: '0.02', network: 'solana-devnet', caip2: DEVNET }, payer: agent.solana, recipient: official.payTo.address });
  expect(res.body.txHash).toEqual(expect.any(String));
  expect(await chain.usdcBalance(agent.solana as never)).toBe(100_000n - PRICE);
  expect(await chain.usdcBalance(official.payTo.address)).toBe(payToBefore + PRICE);
  // The mandate's daily cap counts Solana payments as any other: two more would pass 0.05.
  await pay(server, agent.key, { url: `${official.url}/quote`, mandateId });
  const refused = await pay(server, agent.key, { url: `${official.url}/quote`, mandateId });
  expect(refused.body).toMatchObject({ ok: false, error: 'mandate_daily_cap_exceeded' });
  expect(await chain.usdcBalance(agent.solana as never)).toBe(100_000n - 2n * PRICE);
});

test('a route offering Base and Solana is paid on Solana when only the Solana wallet is funded; naming the network works too', async () => {
  const agent = await solanaAgent(50_000n);
  await createMandate(server, agent.key);
  const before = await chain.usdcBalance(ours.payTo.address);
  const first = await pay(server, agent.key, { url: `${ours.url}/weather?city=Oslo` });
  expect(first.body).toMatchObject({ paid: true, status: 200, cost: { network: 'solana-devnet' }, recipient: ours.payTo.address });
  const second = await pay(server, agent.key, { url: `${ours.url}/weather?city=Oslo`, network: 'solana-devnet' });
  expect(second.body).toMatchObject({ paid: true, cost: { network: 'solana-devnet' } });
  expect(await chain.usdcBalance(ours.payTo.address)).toBe(before + 20_000n);
  expect(await chain.usdcBalance(agent.solana as never)).toBe(30_000n);
});

test('an unfunded Solana wallet is refused before anything is signed, with what it holds; a dry run moves nothing', async () => {
  const agent = await solanaAgent(1n);
  await createMandate(server, agent.key);
  const refused = await pay(server, agent.key, { url: `${official.url}/quote` });
  expect(refused).toMatchObject({ status: 402, body: { ok: false, error: 'balance_insufficient' } });
  expect(refused.body.message).toContain(agent.solana);
  const rich = await solanaAgent(100_000n);
  await createMandate(server, rich.key);
  const dry = await pay(server, rich.key, { url: `${official.url}/quote`, dryRun: true });
  expect(dry.body).toMatchObject({ paid: false, dryRun: true, cost: { network: 'solana-devnet' }, payer: rich.solana });
  expect(await chain.usdcBalance(rich.solana as never)).toBe(100_000n);
});
