import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BackendRequestError, createBackendClient } from '../../middleware/backend-client.js';
import { createBackendPaywall } from '../../middleware/backend-paywall.js';
import { FacilitatorUnavailable } from '../../middleware/facilitator.js';
import { createPaymentsClient } from '../../middleware/payments-client.js';
import { anvilSettings } from './fixtures.js';
import { nodeTransport } from '../../adapters/node-transport.js';

type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void;

/** A real HTTP server standing in for the backend; each test sets what it answers. */
let handler: Handler;
const seen: { method: string; url: string; authorization?: string; body: string }[] = [];
let server: Server;
let backendUrl: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, authorization: req.headers.authorization, body });
      handler(req, body, res);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  backendUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});
afterAll(async () => {
  server.closeAllConnections();
  server.close();
});
beforeEach(() => {
  seen.length = 0;
});

function json(status: number, value: unknown): Handler {
  return (_req, _body, res) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(value));
  };
}

const apiKey = 'loid-test-key';
const redeemRequest = {
  paymentHeader: 'eyJ4IjoxfQ==',
  version: 1 as const,
  resource: 'https://shop.example/weather',
  amountAtomic: 10_000n,
  requirement: {} as never,
};
const paymentResponse = { success: true, transaction: '0xabc', network: 'anvil', payer: '0x2222222222222222222222222222222222222222' };

describe.each([['fetch', undefined], ['node:http (the Node adapters)', nodeTransport]] as const)('backend client over %s', (_name, transport) => {
  test('refuses a key that is not a seller key', () => {
    expect(() => createBackendClient({ backendUrl: 'http://x', apiKey: 'sk-123' })).toThrow(/loid-/);
  });

  test('redeem: POST /v0/payments/redeem with the seller key and a decimal amount', async () => {
    handler = json(200, { ok: true, paymentResponse, paymentId: 'pay_1' });
    const result = await createBackendClient({ backendUrl, apiKey, transport }).redeem(redeemRequest);
    expect(result).toEqual({ ok: true, paymentResponse, paymentId: 'pay_1' });
    expect(seen[0]).toMatchObject({ method: 'POST', url: '/v0/payments/redeem', authorization: `Bearer ${apiKey}` });
    expect(JSON.parse(seen[0]!.body)).toEqual({ paymentHeader: 'eyJ4IjoxfQ==', resource: 'https://shop.example/weather', amount: '0.01' });
  });

  test('redeem refused (402): a reason, not an exception', async () => {
    handler = json(402, { ok: false, error: 'nonce_already_used', message: 'replayed', requirement: { x: 1 } });
    expect(await createBackendClient({ backendUrl, apiKey, transport }).redeem(redeemRequest)).toEqual({
      ok: false,
      reason: 'nonce_already_used',
      message: 'replayed',
    });
  });

  test.each([
    ['5xx', 502, json(500, { error: 'internal', message: 'x', status: 500 })],
    ['garbage 200', 502, (_req: IncomingMessage, _b: string, res: ServerResponse) => res.end('<html>')],
    ['unexpected 200 body', 502, json(200, { ok: true })],
    // Only an upto charge of 0 settles without a transaction: anything else would be served as paid for nothing.
    ['200 settled without a transaction', 502, json(200, { ok: true, paymentResponse: { ...paymentResponse, transaction: '' }, paymentId: 'pay_1' })],
    ['401 (wrong seller key)', 502, json(401, { error: 'unauthorized', message: 'bad key', status: 401 })],
  ] as const)('redeem %s -> FacilitatorUnavailable %i', async (_name, status, answer) => {
    handler = answer;
    const error = await createBackendClient({ backendUrl, apiKey, transport }).redeem(redeemRequest).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FacilitatorUnavailable);
    expect((error as FacilitatorUnavailable).status).toBe(status);
  });

  test('unreachable and timed out -> FacilitatorUnavailable 503', async () => {
    const unreachable = createBackendClient({ backendUrl: 'http://127.0.0.1:1', apiKey, transport });
    await expect(unreachable.redeem(redeemRequest)).rejects.toMatchObject({ name: 'FacilitatorUnavailable', status: 503 });
    handler = () => undefined; // never answers
    const slow = createBackendClient({ backendUrl, apiKey, timeoutMs: 50, transport });
    const error = (await slow.redeem(redeemRequest).catch((e: unknown) => e)) as FacilitatorUnavailable;
    expect(error).toBeInstanceOf(FacilitatorUnavailable);
    expect(error.status).toBe(503);
    expect(error.message).toMatch(/timed out/);
  });

  test('settings, list and get', async () => {
    const client = createBackendClient({ backendUrl, apiKey, transport });
    handler = json(200, { ...anvilSettings, maxTimeoutSeconds: 120 });
    expect(await client.fetchSellerSettings()).toEqual({ ...anvilSettings, maxTimeoutSeconds: 120 });
    expect(seen.at(-1)).toMatchObject({ method: 'GET', url: '/v0/payments/settings' });

    const record = {
      id: 'pay_1', network: 'anvil', payerAddress: '0x2', recipientAddress: '0x1', amountUsdcRaw: '10000', txHash: '0xabc',
      status: 'settled', resourceUrl: 'https://shop.example/weather', createdAt: '2025-01-01T00:00:00.000Z',
    };
    handler = json(200, { payments: [record], nextPageToken: 'n2' });
    expect(await client.listPayments({ limit: 10, pageToken: 'n1' })).toEqual({ payments: [record], nextPageToken: 'n2' });
    expect(seen.at(-1)!.url).toBe('/v0/payments?limit=10&pageToken=n1');

    handler = json(200, record);
    expect(await client.getPayment('pay/1')).toEqual(record);
    expect(seen.at(-1)!.url).toBe('/v0/payments/pay%2F1');

    handler = json(404, { error: 'not_found', message: 'Payment not found', status: 404 });
    await expect(client.getPayment('nope')).rejects.toEqual(new BackendRequestError(404, 'not_found', 'Payment not found'));
  });

  test('keeps its connection to the backend between calls', async () => {
    const connections: unknown[] = [];
    const count = (socket: unknown) => connections.push(socket);
    server.on('connection', count);
    try {
      const client = createBackendClient({ backendUrl, apiKey, transport });
      handler = json(200, { ok: true, paymentResponse, paymentId: 'pay_1' });
      for (let i = 0; i < 5; i++) await client.redeem(redeemRequest);
      expect(seen).toHaveLength(5);
      expect(connections.length).toBeLessThanOrEqual(1);
    } finally {
      server.off('connection', count);
    }
  });
});

