/**
 * x402 `exact` on Solana with agentgate as the facilitator (NETWORKS=base-sepolia,solana-devnet), on the
 * local Solana (LiteSVM behind the JSON-RPC API, standing in for Devnet). An official @x402/express
 * seller with @x402/svm's exact server scheme uses our facilitator; official @x402/fetch buyers with
 * @x402/svm's exact client pay it. What a seller, a buyer and an operator would check: the USDC moved
 * once, to the seller's Solana address; the payment is recorded with its network and a signed receipt;
 * a replayed transaction moves nothing, even sent to two backends at the same instant; and every way of
 * cheating the fee payer or the seller is refused with the spec's reason, nothing moving.
 */
import express from 'express';
import { x402Client } from '@x402/core/client';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from '@x402/core/http';
import { HTTPFacilitatorClient, x402ResourceServer } from '@x402/core/server';
import { ExactSvmScheme as ExactSvmClient } from '@x402/svm/exact/client';
import { registerExactSvmScheme as registerServerSvm } from '@x402/svm/exact/server';
import { paymentMiddleware as officialPaymentMiddleware } from '@x402/express';
import { wrapFetchWithPayment } from '@x402/fetch';
import { AccountRole, address, createKeyPairSignerFromPrivateKeyBytes, getAddressEncoder, getBase64EncodedWireTransaction, getBase64Encoder, getTransactionDecoder, type Address, type KeyPairSigner } from '@solana/kit';
import { PYTHON_SVM_BUYER_SCRIPT, runPythonBuyer, x402Python } from '../support/python-sdk.js';
import { EXACT_SVM_REASONS as R, MEMO_PROGRAM_ADDRESS, verifyReceipt, type DidDocument } from 'agentgate-x402-wire';
import { startTestServer, type TestServer } from '../support/server.js';
import { startRpcProxy, type RpcProxy } from '../support/rpc-proxy.js';
import { consoleGet, signIn } from '../console/http-client.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { PAID_TOOL, startWeatherMcp } from '../../examples/mcp-paid-tool/server.js';
import { startReceiver } from '../webhooks/receiver.js';
import { verifyWebhook } from '../../middleware/index.js';
import { buildSolanaPayment, solanaAccount, solanaForTests, type PaymentTweaks } from '../support/solana.js';
import type { DevSolana } from '../../server/dev/solana/dev-solana.js';
import { registerEndpoint, serve, setUpSeller, type RunningApp } from './seller.js';
import { createWeatherApp as createExpressApp } from '../../examples/express-seller/server.js';
import { createWeatherApp as createKoaApp } from '../../examples/koa-seller/server.js';
import { createWeatherApp as createHonoApp } from '../../examples/hono-seller/server.js';
import { createWeatherApp as createFastifyApp } from '../../examples/fastify-seller/server.js';

const PRICE = 10_000n;
let chain: DevSolana;
let feePayer: KeyPairSigner;
let server: TestServer;
let seller: Awaited<ReturnType<typeof setUpSeller>>;
let sellerSolana: KeyPairSigner;
let shop: RunningApp;
const DEVNET = 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1';

beforeAll(async () => {
  const solana = await solanaForTests();
  chain = solana.chain;
  feePayer = solana.feePayer;
  server = await startTestServer({ NETWORKS: 'base-sepolia,solana-devnet', ...solana.env });
  seller = await setUpSeller(server);
  // The seller's Solana address, with its USDC token account (a transfer needs the account to exist).
  sellerSolana = await solanaAccount(chain);
  const acceptance = await server.request('PUT', '/v0/payments/acceptance', { key: seller.platformKey, body: { enabled: true, payTo: seller.payTo, payToByNetwork: { [DEVNET]: sellerSolana.address } } });
  if (acceptance.status !== 200) throw new Error(`acceptance: ${acceptance.status} ${acceptance.text}`);
  shop = await officialSeller();
}, 60_000);

afterAll(async () => {
  await shop?.close();
  await server?.close();
  await chain?.stop();
});

const facilitatorClient = () => new HTTPFacilitatorClient({
  url: `${server.url}/v0/x402`,
  createAuthHeaders: async () => { const h = { Authorization: `Bearer ${seller.sellerKey}` }; return { verify: h, settle: h, supported: h }; },
});

