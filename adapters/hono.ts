import type { Context, MiddlewareHandler, Next } from 'hono';
import type { HeldPayment, PaywallRequest, RequestPayment } from '../middleware/index.js';
import { paywallSource, type PaymentMiddlewareOptions } from './paywall-source.js';

export type { PaymentMiddlewareOptions } from './paywall-source.js';
// Start-up companion of the middleware: registers the same route table at the backend (platform key).
export { syncEndpoints } from '../middleware/index.js';
export type { EndpointSyncReport, SyncedEndpoint, SyncEndpointsOptions } from '../middleware/index.js';

/**
 * What the middleware gives a handler: `c.get('payment')` (or `c.var.payment`), set on the routes the
 * table prices and undefined on every other route. `new Hono<PaymentEnv>()` types it for a whole app.
 */
export type PaymentEnv = { Variables: { payment: RequestPayment } };

/**
 * x402 paywall for Hono. It only speaks web `Request`/`Response`, so it runs wherever Hono runs (Node
 * through @hono/node-server, Bun, Deno, Cloudflare Workers). Mount it before your routes:
 *
 *   app.use(paymentMiddleware({ backendUrl, apiKey, routes: { 'GET /weather': { price: '$0.01' } } }));
 *
 * Unpaid: 402 with the x402 v1 body and the v2 `PAYMENT-REQUIRED` header. Paid (`X-Payment` or
 * `PAYMENT-SIGNATURE`): the handler runs with `c.get('payment')` set, and its response carries
 * `X-Payment-Response` and `PAYMENT-RESPONSE`. A route settles after its handler by default: the payment
 * is verified and held, and once the handler has returned its Response the middleware decides on its
 * status. Below 400 the payment is captured and only then is the Response handed back to Hono, so a
 * streamed body (`c.body(stream)`, `streamSSE`) has not been read when the money moves, and not one byte
 * reaches the buyer unless it settled; the stream then flows as usual (a stream that fails after it
 * started has been paid for). If the settlement fails, the body is cancelled unread and the buyer gets
 * the 402 (or 5xx) that says why. A status of 400 or more, or a throw, releases the payment: nothing is
 * charged. `settle: 'before-handler'` settles first.
 */
export function paymentMiddleware(options: PaymentMiddlewareOptions): MiddlewareHandler<PaymentEnv> {
  const paywall = paywallSource(options);
  return async (c, next) => {
    // A throw here goes to Hono's error handler (500); the handler is never reached.
    const outcome = await paywall.handle(paywallRequestOf(c));
    switch (outcome.kind) {
      case 'pass':
        await next();
        return;
      case 'paid':
        c.set('payment', outcome.payment);
        await next();
        // After the handler, not before: headers set on the context beforehand are lost when a handler
        // returns a Response of its own, and its error answer must carry them too (it has been paid for).
        replaceResponse(c, withHeaders(c.res, outcome.responseHeaders));
        return;
      case 'held':
        c.set('payment', outcome.hold.payment);
        await settleAfterHandler(c, next, outcome.hold);
        return;
      case 'payment-required':
        return c.body(outcome.bodyText, 402, outcome.headers);
      case 'reject':
      case 'unavailable':
        return c.json(outcome.body, outcome.status);
    }
  };
}

async function settleAfterHandler(c: Context, next: Next, hold: HeldPayment): Promise<void> {
  try {
    await next();
  } catch (error) {
    // Hono turns a thrown Error into its error handler's response (seen below as a status >= 400); what
    // still arrives here was thrown past it. Either way nothing was served, so nothing is charged.
    await hold.release();
    throw error;
  }
  const held = c.res;
  if (held.status >= 400) {
    await hold.release();
    return;
  }
  let outcome;
  try {
    outcome = await hold.capture();
  } catch (error) {
    // The paywall's own failure, not the payment's: nothing has been sent, so a 502 is still possible.
    await hold.release();
    dropBody(held);
    replaceResponse(c, Response.json({ error: 'facilitator_unavailable', message: `payment could not be settled: ${(error as Error).message}`, status: 502 }, { status: 502 }));
    return;
  }
  if (outcome.kind === 'paid') {
    replaceResponse(c, withHeaders(held, outcome.responseHeaders));
    return;
  }
  // Not settled: none of the held response may reach the buyer; the refusal goes out instead.
  dropBody(held);
  replaceResponse(c, outcome.kind === 'payment-required'
    ? new Response(outcome.bodyText, { status: 402, headers: outcome.headers })
    : Response.json(outcome.body, { status: outcome.status }));
}

/** The same status and body (a stream stays unread), its headers plus ours: a Response's own headers may be immutable. */
function withHeaders(res: Response, headers: Readonly<Record<string, string>>): Response {
  const copy = new Response(res.body, res);
  for (const [name, value] of Object.entries(headers)) copy.headers.set(name, value);
  return copy;
}

function replaceResponse(c: Context, res: Response): void {
  // Hono's setter copies the previous response's headers into the new one; cleared first, the new one
  // goes out as built (a 402 must not carry the dropped response's Content-Length or cookies).
  c.res = undefined;
  c.res = res;
}

/** Cancels a body nobody will read, so a streaming handler sees its consumer gone and stops. Not awaited:
 *  a source may take its time to stop, and the refusal need not wait for it. */
function dropBody(res: Response): void {
  res.body?.cancel().catch(() => {});
}

function paywallRequestOf(c: Context): PaywallRequest {
  // The URL Hono routes on, so the paywall and the router read the same path. (Runtimes hand it over
  // already parsed: @hono/node-server resolves "." and ".." segments and refuses backslashes first.)
  const url = new URL(c.req.url);
  return {
    method: c.req.method,
    url: url.pathname + url.search,
    host: url.host,
    protocol: url.protocol === 'https:' ? 'https' : 'http',
    // Header names come lower-case from the Headers object; repeated headers are joined with ", ".
    headers: c.req.header(),
  };
}
