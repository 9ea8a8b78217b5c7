import { FacilitatorUnavailable } from '../../middleware/facilitator.js';
import { Paywall, type PaywallOptions, type PaywallOutcome } from '../../middleware/paywall.js';
import { anvilRequirementV2, anvilSettings, b64, FakeFacilitator, fromB64, LOCAL_TOKEN, PAY_TO, request } from './fixtures.js';

const NOW_MS = 1_700_000_000_000;
const authorization = {
  from: '0x2222222222222222222222222222222222222222',
  to: PAY_TO,
  value: '10000',
  validAfter: '0',
  validBefore: String(NOW_MS / 1000 + 60),
  nonce: '0x' + '11'.repeat(32),
};
const signature = '0x' + 'cd'.repeat(65);
const v1Header = b64({ x402Version: 1, scheme: 'exact', network: 'anvil', payload: { signature, authorization } });
// The FakeFacilitator redeems and cannot hold, so its routes settle before the handler: their 402 names
// the upfront flow, and a v2 buyer echoes it in what it accepted.
const v2Header = b64({
  x402Version: 2,
  accepted: { ...anvilRequirementV2, extra: { ...anvilRequirementV2.extra, paymentFlow: 'upfront' } },
  payload: { signature, authorization },
});

function paywall(facilitator = new FakeFacilitator(), options: Partial<PaywallOptions> = {}) {
  return new Paywall({
    routes: { 'GET /weather': { price: '$0.01', description: 'Weather' }, '/city/:name': { price: '0.02' } },
    facilitator,
    settings: anvilSettings,
    now: () => NOW_MS,
    ...options,
  });
}

function expectKind<K extends PaywallOutcome['kind']>(outcome: PaywallOutcome, kind: K): Extract<PaywallOutcome, { kind: K }> {
  expect(outcome.kind).toBe(kind);
  return outcome as Extract<PaywallOutcome, { kind: K }>;
}