/** An official @x402/express seller of GET /report on Solana Devnet, with agentgate as its facilitator. */
async function officialSeller() {
  const resourceServer = registerServerSvm(new x402ResourceServer(facilitatorClient()), { networks: [DEVNET] });
  const app = express();
  app.use(officialPaymentMiddleware({
    'GET /report': {
      accepts: [{ scheme: 'exact', network: DEVNET, payTo: sellerSolana.address, price: { asset: chain.usdcMint, amount: String(PRICE) } }],
      description: 'Report', mimeType: 'application/json',
    },
  }, resourceServer));
  app.get('/report', (_req, res) => { res.json({ report: 'done' }); });
  return serve(app);
}

const officialBuyer = (signer: KeyPairSigner) => wrapFetchWithPayment(fetch, new x402Client().register(DEVNET, new ExactSvmClient(signer, { rpcUrl: chain.rpcUrl })));

test('/supported lists exact on Solana Devnet, v2 and v1, with its fee payer', async () => {
  const supported = await (await fetch(`${server.url}/v0/x402/supported`)).json() as { kinds: Array<{ x402Version: number; scheme: string; network: string; extra?: { feePayer?: string } }>; signers: Record<string, string[]> };
  expect(supported.kinds).toEqual(expect.arrayContaining([
    { x402Version: 2, scheme: 'exact', network: DEVNET, extra: { feePayer: feePayer.address } },
    { x402Version: 1, scheme: 'exact', network: 'solana-devnet', extra: { feePayer: feePayer.address } },
  ]));
  expect(supported.signers['solana:*']).toEqual([feePayer.address]);
});

test('an official buyer pays an official seller on Solana through agentgate: USDC moves once, recorded with a signed receipt', async () => {
  const buyer = await solanaAccount(chain, 1_000_000n);
  const unpaid = await fetch(`${shop.url}/report`);
  const offered = decodePaymentRequiredHeader(unpaid.headers.get('payment-required')!).accepts[0]!;
  expect(offered).toMatchObject({ scheme: 'exact', network: DEVNET, payTo: sellerSolana.address, asset: chain.usdcMint, amount: String(PRICE), extra: { feePayer: feePayer.address } });

  const sellerBefore = await chain.usdcBalance(sellerSolana.address);
  const res = await officialBuyer(buyer)(`${shop.url}/report`);
  expect({ status: res.status, refusal: res.status === 402 ? decodePaymentRequiredHeader(res.headers.get('payment-required')!).error : undefined }).toEqual({ status: 200, refusal: undefined });
  expect(await res.json()).toEqual({ report: 'done' });
  const settled = decodePaymentResponseHeader(res.headers.get('payment-response')!);
  expect(settled).toMatchObject({ success: true, network: DEVNET, payer: buyer.address });
  expect(await chain.usdcBalance(buyer.address)).toBe(1_000_000n - PRICE);
  expect(await chain.usdcBalance(sellerSolana.address)).toBe(sellerBefore + PRICE);
  // The fee payer paid the fee, not the buyer (whose SOL is untouched).
  expect(chain.ledger.balance(buyer.address)).toBe(1_000_000_000n);

  // The seller's records name the network and the transaction, with a receipt that verifies.
  await server.app.payments.records.recordsWritten();
  const list = await server.request('GET', '/v0/payments?limit=5&network=solana-devnet', { key: seller.platformKey });
  const record = (list.body.payments as Array<Record<string, unknown>>).find((p) => p.txHash === settled.transaction);
  expect(record).toMatchObject({ network: 'solana-devnet', status: 'settled', payerAddress: buyer.address, recipientAddress: sellerSolana.address, amountUsdcRaw: String(PRICE), assetTransferMethod: 'spl-transfer-checked' });
  // As an ops person would: its receipt against the service's DID document.
  const payment = await server.app.payments.records.record(record!.id as string);
  const didDocument = await (await fetch(`${server.url}/.well-known/did.json`)).json() as DidDocument;
  expect(payment!.signedReceipt).toMatchObject({ body: { network: 'solana-devnet', txHash: settled.transaction, payerAddress: buyer.address, amountUsdcRaw: String(PRICE) } });
  expect(await verifyReceipt(payment!.signedReceipt!, didDocument)).toEqual({ ok: true });
  // Counted under its own network, as an operator's dashboard reads it.
  await server.app.metrics.render();
  const metrics = await server.app.metrics.registry.getMetricsAsJSON();
  const values = (name: string) => metrics.find((m) => m.name === name)!.values as Array<{ labels: Record<string, string>; value: number }>;
  expect(values('agentgate_paid_requests_total').some((v) => v.labels.network === DEVNET && v.labels.outcome === 'settled' && v.labels.door === 'facilitator')).toBe(true);
  // And what its fee payer has left to pay fees with, read at the scrape.
  expect(values('agentgate_solana_fee_payer_balance_sol')).toContainEqual(expect.objectContaining({ labels: { fee_payer: feePayer.address, network: DEVNET }, value: Number(chain.ledger.balance(feePayer.address)) / 1e9 }));
  // And in the console, as an ops person looks at it.
  const { cookie } = await signIn(server, seller.platformKey);
  const page = await consoleGet(server, `/console/payments/${record!.id as string}`, cookie);
  expect(page.status).toBe(200);
  expect(page.text).toContain(settled.transaction);
  expect(page.text).toContain('solana-devnet');
  const filtered = await consoleGet(server, '/console/payments?network=solana-devnet', cookie);
  expect(filtered.status).toBe(200);
  expect(filtered.text).toContain(record!.id as string);
  // A refund is not agentgate's to make here (the USDC went straight to the seller's address): said clearly.
  const refund = await server.request('POST', `/v0/payments/${record!.id as string}/refund`, { key: seller.platformKey, body: { reason: 'not delivered' } });
  expect(refund).toMatchObject({ status: 409, body: { error: 'refund_not_possible' } });
});