describe('payments SDK', () => {
  test('challenge is built locally after one settings fetch; redeem normalises the amount', async () => {
    handler = json(200, anvilSettings);
    const payments = createPaymentsClient({ backendUrl, apiKey });
    const [a, b] = await Promise.all([
      payments.challenge({ amount: '$0.01', resource: 'https://shop.example/a' }),
      payments.challenge({ amount: '0.5', resource: 'https://shop.example/b' }),
    ]);
    expect(seen.filter((r) => r.url === '/v0/payments/settings')).toHaveLength(1);
    expect(a).toMatchObject({ x402Version: 1, accepts: [{ maxAmountRequired: '10000', resource: 'https://shop.example/a' }] });
    expect(b.accepts[0]!.maxAmountRequired).toBe('500000');

    handler = json(402, { ok: false, error: 'invalid_exact_evm_payload_signature', message: 'bad', requirement: a.accepts[0] });
    const refused = await payments.redeem({ paymentHeader: 'eA==', resource: 'https://shop.example/a', amount: '$0.01' });
    expect(refused).toMatchObject({ ok: false, error: 'invalid_exact_evm_payload_signature', requirement: a.accepts[0] });
    expect(JSON.parse(seen.at(-1)!.body).amount).toBe('0.01');
  });
});

describe('createBackendPaywall', () => {
  test('fetches settings once at creation, then unpaid requests never reach the backend', async () => {
    handler = json(200, anvilSettings);
    const paywall = await createBackendPaywall({ backendUrl, apiKey, routes: { 'GET /weather': { price: '$0.01' } } });
    const before = seen.length;
    const outcome = await paywall.handle({ method: 'GET', url: '/weather', host: 'shop.example', protocol: 'https', headers: {} });
    expect(outcome.kind).toBe('payment-required');
    expect(seen.length).toBe(before);
  });

  test('fails at boot when the backend refuses the key', async () => {
    handler = json(401, { error: 'unauthorized', message: 'bad key', status: 401 });
    await expect(createBackendPaywall({ backendUrl, apiKey, routes: {} })).rejects.toBeInstanceOf(BackendRequestError);
  });
});
