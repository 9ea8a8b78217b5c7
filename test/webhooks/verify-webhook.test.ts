import { createHmac } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { verifyWebhook, webhookSignature } from '../../middleware/index.js';
import { createKoaReceiver } from '../../examples/webhook-receiver/koa.js';

const secret = 'whsec_test_secret';
const body = '{"event":"payment.received","paymentId":"pay_1"}';
const good = `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;

describe('verifyWebhook', () => {
  it('accepts the HMAC-SHA256 of the raw body, as a string or bytes, in either hex case', () => {
    expect(webhookSignature(body, secret)).toBe(good);
    expect(verifyWebhook(body, good, secret)).toBe(true);
    expect(verifyWebhook(Buffer.from(body), good, secret)).toBe(true);
    expect(verifyWebhook(new TextEncoder().encode(body), good.toUpperCase().replace('SHA256=', 'sha256='), secret)).toBe(true);
    expect(verifyWebhook(body, [good], secret)).toBe(true);
  });

  it('refuses a changed body, another secret, and malformed or missing headers', () => {
    expect(verifyWebhook(body + ' ', good, secret)).toBe(false);
    expect(verifyWebhook(JSON.stringify(JSON.parse(body), null, 1), good, secret)).toBe(false);
    expect(verifyWebhook(body, good, 'whsec_other')).toBe(false);
    for (const header of [undefined, null, '', 'sha256=', good.slice(7), `sha1=${good.slice(7)}`, good.slice(0, -1), `${good}00`, 'sha256=' + 'z'.repeat(64)]) {
      expect(verifyWebhook(body, header as string, secret)).toBe(false);
    }
  });

  it('fails closed on an empty secret, even for a signature made with the empty key', () => {
    const emptyKeySignature = `sha256=${createHmac('sha256', '').update(body).digest('hex')}`;
    expect(verifyWebhook(body, emptyKeySignature, '')).toBe(false);
    expect(verifyWebhook(body, good, undefined as unknown as string)).toBe(false);
  });
});

describe('example Koa receiver', () => {
  it('acts once per idempotency key and answers 400 on a bad signature', async () => {
    const seen: string[] = [];
    const server = createKoaReceiver({ secret, onPayment: (event, key) => { seen.push(`${event.paymentId}:${key}`); } }).listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks/agentgate`;
    const post = (signature: string, key = 'evt_1', payload = body) =>
      fetch(url, { method: 'POST', body: payload, headers: { 'content-type': 'application/json', 'x-service-signature': signature, 'x-service-event': 'payment.received', 'x-service-idempotency-key': key } });
    try {
      expect((await post(good)).status).toBe(200);
      expect((await post(good)).status).toBe(200);
      expect(seen).toEqual(['pay_1:evt_1']);
      const bad = await post(good.replace(/.$/, (c) => (c === '0' ? '1' : '0')));
      expect(bad.status).toBe(400);
      expect(await bad.json()).toMatchObject({ error: 'invalid_signature', status: 400 });
      expect((await post(good, 'evt_1', body.replace('pay_1', 'pay_2'))).status).toBe(400);
      expect(seen).toHaveLength(1);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