/** A facilitator /settle (or /verify) of a hand-made payment, as a seller's resource server sends it. */
async function facilitate(path: 'verify' | 'settle', transaction: string, requirementsChange: Record<string, unknown> = {}) {
  const requirements = { scheme: 'exact', network: DEVNET, amount: String(PRICE), asset: chain.usdcMint, payTo: sellerSolana.address, maxTimeoutSeconds: 60, extra: { feePayer: feePayer.address }, ...requirementsChange };
  const body = { x402Version: 2, paymentPayload: { x402Version: 2, accepted: requirements, payload: { transaction }, resource: { url: `${shop.url}/report` } }, paymentRequirements: requirements };
  return server.request('POST', `/v0/x402/${path}`, { key: seller.sellerKey, body });
}

test('a replayed transaction moves money once, even sent to two backends at the same instant', async () => {
  const second = await startTestServer({ NETWORKS: 'base-sepolia,solana-devnet', MONGODB_DB: server.config.MONGODB_DB, SOLANA_DEVNET_RPC_URL: chain.rpcUrl, SOLANA_DEVNET_FEE_PAYER_KEYS: server.config.solanaNetworks[0]!.feePayerKeys.join(',') });
  try {
    const buyer = await solanaAccount(chain, 1_000_000n);
    const payment = await buildSolanaPayment(chain, buyer, feePayer.address, sellerSolana.address, PRICE);
    const sellerBefore = await chain.usdcBalance(sellerSolana.address);
    const requirements = { scheme: 'exact', network: DEVNET, amount: String(PRICE), asset: chain.usdcMint, payTo: sellerSolana.address, maxTimeoutSeconds: 60, extra: { feePayer: feePayer.address } };
    const body = { x402Version: 2, paymentPayload: { x402Version: 2, accepted: requirements, payload: { transaction: payment } }, paymentRequirements: requirements };
    const answers = await Promise.all([server, second, server, second].map((backend) => backend.request('POST', '/v0/x402/settle', { key: seller.sellerKey, body })));
    const outcomes = answers.map((a) => (a.body.success ? 'settled' : a.body.errorReason)).sort();
    expect(outcomes).toEqual([R.duplicateSettlement, R.duplicateSettlement, R.duplicateSettlement, 'settled']);
    expect(await chain.usdcBalance(sellerSolana.address)).toBe(sellerBefore + PRICE);
    expect(await chain.usdcBalance(buyer.address)).toBe(1_000_000n - PRICE);
    // And again later: still refused, still once.
    const later = await second.request('POST', '/v0/x402/settle', { key: seller.sellerKey, body });
    expect(later.body).toMatchObject({ success: false, errorReason: R.duplicateSettlement });
    expect(await chain.usdcBalance(sellerSolana.address)).toBe(sellerBefore + PRICE);
  } finally {
    await second.stop();
  }
});

