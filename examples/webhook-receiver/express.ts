/**
 * A payment.received receiver on Express. Run with `WEBHOOK_SECRET=whsec_... npx tsx examples/webhook-receiver/express.ts`
 * and register `http://<public host>:4030/webhooks/agentgate` as the endpoint's webhookUrl.
 */
import express, { type Express } from 'express';
import { verifyWebhook, WEBHOOK_HEADERS, type PaymentReceivedEvent } from '../../middleware/index.js';
import { isMain } from '../dev-seller.js';
import { SeenEvents } from './dedupe.js';

export interface ReceiverOptions {
  /** The endpoint's `whsec_` secret, or a function returning it (read per request, so rotation needs no restart). */
  secret: string | (() => string);
  /** Runs once per event, whatever the number of deliveries. */
  onPayment(event: PaymentReceivedEvent, idempotencyKey: string): Promise<void> | void;
  seen?: SeenEvents;
}

export function createReceiverApp(options: ReceiverOptions): Express {
  const seen = options.seen ?? new SeenEvents();
  const app = express();
  // The signature covers the raw bytes: take the body unparsed, parse only after verifying.
  app.post('/webhooks/agentgate', express.raw({ type: '*/*', limit: '1mb' }), async (req, res) => {
    const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    const secret = typeof options.secret === 'function' ? options.secret() : options.secret;
    if (!verifyWebhook(raw, req.get(WEBHOOK_HEADERS.signature), secret)) {
      res.status(400).json({ error: 'invalid_signature', message: 'X-Service-Signature does not match the body', status: 400 });
      return;
    }
    const key = req.get(WEBHOOK_HEADERS.idempotencyKey);
    if (!key) {
      res.status(400).json({ error: 'missing_idempotency_key', message: 'X-Service-Idempotency-Key is required', status: 400 });
      return;
    }
    // A repeat is acknowledged (2xx) so the sender stops, but not acted on again.
    if (seen.firstTime(key)) await options.onPayment(JSON.parse(raw.toString('utf8')) as PaymentReceivedEvent, key);
    res.status(200).json({ received: true });
  });
  return app;
}

if (isMain(import.meta.url)) {
  const secret = process.env.WEBHOOK_SECRET ?? '';
  if (!secret) console.warn('WEBHOOK_SECRET is not set: every delivery will be refused with 400');
  const port = Number(process.env.PORT ?? 4030);
  createReceiverApp({
    secret,
    onPayment: (event) => console.log(`paid: ${event.paymentId} ${event.body.amountUsdcRaw} atomic USDC from ${event.body.payerAddress} (tx ${event.body.txHash})`),
  }).listen(port, () => console.log(`webhook receiver (Express) on http://localhost:${port}/webhooks/agentgate`));
}
