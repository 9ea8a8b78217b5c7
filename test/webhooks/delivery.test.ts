import type { AddressInfo } from 'node:net';
import { createHmac } from 'node:crypto';
import { startTestServer, type TestServer } from '../support/server.js';
import { signUp } from '../support/agents.js';
import { freePort } from '../../server/platform/net.js';
import { verifyReceipt } from 'agentgate-x402-wire';
import { verifyWebhook } from '../../middleware/index.js';
import { createReceiverApp } from '../../examples/webhook-receiver/express.js';
import { startReceiver } from './receiver.js';
import { pay, sellerWithWebhook, waitForDelivery } from './seller.js';

// The SPEC schedule (1, 4, 16, 64, 300 s) in units of 30 ms, so the whole schedule fits in a test.
const BASE_MS = 30;
const SCHEDULE_MS = [1, 4, 16, 64, 300].map((u) => u * BASE_MS);

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ TRUST_PROXY: 'true', WEBHOOK_RETRY_BASE_MS: String(BASE_MS) });
});
afterAll(async () => { await server.close(); });

describe('payment.received delivery', () => {
  it('POSTs the signed receipt with the SPEC 6.1 headers; the example Express receiver verifies and de-duplicates it', async () => {
    const receiver = await startReceiver();
    const events: Array<{ paymentId: string; key: string }> = [];
    let secret = '';
    const example = createReceiverApp({ secret: () => secret, onPayment: (event, key) => { events.push({ paymentId: event.paymentId, key }); } }).listen(0, '127.0.0.1');
    await new Promise((resolve) => example.once('listening', resolve));
    const exampleUrl = `http://127.0.0.1:${(example.address() as AddressInfo).port}/webhooks/agentgate`;
    try {
      const seller = await sellerWithWebhook(server, receiver.url);
      secret = seller.webhookSecret;
      expect(seller.webhookSecret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
      // The secret is shown once: never in later reads of the endpoint.
      const endpoint = await server.request('GET', `/v0/payments/endpoints/${seller.endpointId}`, { key: seller.platformKey });
      expect(endpoint.text).not.toContain(seller.webhookSecret);

      const paymentId = await pay(server, seller);
      const delivery = await waitForDelivery(server, seller, paymentId, (d) => d.status === 'delivered');
      expect(receiver.received).toHaveLength(1);
      const { headers, raw, json } = receiver.received[0]!;
      expect(headers['x-service-event']).toBe('payment.received');
      expect(headers['x-service-signature']).toBe(`sha256=${createHmac('sha256', seller.webhookSecret).update(raw).digest('hex')}`);
      expect(headers['x-service-idempotency-key']).toBe(delivery.eventId);
      expect(headers['content-type']).toBe('application/json');

      const payment = await server.request('GET', `/v0/payments/${paymentId}`, { key: seller.sellerKey });
      expect(json).toEqual({ event: 'payment.received', paymentId, createdAt: payment.body.settledAt, ...payment.body.signedReceipt });
      expect(await verifyReceipt(json, server.app.serviceKey.publicKeyMultibase)).toEqual({ ok: true });

      expect(delivery).toMatchObject({ status: 'delivered', attemptCount: 1, paymentId, endpointId: seller.endpointId, event: 'payment.received', nextAttemptAt: null });
      expect(delivery.attempts).toEqual([{ at: expect.any(String), url: receiver.url, statusCode: 200, error: null, durationMs: expect.any(Number) }]);
      // The outbox entry on the payment was turned into this delivery.
      const stored = await server.app.db.collection('payments').findOne({ _id: paymentId as never });
      expect(stored?.webhook).toEqual({ status: 'dispatched', eventId: delivery.eventId, deliveryId: delivery.id });

      // The same bytes and headers, replayed into the example receiver: acted on once, acknowledged twice.
      const send = (body: string, signature = headers['x-service-signature'] as string) => fetch(exampleUrl, {
        method: 'POST', body,
        headers: { 'content-type': 'application/json', 'x-service-signature': signature, 'x-service-event': 'payment.received', 'x-service-idempotency-key': delivery.eventId },
      });
      expect((await send(raw)).status).toBe(200);
      expect((await send(raw)).status).toBe(200);
      expect(events).toEqual([{ paymentId, key: delivery.eventId }]);
      // One changed byte, or a signature under another secret: 400.
      expect((await send(raw.replace('"paymentId"', '"paymentID"'))).status).toBe(400);
      expect((await send(raw, `sha256=${createHmac('sha256', 'whsec_other').update(raw).digest('hex')}`)).status).toBe(400);
      expect(events).toHaveLength(1);
    } finally {
      await receiver.close();
      example.closeAllConnections();
      await new Promise<void>((resolve) => example.close(() => resolve()));
    }
  });

  it('retries 5xx on the schedule: 500, 500, 200 is exactly three attempts', async () => {
    const receiver = await startReceiver([500, 500], 200);
    // What agentgate dev prints: one line per attempt, not only the outcome.
    const lines: string[] = [];
    const stopListening = server.app.events.on((event) => { if (event.category === 'webhooks') lines.push(event.line); });
    try {
      const seller = await sellerWithWebhook(server, receiver.url);
      const paymentId = await pay(server, seller);
      const delivery = await waitForDelivery(server, seller, paymentId, (d) => d.status === 'delivered');
      const attemptLines = () => lines.filter((line) => line.includes(`payment.received for ${paymentId} attempt`));
      // The line follows the attempt's record by a moment: wait for it (with a deadline), not the clock.
      const linesBy = Date.now() + 30_000;
      while (attemptLines().length < 3 && Date.now() < linesBy) await new Promise((r) => setTimeout(r, 20));
      expect(attemptLines()).toEqual([
        expect.stringMatching(new RegExp(`attempt 1 to ${receiver.url}.*: 500 in \\d+ ms, next attempt in \\d+ s$`)),
        expect.stringMatching(/attempt 2 .*: 500 in \d+ ms, next attempt in \d+ s$/),
        expect.stringMatching(/attempt 3 .*: 200 in \d+ ms, delivered$/),
      ]);
      await new Promise((r) => setTimeout(r, SCHEDULE_MS[2]! + 500)); // room for a wrong fourth attempt
      expect(receiver.received).toHaveLength(3);
      const after = await server.request('GET', `/v0/webhooks/deliveries/${delivery.id}`, { key: seller.sellerKey });
      expect(after.body.attempts.map((a: any) => a.statusCode)).toEqual([500, 500, 200]);
      // Each retry waits at least its scheduled delay after the failed attempt ended.
      const ends = after.body.attempts.map((a: any) => Date.parse(a.at) + a.durationMs);
      const starts = after.body.attempts.map((a: any) => Date.parse(a.at));
      expect(starts[1] - ends[0]).toBeGreaterThanOrEqual(SCHEDULE_MS[0]!);
      expect(starts[2] - ends[1]).toBeGreaterThanOrEqual(SCHEDULE_MS[1]!);
      // Every attempt carried the same idempotency key and the same bytes.
      expect(new Set(receiver.received.map((r) => r.headers['x-service-idempotency-key'])).size).toBe(1);
      expect(new Set(receiver.received.map((r) => r.raw)).size).toBe(1);
    } finally {
      stopListening();
      await receiver.close();
    }
  });

  it('stops at once on a 4xx, and a manual retry runs a new round', async () => {
    const receiver = await startReceiver([400], 200);
    try {
      const seller = await sellerWithWebhook(server, receiver.url);
      const paymentId = await pay(server, seller);
      const failed = await waitForDelivery(server, seller, paymentId, (d) => d.status === 'failed');
      await new Promise((r) => setTimeout(r, SCHEDULE_MS[0]! + 1_000));
      expect(receiver.received).toHaveLength(1);
      expect(failed).toMatchObject({ attemptCount: 1, lastError: 'receiver answered 400', failedAt: expect.any(String) });

      const listed = await server.request('GET', `/v0/webhooks/deliveries?status=failed&endpointId=${seller.endpointId}`, { key: seller.platformKey });
      expect(listed.body.deliveries.map((d: any) => d.id)).toEqual([failed.id]);
      expect((await server.request('GET', `/v0/webhooks/deliveries?status=delivered&endpointId=${seller.endpointId}`, { key: seller.platformKey })).body.deliveries).toEqual([]);

      const retried = await server.request('POST', `/v0/webhooks/deliveries/${failed.id}/retry`, { key: seller.sellerKey });
      expect(retried.status).toBe(202);
      expect(retried.body.status).toBe('pending');
      const delivered = await waitForDelivery(server, seller, paymentId, (d) => d.status === 'delivered');
      expect(delivered.attempts.map((a: any) => a.statusCode)).toEqual([400, 200]);
      expect(receiver.received[1]!.headers['x-service-idempotency-key']).toBe(receiver.received[0]!.headers['x-service-idempotency-key']);
    } finally {
      await receiver.close();
    }
  });

  it('ends in failed with five retries recorded when the receiver is down for the whole schedule', async () => {
    const port = await freePort(); // nothing listens here
    const seller = await sellerWithWebhook(server, `http://127.0.0.1:${port}/hook`);
    const paymentId = await pay(server, seller);
    const failed = await waitForDelivery(server, seller, paymentId, (d) => d.status === 'failed', 45_000);
    expect(failed.attemptCount).toBe(6);
    expect(failed.attempts).toHaveLength(6);
    for (const attempt of failed.attempts) {
      expect(attempt.statusCode).toBeNull();
      expect(attempt.error).toMatch(/^network_error: .*ECONNREFUSED/);
    }
    const starts = failed.attempts.map((a: any) => Date.parse(a.at));
    const ends = failed.attempts.map((a: any) => Date.parse(a.at) + a.durationMs);
    SCHEDULE_MS.forEach((delay, i) => expect(starts[i + 1] - ends[i]).toBeGreaterThanOrEqual(delay));
  }, 60_000);

  it('signs with a rotated secret from the next delivery on; the new secret is shown once', async () => {
    const receiver = await startReceiver();
    try {
      const seller = await sellerWithWebhook(server, receiver.url);
      const rotated = await server.request('POST', `/v0/webhooks/endpoints/${seller.endpointId}/rotate-secret`, { key: seller.platformKey });
      expect(rotated.status).toBe(200);
      expect(rotated.body.webhookSecret).toMatch(/^whsec_/);
      expect(rotated.body.webhookSecret).not.toBe(seller.webhookSecret);
      const endpoint = await server.request('GET', `/v0/payments/endpoints/${seller.endpointId}`, { key: seller.platformKey });
      expect(endpoint.text).not.toContain(rotated.body.webhookSecret);
      // The seller key cannot rotate (console operation).
      expect((await server.request('POST', `/v0/webhooks/endpoints/${seller.endpointId}/rotate-secret`, { key: seller.sellerKey })).status).toBe(403);

      await pay(server, seller);
      await receiver.next(1);
      const { raw, headers } = receiver.received[0]!;
      expect(verifyWebhook(raw, headers['x-service-signature'] as string, rotated.body.webhookSecret)).toBe(true);
      expect(verifyWebhook(raw, headers['x-service-signature'] as string, seller.webhookSecret)).toBe(false);
    } finally {
      await receiver.close();
    }
  });

  it('keeps delivery logs per org: another org gets 404 and an empty list; bad filters are 400', async () => {
    const receiver = await startReceiver();
    try {
      const seller = await sellerWithWebhook(server, receiver.url);
      const paymentId = await pay(server, seller);
      const delivery = await waitForDelivery(server, seller, paymentId, (d) => d.status === 'delivered');
      const other = await signUp(server);
      expect((await server.request('GET', `/v0/webhooks/deliveries/${delivery.id}`, { key: other.platform_key })).status).toBe(404);
      expect((await server.request('POST', `/v0/webhooks/deliveries/${delivery.id}/retry`, { key: other.platform_key })).status).toBe(404);
      expect((await server.request('GET', '/v0/webhooks/deliveries', { key: other.platform_key })).body.deliveries).toEqual([]);
      expect((await server.request('GET', '/v0/webhooks/deliveries', { key: other.identity.rawKey })).status).toBe(403);
      const bad = await server.request('GET', '/v0/webhooks/deliveries?status=lost', { key: seller.sellerKey });
      expect(bad.status).toBe(400);
      expect(bad.body.message).toContain('status');
    } finally {
      await receiver.close();
    }
  });

  it('refuses a webhook URL the SSRF guard blocks, and does not send to one that became blocked', async () => {
    const agent = await signUp(server);
    const key = agent.platform_key;
    await server.request('PUT', '/v0/payments/acceptance', { key, body: { enabled: true, payTo: '0x000000000000000000000000000000000000dEaD' } });
    const metadata = await server.request('POST', '/v0/payments/endpoints', { key, body: { url: 'https://api.example.com/x', priceUsdc: '0.01', webhookUrl: 'http://169.254.169.254/latest' } });
    expect(metadata.status).toBe(400);
    expect(metadata.body.error).toBe('url_not_allowed');
    const privateNet = await server.request('POST', '/v0/payments/endpoints', { key, body: { url: 'https://api.example.com/y', priceUsdc: '0.01', webhookUrl: 'http://10.0.0.5/hook' } });
    expect(privateNet.status).toBe(400);

    // A target that is blocked by the time of delivery (here: the stored URL changed under us) is checked
    // again at every attempt: no request, one failed attempt, no retries.
    const seller = await sellerWithWebhook(server, 'http://127.0.0.1:9/hook');
    await server.app.db.collection('endpoints').updateOne({ _id: seller.endpointId as never }, { $set: { webhookUrl: 'http://169.254.169.254/latest/meta-data' } });
    const paymentId = await pay(server, seller);
    const failed = await waitForDelivery(server, seller, paymentId, (d) => d.status === 'failed');
    expect(failed.attemptCount).toBe(1);
    expect(failed.attempts[0].error).toMatch(/^blocked_address: /);
  });
});