describe('a settlement whose answer was lost is finished from the chain', () => {
  let proxy: RpcProxy;
  let backend: TestServer;
  beforeAll(async () => {
    // A backend reaching the chain through a proxy that can fail it, answering a buyer after 2 s at most and
    // reconciling open payments older than 3 s every 0.5 s.
    proxy = await startRpcProxy(chain.rpcUrl);
    backend = await startTestServer({ NETWORKS: 'base-sepolia,solana-devnet', MONGODB_DB: server.config.MONGODB_DB, SOLANA_DEVNET_RPC_URL: proxy.url, SOLANA_DEVNET_FEE_PAYER_KEYS: server.config.solanaNetworks[0]!.feePayerKeys.join(','), SETTLEMENT_TIMEOUT_MS: '2000', RECONCILE_AFTER_MS: '3000', RECONCILE_EVERY_MS: '500' });
  });
  afterAll(async () => {
    await backend?.stop();
    await proxy?.close();
  });

  const settle = async (transaction: string) => {
    const requirements = { scheme: 'exact', network: DEVNET, amount: String(PRICE), asset: chain.usdcMint, payTo: sellerSolana.address, maxTimeoutSeconds: 60, extra: { feePayer: feePayer.address } };
    return backend.request('POST', '/v0/x402/settle', { key: seller.sellerKey, body: { x402Version: 2, paymentPayload: { x402Version: 2, accepted: requirements, payload: { transaction } }, paymentRequirements: requirements } });
  };
  const recordOf = async (txHash: string) => (await backend.app.payments.records.payments.findOne({ txHash }).lean());

  test('a send the node took but whose answer was lost: settled in the same request, once', async () => {
    const buyer = await solanaAccount(chain, 1_000_000n);
    const sellerBefore = await chain.usdcBalance(sellerSolana.address);
    proxy.afterForward.refuse({ method: 'sendTransaction', times: 1 });
    const answer = await settle(await buildSolanaPayment(chain, buyer, feePayer.address, sellerSolana.address, PRICE));
    expect(answer.body).toMatchObject({ success: true, payer: buyer.address });
    expect(await chain.usdcBalance(sellerSolana.address)).toBe(sellerBefore + PRICE);
  });

  test('a send that never reached the chain: answered pending, then sent again and settled by reconciliation, once', async () => {
    const buyer = await solanaAccount(chain, 1_000_000n);
    const sellerBefore = await chain.usdcBalance(sellerSolana.address);
    proxy.rpcError({ code: -32005, message: 'Node is behind' }, { method: 'sendTransaction', times: 1 });
    const answer = await settle(await buildSolanaPayment(chain, buyer, feePayer.address, sellerSolana.address, PRICE));
    expect(answer.body).toMatchObject({ success: false, errorReason: R.settlementPending });
    const txHash = answer.body.transaction as string;
    expect(await chain.usdcBalance(sellerSolana.address)).toBe(sellerBefore);
    expect(await recordOf(txHash)).toMatchObject({ status: 'verified', txHash });
    // Reconciliation sends it again while its blockhash lives, and records what the chain did.
    const deadline = Date.now() + 15_000;
    while ((await recordOf(txHash))?.status !== 'settled' && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await recordOf(txHash)).toMatchObject({ status: 'settled', txHash, signedReceipt: expect.anything() });
    expect(await chain.usdcBalance(sellerSolana.address)).toBe(sellerBefore + PRICE);
  });
});

