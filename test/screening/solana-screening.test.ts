/**
 * Sanctions screening on Solana, as an operator runs it (SCREENING_LIST_FILE naming Solana addresses, which
 * are case-sensitive base58) and as official SDK buyers and sellers meet it: a listed payer, and a seller
 * whose Solana payTo is listed, are refused with `sanctioned_address` at /verify; no USDC moves and the
 * refusal is in the seller's activity log. An unlisted buyer pays, and the org's usage counts the
 * settlement under its Solana network.
 */
import express from 'express';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { x402Client } from '@x402/core/client';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { x402ResourceServer } from '@x402/core/server';
import { ExactSvmScheme as ExactSvmClient } from '@x402/svm/exact/client';
import { registerExactSvmScheme as registerServerSvm } from '@x402/svm/exact/server';
import { paymentMiddleware as officialPaymentMiddleware } from '@x402/express';
import { wrapFetchWithPayment } from '@x402/fetch';
import type { KeyPairSigner } from '@solana/kit';
import { solanaAccount, solanaForTests } from '../support/solana.js';
import type { DevSolana } from '../../server/dev/solana/dev-solana.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { ourFacilitator, serve, setUpSeller, type RunningApp } from '../interop/seller.js';
import { screeningRefusalLogged } from './refusal-log.js';

const PRICE = 10_000n;
const DEVNET = 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1';

let chain: DevSolana;
let server: TestServer;
const shops: RunningApp[] = [];
let listed: KeyPairSigner;
let listedPayTo: KeyPairSigner;

beforeAll(async () => {
  const solana = await solanaForTests();
  chain = solana.chain;
  [listed, listedPayTo] = [await solanaAccount(chain, 1_000_000n), await solanaAccount(chain)];
  const listFile = join(mkdtempSync(join(tmpdir(), 'screening-svm-')), 'sdn-sol.txt');
  writeFileSync(listFile, `# sanctioned SOL addresses\n${listed.address}\n${listedPayTo.address}\n`);
  server = await startTestServer({ NETWORKS: 'base-sepolia,solana-devnet', ...solana.env, SCREENING_LIST_FILE: listFile });
}, 60_000);

afterAll(async () => {
  for (const shop of shops) await shop.close();
  await server?.close();
  await chain?.stop();
});

/** A seller accepting on Solana at `payTo`, behind an official @x402/express seller with us as its facilitator. */
async function officialShop(payTo: KeyPairSigner) {
  const seller = await setUpSeller(server);
  const acceptance = await server.request('PUT', '/v0/payments/acceptance', { key: seller.platformKey, body: { enabled: true, payTo: seller.payTo, payToByNetwork: { [DEVNET]: payTo.address } } });
  expect(acceptance.status).toBe(200);
  const app = express();
  app.use(officialPaymentMiddleware({
    'GET /report': { accepts: [{ scheme: 'exact', network: DEVNET, payTo: payTo.address, price: { asset: chain.usdcMint, amount: String(PRICE) } }], description: 'Report', mimeType: 'application/json' },
  }, registerServerSvm(new x402ResourceServer(ourFacilitator(server, seller.sellerKey)), { networks: [DEVNET] })));
  app.get('/report', (_req, res) => { res.json({ report: 'done' }); });
  const shop = await serve(app);
  shops.push(shop);
  return { seller, url: `${shop.url}/report` };
}

const pay = (buyer: KeyPairSigner, url: string) => wrapFetchWithPayment(fetch, new x402Client().register(DEVNET, new ExactSvmClient(buyer, { rpcUrl: chain.rpcUrl })))(url);

it('a payer the list names is refused (sanctioned_address): no USDC moves, the refusal is logged with the list as its source', async () => {
  const payTo = await solanaAccount(chain);
  const { seller, url } = await officialShop(payTo);
  const res = await pay(listed, url);
  expect(res.status).toBe(402);
  expect(decodePaymentRequiredHeader(res.headers.get('payment-required')!).error).toContain('sanctioned_address');
  expect(await chain.usdcBalance(listed.address)).toBe(1_000_000n);
  expect(await chain.usdcBalance(payTo.address)).toBe(0n);
  expect(await screeningRefusalLogged(server, seller.platformKey, listed.address)).toMatchObject({ metadata: { source: 'list', role: 'payer', network: 'solana-devnet' } });
});

it('a seller whose Solana payTo the list names is refused; an unlisted buyer and payTo pay, counted in usage under solana-devnet', async () => {
  const buyer = await solanaAccount(chain, 1_000_000n);
  const refused = await officialShop(listedPayTo);
  const res = await pay(buyer, refused.url);
  expect(res.status).toBe(402);
  expect(decodePaymentRequiredHeader(res.headers.get('payment-required')!).error).toContain('sanctioned_address');
  expect(await chain.usdcBalance(buyer.address)).toBe(1_000_000n);
  expect(await screeningRefusalLogged(server, refused.seller.platformKey, listedPayTo.address)).toMatchObject({ metadata: { source: 'list', role: 'payTo' } });

  const payTo = await solanaAccount(chain);
  const clean = await officialShop(payTo);
  expect((await pay(buyer, clean.url)).status).toBe(200);
  expect(await chain.usdcBalance(payTo.address)).toBe(PRICE);
  const usage = await server.request('GET', '/v0/usage', { key: clean.seller.platformKey });
  expect(usage.body.settlements).toEqual([{ scheme: 'exact', network: 'solana-devnet', count: 1 }]);
});
