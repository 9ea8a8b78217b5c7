import type { Context, Middleware } from 'koa';
import type { TLSSocket } from 'node:tls';
import type { PaywallRequest } from '../middleware/index.js';
import { paywallSource, type PaymentMiddlewareOptions } from './paywall-source.js';
import { holdResponse } from './held-response.js';
import { nodeTransport } from './node-transport.js';

export type { PaymentMiddlewareOptions } from './paywall-source.js';
// Start-up companion of the middleware: registers the same route table at the backend (platform key).
export { syncEndpoints } from '../middleware/index.js';
export type { EndpointSyncReport, SyncedEndpoint, SyncEndpointsOptions } from '../middleware/index.js';

/**
 * x402 paywall for Koa. Use it before your router:
 *
 *   app.use(paymentMiddleware({ backendUrl, apiKey, routes: { 'GET /weather': { price: '$0.01' } } }));
 *
 * Unpaid: 402 with the x402 v1 body and the v2 `PAYMENT-REQUIRED` header. Paid (`X-Payment` or
 * `PAYMENT-SIGNATURE`): downstream runs with `ctx.state.payment` set, and the response carries
 * `X-Payment-Response` and `PAYMENT-RESPONSE`. A route settles after its handler by default: Koa writes
 * the response once downstream is done, and that write is held until the payment is settled (only a
 * status below 400 is charged; see held-response.ts); `settle: 'before-handler'` settles first.
 */
export function paymentMiddleware(options: PaymentMiddlewareOptions): Middleware {
  const paywall = paywallSource(options, { transport: nodeTransport });
  return async (ctx, next) => {
    // A throw here propagates to Koa's error handling (500); downstream is never reached.
    const outcome = await paywall.handle(paywallRequestOf(ctx));
    switch (outcome.kind) {
      case 'pass':
        return next();
      case 'paid':
        ctx.set(outcome.responseHeaders);
        ctx.state.payment = ctx.state.x402 = outcome.payment;
        return next();
      case 'held':
        holdResponse(ctx.res, outcome.hold);
        // ctx.state.x402 is the same object: `ctx.state.x402.charge('$0.0123')` on routes priced { upto }.
        ctx.state.payment = ctx.state.x402 = outcome.hold.payment;
        return next();
      case 'payment-required':
        ctx.status = 402;
        // Headers first: with Content-Type already set, Koa keeps it for the string body.
        ctx.set(outcome.headers);
        ctx.body = outcome.bodyText;
        return;
      case 'reject':
      case 'unavailable':
        ctx.status = outcome.status;
        ctx.body = outcome.body;
        return;
    }
  };
}

function paywallRequestOf(ctx: Context): PaywallRequest {
  return {
    method: ctx.method,
    url: ctx.originalUrl,
    host: ctx.req.headers.host,
    // Not ctx.protocol: that follows app.proxy; the Paywall applies its own trustProxy option.
    protocol: (ctx.req.socket as TLSSocket).encrypted ? 'https' : 'http',
    // Node joins repeated headers with ", " (only set-cookie stays an array, and the Paywall never reads it).
    headers: ctx.req.headers as Record<string, string | undefined>,
  };
}