describe('a payment that cheats is refused with the reason, and nothing moves', () => {
  let buyer: KeyPairSigner;
  let other: KeyPairSigner;
  beforeAll(async () => {
    buyer = await solanaAccount(chain, 1_000_000n);
    other = await solanaAccount(chain);
  });

  const cases: Array<[string, () => PaymentTweaks, string]> = [
    ['names the fee payer in an instruction', () => ({ extra: [{ programAddress: address(MEMO_PROGRAM_ADDRESS), accounts: [{ address: feePayer.address, role: AccountRole.READONLY }], data: new TextEncoder().encode('x') }] }), R.feePayerInInstruction],
    ['transfers less', () => ({ amount: PRICE - 1n }), R.amountMismatch],
    ['transfers to another account', () => ({ destinationOwner: other.address }), R.recipientMismatch],
    ['uses another mint', () => ({ mint: address('So11111111111111111111111111111111111111112') }), R.mintMismatch],
    ['sets a compute-unit price above the cap', () => ({ microLamports: 5_000_001n }), R.computePriceTooHigh],
    ['asks for more compute units than the cap', () => ({ computeUnits: 1_400_000 }), R.computeLimitTooHigh],
  ];

  test.each(cases)('a transaction that %s', async (_what, tweaks, reason) => {
    const transaction = await buildSolanaPayment(chain, buyer, feePayer.address, sellerSolana.address, PRICE, tweaks());
    const before = [await chain.usdcBalance(buyer.address), await chain.usdcBalance(sellerSolana.address), await chain.usdcBalance(other.address), chain.ledger.balance(feePayer.address)];
    const verified = await facilitate('verify', transaction);
    expect(verified.body).toMatchObject({ isValid: false, invalidReason: reason, payer: buyer.address });
    const settled = await facilitate('settle', transaction);
    expect(settled.body).toMatchObject({ success: false, errorReason: reason, transaction: '' });
    expect([await chain.usdcBalance(buyer.address), await chain.usdcBalance(sellerSolana.address), await chain.usdcBalance(other.address), chain.ledger.balance(feePayer.address)]).toEqual(before);
  });

  test('an expired blockhash gets a clear refusal, and nothing moves', async () => {
    const stale = chain.ledger.latestBlockhash();
    chain.ledger.advance(151);
    const transaction = await buildSolanaPayment(chain, buyer, feePayer.address, sellerSolana.address, PRICE, { blockhash: stale });
    const before = await chain.usdcBalance(buyer.address);
    const settled = await facilitate('settle', transaction);
    expect(settled.body).toMatchObject({ success: false, errorReason: R.simulationFailed });
    expect(settled.body.errorMessage).toMatch(/blockhash has expired/);
    expect(await chain.usdcBalance(buyer.address)).toBe(before);
  });

  test("a transfer the chain would refuse (the buyer lacks the USDC) is refused with the chain's reason and its claim let go: once funded, the same transaction settles", async () => {
    const poor = await solanaAccount(chain);
    const transaction = await buildSolanaPayment(chain, poor, feePayer.address, sellerSolana.address, PRICE);
    const feesBefore = chain.ledger.balance(feePayer.address);
    const refused = await facilitate('settle', transaction);
    expect(refused.body).toMatchObject({ success: false, errorReason: R.simulationFailed, transaction: '' });
    expect(chain.ledger.balance(feePayer.address)).toBe(feesBefore);
    await chain.fund(poor.address, PRICE, 0n);
    const settled = await facilitate('settle', transaction);
    expect(settled.body).toMatchObject({ success: true, payer: poor.address });
    expect(await chain.usdcBalance(poor.address)).toBe(0n);
  });

  test('a transaction that already landed (a send whose answer was lost) is settled as landed, not refused, and moves money once', async () => {
    const transaction = await buildSolanaPayment(chain, buyer, feePayer.address, sellerSolana.address, PRICE);
    // The co-signed transaction reaches the chain before this facilitator claims it (the test holds the fee payer's key).
    const [signatures] = await feePayer.signTransactions([getTransactionDecoder().decode(getBase64Encoder().encode(transaction)) as never]);
    const decoded = getTransactionDecoder().decode(getBase64Encoder().encode(transaction));
    const complete = getBase64EncodedWireTransaction({ ...decoded, signatures: { ...decoded.signatures, ...signatures } } as never);
    const before = [await chain.usdcBalance(buyer.address), await chain.usdcBalance(sellerSolana.address)];
    chain.ledger.process(new Uint8Array(getBase64Encoder().encode(complete)));
    const settled = await facilitate('settle', transaction);
    expect(settled.body).toMatchObject({ success: true, payer: buyer.address });
    expect([await chain.usdcBalance(buyer.address), await chain.usdcBalance(sellerSolana.address)]).toEqual([before[0]! - PRICE, before[1]! + PRICE]);
  });

  test("a fee payer that is not this facilitator's, or a payTo that is not the seller's, is refused before anything is read", async () => {
    const stranger = await solanaAccount(chain);
    const transaction = await buildSolanaPayment(chain, buyer, stranger.address, sellerSolana.address, PRICE);
    expect((await facilitate('verify', transaction, { extra: { feePayer: stranger.address } })).body).toMatchObject({ isValid: false, invalidReason: R.feePayerNotManaged });
    const toOther = await buildSolanaPayment(chain, buyer, feePayer.address, other.address, PRICE);
    expect((await facilitate('settle', toOther, { payTo: other.address })).body).toMatchObject({ success: false, errorReason: 'invalid_payment_requirements' });
  });
});

