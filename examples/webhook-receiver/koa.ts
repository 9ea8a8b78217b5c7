/**
 * The same receiver on Koa. Run with `WEBHOOK_SECRET=whsec_... npx tsx examples/webhook-receiver/koa.ts`.
 * No body parser is mounted on this route: the signature is checked over the raw bytes.
 */
import Koa from 'koa';
import { verifyWebhook, WEBHOOK_HEADERS, type PaymentReceivedEvent } from '../../middleware/index.js';
import { isMain } from '../dev-seller.js';
import { SeenEvents } from './dedupe.js';
import type { ReceiverOptions } from './express.js';

const MAX_BODY_BYTES = 1024 * 1024;

async function rawBody(req: NodeJS.ReadableStream): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) return null;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

export function createKoaReceiver(options: ReceiverOptions): Koa {
  const seen = options.seen ?? new SeenEvents();
  const app = new Koa();
  app.use(async (ctx) => {
    if (ctx.method !== 'POST' || ctx.path !== '/webhooks/agentgate') {
      ctx.status = 404;
      return;
    }
    const raw = await rawBody(ctx.req);
    const secret = typeof options.secret === 'function' ? options.secret() : options.secret;
    if (!raw || !verifyWebhook(raw, ctx.get(WEBHOOK_HEADERS.signature), secret)) {
      ctx.status = 400;
      ctx.body = { error: 'invalid_signature', message: 'X-Service-Signature does not match the body', status: 400 };
      return;
    }
    const key = ctx.get(WEBHOOK_HEADERS.idempotencyKey);
    if (!key) {
      ctx.status = 400;
      ctx.body = { error: 'missing_idempotency_key', message: 'X-Service-Idempotency-Key is required', status: 400 };
      return;
    }
    if (seen.firstTime(key)) await options.onPayment(JSON.parse(raw.toString('utf8')) as PaymentReceivedEvent, key);
    ctx.body = { received: true };
  });
  return app;
}

if (isMain(import.meta.url)) {
  const secret = process.env.WEBHOOK_SECRET ?? '';
  if (!secret) console.warn('WEBHOOK_SECRET is not set: every delivery will be refused with 400');
  const port = Number(process.env.PORT ?? 4031);
  createKoaReceiver({
    secret,
    onPayment: (event) => console.log(`paid: ${event.paymentId} ${event.body.amountUsdcRaw} atomic USDC from ${event.body.payerAddress}`),
  }).listen(port, () => console.log(`webhook receiver (Koa) on http://localhost:${port}/webhooks/agentgate`));
}