describe('Paywall', () => {
  test('unprotected request passes without touching the facilitator', async () => {
    const facilitator = new FakeFacilitator();
    expect(await paywall(facilitator).handle(request('/free'))).toEqual({ kind: 'pass' });
    expect(facilitator.calls).toHaveLength(0);
  });

  test('unpaid request: 402 built locally, no facilitator call, same object on repeat', async () => {
    const facilitator = new FakeFacilitator();
    const wall = paywall(facilitator);
    const first = expectKind(await wall.handle(request('/weather')), 'payment-required');
    expect(first.status).toBe(402);
    expect(first.body.accepts[0]).toMatchObject({ resource: 'https://shop.example/weather', maxAmountRequired: '10000', description: 'Weather' });
    expect(first.headers['PAYMENT-REQUIRED']).toBeDefined();
    expect(facilitator.calls).toHaveLength(0);
    expect(await wall.handle(request('/Weather/?q=1'))).toBe(first); // cached, no per-request rebuild
  });

  test('resource of a literal route is the route path; of a dynamic route the canonical request path', async () => {
    const wall = paywall();
    const literal = expectKind(await wall.handle(request('//WEATHER/')), 'payment-required');
    expect(literal.body.accepts[0]!.resource).toBe('https://shop.example/weather');
    const dynamic = expectKind(await wall.handle(request('/city/S%C3%A3o%20Paulo/')), 'payment-required');
    expect(dynamic.body.accepts[0]!.resource).toBe('https://shop.example/city/S%C3%A3o%20Paulo');
    expect(dynamic.body.accepts[0]!.maxAmountRequired).toBe('20000');
  });

  test.each([
    ['X-Payment (v1)', { 'x-payment': v1Header }, 1],
    ['PAYMENT-SIGNATURE (v2)', { 'payment-signature': v2Header }, 2],
  ] as const)('paid with %s: redeemed once, both response headers', async (_name, headers, version) => {
    const facilitator = new FakeFacilitator();
    const outcome = expectKind(await paywall(facilitator).handle(request('/weather', { headers })), 'paid');
    expect(facilitator.calls).toHaveLength(1);
    expect(facilitator.calls[0]).toMatchObject({
      paymentHeader: Object.values(headers)[0],
      version,
      resource: 'https://shop.example/weather',
      amountAtomic: 10_000n,
    });
    expect(facilitator.calls[0]!.requirement).toMatchObject(version === 1 ? { network: 'anvil' } : { network: 'eip155:31337' });
    const transaction = '0x' + 'ab'.repeat(32);
    const payer = '0x2222222222222222222222222222222222222222';
    expect(fromB64(outcome.responseHeaders['X-Payment-Response']!)).toEqual({ success: true, transaction, network: 'anvil', payer });
    expect(fromB64(outcome.responseHeaders['PAYMENT-RESPONSE']!)).toEqual({ success: true, transaction, network: 'eip155:31337', payer });
    expect(outcome.payment).toMatchObject({ paymentId: 'pay_123', version, payer, amountAtomic: 10_000n, pattern: 'GET /weather' });
  });

  test('redeem refused: 402 with the facilitator reason in body and PAYMENT-REQUIRED', async () => {
    const facilitator = new FakeFacilitator(() => ({ ok: false, reason: 'nonce_already_used', message: 'replayed' }));
    const outcome = expectKind(await paywall(facilitator).handle(request('/weather', { headers: { 'x-payment': v1Header } })), 'payment-required');
    expect(outcome.body).toMatchObject({ x402Version: 1, error: 'nonce_already_used', message: 'replayed', status: 402 });
    expect(outcome.body.accepts).toHaveLength(1);
    expect(fromB64(outcome.headers['PAYMENT-REQUIRED']!)).toMatchObject({ error: 'nonce_already_used' });
  });

  test.each([
    ['garbage header', 'not base64!', 'invalid_base64'],
    ['wrong network', b64({ x402Version: 1, scheme: 'exact', network: 'base', payload: { signature, authorization } }), 'network_mismatch'],
    ['wrong payee', b64({ x402Version: 1, scheme: 'exact', network: 'anvil', payload: { signature, authorization: { ...authorization, to: LOCAL_TOKEN } } }), 'recipient_mismatch'],
    ['too little', b64({ x402Version: 1, scheme: 'exact', network: 'anvil', payload: { signature, authorization: { ...authorization, value: '9999' } } }), 'amount_mismatch'],
    ['expired', b64({ x402Version: 1, scheme: 'exact', network: 'anvil', payload: { signature, authorization: { ...authorization, validBefore: String(NOW_MS / 1000) } } }), 'authorization_expired'],
    ['v2 for another price', b64({ ...(fromB64(v2Header) as object), accepted: { ...(fromB64(v2Header) as { accepted: object }).accepted, amount: '1' } }), 'amount_mismatch'],
  ])('%s: 402 with a reason, facilitator not called', async (_name, header, reason) => {
    const facilitator = new FakeFacilitator();
    const outcome = expectKind(await paywall(facilitator).handle(request('/weather', { headers: { 'x-payment': header } })), 'payment-required');
    expect(outcome.body.error).toBe(reason);
    expect(facilitator.calls).toHaveLength(0);
  });

  test('facilitator unreachable: 503, handler never runs', async () => {
    const facilitator = new FakeFacilitator(() => {
      throw new FacilitatorUnavailable('connect ECONNREFUSED');
    });
    const outcome = expectKind(await paywall(facilitator).handle(request('/weather', { headers: { 'x-payment': v1Header } })), 'unavailable');
    expect(outcome).toMatchObject({ status: 503, body: { error: 'facilitator_unavailable', message: 'connect ECONNREFUSED', status: 503 } });
  });

  test('facilitator throwing anything else: 502, never paid', async () => {
    const facilitator = new FakeFacilitator(() => {
      throw new Error('boom');
    });
    const outcome = expectKind(await paywall(facilitator).handle(request('/weather', { headers: { 'x-payment': v1Header } })), 'unavailable');
    expect(outcome.status).toBe(502);
  });

  describe('origin of the resource URL', () => {
    const forwarded = { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'public.example, inner.example' };

    test('forwarded headers are ignored unless trustProxy', async () => {
      const outcome = expectKind(
        await paywall().handle(request('/weather', { protocol: 'http', host: 'localhost:3000', headers: forwarded })),
        'payment-required',
      );
      expect(outcome.body.accepts[0]!.resource).toBe('http://localhost:3000/weather');
    });

    test('with trustProxy the first forwarded value wins', async () => {
      const outcome = expectKind(
        await paywall(undefined, { trustProxy: true }).handle(request('/weather', { protocol: 'http', host: 'localhost:3000', headers: forwarded })),
        'payment-required',
      );
      expect(outcome.body.accepts[0]!.resource).toBe('https://public.example/weather');
    });

    test('publicOrigin wins over everything', async () => {
      const outcome = expectKind(
        await paywall(undefined, { trustProxy: true, publicOrigin: 'https://API.example.com/' }).handle(request('/weather', { headers: forwarded })),
        'payment-required',
      );
      expect(outcome.body.accepts[0]!.resource).toBe('https://api.example.com/weather');
    });

    test('default ports are dropped; a bad or missing Host is a 400 on protected routes only', async () => {
      const wall = paywall();
      const outcome = expectKind(await wall.handle(request('/weather', { host: 'Shop.Example:443' })), 'payment-required');
      expect(outcome.body.accepts[0]!.resource).toBe('https://shop.example/weather');
      expect(await wall.handle(request('/weather', { host: 'evil.example/x' }))).toMatchObject({ kind: 'reject', body: { error: 'invalid_host' } });
      expect(await wall.handle(request('/weather', { host: undefined }))).toMatchObject({ kind: 'reject', status: 400 });
      expect(await wall.handle(request('/free', { host: undefined }))).toEqual({ kind: 'pass' });
    });
  });

  test('path tricks get a 400 with the {error, message, status} shape', async () => {
    expect(await paywall().handle(request('/weather%2f'))).toEqual({
      kind: 'reject',
      status: 400,
      body: { error: 'encoded_separator', message: expect.any(String), status: 400 },
    });
  });

  test('bad configuration fails at construction', () => {
    expect(() => paywall(undefined, { routes: { '/x': { price: '0' } } })).toThrow(/greater than zero/);
    expect(() => paywall(undefined, { routes: { 'x': { price: '1' } } })).toThrow(/must start with/);
    expect(() => paywall(undefined, { settings: { ...anvilSettings, asset: 'usdc' } })).toThrow(/asset/);
    expect(() => paywall(undefined, { publicOrigin: 'ftp://x' })).toThrow(/publicOrigin/);
  });
});