describe.each([['Express', createExpressApp], ['Koa', createKoaApp], ['Hono', createHonoApp], ['Fastify', createFastifyApp]] as const)('our %s middleware', (_framework, create) => {
  let app: RunningApp;
  beforeAll(async () => {
    app = await serve(create({ backendUrl: server.url, apiKey: seller.sellerKey }));
    const registered = await registerEndpoint(server, seller.platformKey, { url: `${app.url}/weather`, priceUsdc: '0.01' });
    if (registered.status !== 201) throw new Error(`registration: ${registered.status} ${JSON.stringify(registered.body)}`);
    const dynamic = await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: `${app.url}/forecast`, maxPriceUsdc: '0.07' } });
    if (dynamic.status !== 201) throw new Error(`registration: ${dynamic.status} ${JSON.stringify(dynamic.body)}`);
  });
  afterAll(() => app?.close());

  test('a price computed per request is asked and paid on Solana too ($0.01 a day: 3 days, $0.03)', async () => {
    const unpaid = await fetch(`${app.url}/forecast?city=Oslo&days=3`);
    expect(decodePaymentRequiredHeader(unpaid.headers.get('payment-required')!).accepts.find((a) => a.network === DEVNET)).toMatchObject({ amount: '30000', payTo: sellerSolana.address });
    const buyer = await solanaAccount(chain, 1_000_000n);
    const res = await officialBuyer(buyer)(`${app.url}/forecast?city=Oslo&days=3`);
    expect(res.status).toBe(200);
    expect(await chain.usdcBalance(buyer.address)).toBe(1_000_000n - 30_000n);
  });

  test('offers Solana beside Base; the official Solana client pays it, settled before the handler, recorded for the endpoint', async () => {
    const unpaid = await fetch(`${app.url}/weather?city=Oslo`);
    const accepts = decodePaymentRequiredHeader(unpaid.headers.get('payment-required')!).accepts;
    expect(accepts.map((a) => a.network)).toEqual(['eip155:84532', DEVNET]);
    expect(accepts[1]).toMatchObject({ scheme: 'exact', amount: String(PRICE), asset: chain.usdcMint, payTo: sellerSolana.address, extra: { feePayer: feePayer.address } });

    const buyer = await solanaAccount(chain, 1_000_000n);
    const sellerBefore = await chain.usdcBalance(sellerSolana.address);
    const res = await officialBuyer(buyer)(`${app.url}/weather?city=Oslo`);
    expect({ status: res.status, refusal: res.status === 402 ? decodePaymentRequiredHeader(res.headers.get('payment-required')!).error : undefined }).toEqual({ status: 200, refusal: undefined });
    expect(await res.json()).toMatchObject({ city: 'Oslo' });
    const settled = decodePaymentResponseHeader(res.headers.get('payment-response')!);
    expect(settled).toMatchObject({ success: true, network: DEVNET, payer: buyer.address });
    expect(await chain.usdcBalance(sellerSolana.address)).toBe(sellerBefore + PRICE);
    expect(await chain.usdcBalance(buyer.address)).toBe(1_000_000n - PRICE);

    await server.app.payments.records.recordsWritten();
    const list = await server.request('GET', '/v0/payments?limit=20', { key: seller.platformKey });
    const record = (list.body.payments as Array<Record<string, unknown>>).find((p) => p.txHash === settled.transaction);
    expect(record).toMatchObject({ network: 'solana-devnet', status: 'settled', payerAddress: buyer.address, resourceUrl: `${app.url}/weather` });
    expect(record!.endpointId).toEqual(expect.stringMatching(/^ep_/));
  });
});

test("the official Python SDK's Solana client pays our Express seller's Solana offer", async () => {
  const python = x402Python((line) => process.stderr.write(`[python-sdk] ${line}\n`));
  const app = await serve(createExpressApp({ backendUrl: server.url, apiKey: seller.sellerKey }));
  try {
    const registered = await registerEndpoint(server, seller.platformKey, { url: `${app.url}/weather`, priceUsdc: '0.01' });
    expect(registered.status).toBe(201);
    const seed = crypto.getRandomValues(new Uint8Array(32));
    const buyer = await createKeyPairSignerFromPrivateKeyBytes(seed);
    await chain.fund(buyer.address, 1_000_000n, 0n);
    const secretKey = Buffer.concat([Buffer.from(seed), Buffer.from(getAddressEncoder().encode(buyer.address))]).toString('hex');
    const before = await chain.usdcBalance(sellerSolana.address);
    const run = await runPythonBuyer<{ status: number; body: string; settlement: { success: boolean; network: string; payer: string } | null }>(python, { BUYER_SECRET_KEY: secretKey, RPC_URL: chain.rpcUrl, NETWORK: DEVNET, EXACT_URL: `${app.url}/weather?city=Oslo` }, PYTHON_SVM_BUYER_SCRIPT);
    expect(run).toMatchObject({ status: 200, settlement: { success: true, network: DEVNET, payer: buyer.address } });
    expect(JSON.parse(run.body)).toMatchObject({ city: 'Oslo' });
    expect(await chain.usdcBalance(sellerSolana.address)).toBe(before + PRICE);
    expect(await chain.usdcBalance(buyer.address)).toBe(1_000_000n - PRICE);
  } finally {
    await app.close();
  }
}, 120_000);

test('a paid MCP tool offers Solana too: a payment the official SVM client makes for it is redeemed before the tool runs, recorded for the tool, and its payment.received webhook sent', async () => {
  const receiver = await startReceiver();
  const endpoint = await server.request('POST', '/v0/payments/endpoints', { key: seller.platformKey, body: { url: `mcp://tool/${PAID_TOOL}`, priceUsdc: '0.01', description: 'forecast tool', webhookUrl: receiver.url } });
  expect(endpoint.status).toBe(201);
  const calls: string[] = [];
  const mcp = await startWeatherMcp({ backendUrl: server.url, apiKey: seller.sellerKey, onPaidCall: (city) => calls.push(city) });
  const client = new Client({ name: 'solana-buyer', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(mcp.url)));
  try {
    const call = (meta?: Record<string, unknown>) => client.callTool({ name: PAID_TOOL, arguments: { city: 'Oslo' }, ...(meta ? { _meta: meta } : {}) }) as Promise<any>;
    const required = (await call()).structuredContent;
    const onSolana = required.accepts.find((a: { network: string }) => a.network === DEVNET);
    expect(onSolana).toMatchObject({ scheme: 'exact', amount: String(PRICE), asset: chain.usdcMint, payTo: sellerSolana.address, extra: { feePayer: feePayer.address } });
    const buyer = await solanaAccount(chain, 1_000_000n);
    const built = await new ExactSvmClient(buyer, { rpcUrl: chain.rpcUrl }).createPaymentPayload(2, onSolana);
    const before = await chain.usdcBalance(sellerSolana.address);
    const paid = await call({ 'x402/payment': { ...built, accepted: onSolana, resource: required.resource } });
    expect(paid.isError).toBeFalsy();
    expect(paid._meta['x402/payment-response']).toMatchObject({ success: true, network: DEVNET, payer: buyer.address });
    expect(calls).toEqual(['Oslo']);
    expect(await chain.usdcBalance(sellerSolana.address)).toBe(before + PRICE);
    await server.app.payments.records.recordsWritten();
    const record = await server.app.payments.records.payments.findOne({ txHash: paid._meta['x402/payment-response'].transaction }).lean();
    expect(record).toMatchObject({ network: 'solana-devnet', status: 'settled', resourceUrl: `mcp://tool/${PAID_TOOL}`, endpointId: endpoint.body.id });
    // The seller's webhook, signed with the endpoint's secret, as for an EVM payment.
    await receiver.next(1);
    const hook = receiver.received[0]!;
    expect(verifyWebhook(hook.raw, hook.headers['x-service-signature'] as string, endpoint.body.webhookSecret)).toBe(true);
    expect(hook.json).toMatchObject({ event: 'payment.received', paymentId: record!._id, body: { txHash: record!.txHash, resourceUrl: `mcp://tool/${PAID_TOOL}` } });
  } finally {
    await client.close();
    await mcp.close();
    await receiver.close();
  }
});

export type { Address };
