import type { Request, RequestHandler } from 'express';
import type { TLSSocket } from 'node:tls';
import type { PaywallRequest, RequestPayment } from '../middleware/index.js';
import { paywallSource, type PaymentMiddlewareOptions } from './paywall-source.js';
import { holdResponse } from './held-response.js';
import { nodeTransport } from './node-transport.js';

export type { PaymentMiddlewareOptions } from './paywall-source.js';
// Start-up companion of the middleware: registers the same route table at the backend (platform key).
export { syncEndpoints } from '../middleware/index.js';
export type { EndpointSyncReport, SyncedEndpoint, SyncEndpointsOptions } from '../middleware/index.js';

/**
 * x402 paywall for Express (4 and 5). Mount it before your routes:
 *
 *   app.use(paymentMiddleware({ backendUrl, apiKey, routes: { 'GET /weather': { price: '$0.01' } } }));
 *
 * Unpaid: 402 with the x402 v1 body and the v2 `PAYMENT-REQUIRED` header. Paid (`X-Payment` or
 * `PAYMENT-SIGNATURE`): the route runs with `res.locals.payment` (also `res.locals.x402`) set, and the response carries
 * `X-Payment-Response` and `PAYMENT-RESPONSE`. A route settles after its handler by default: the payment
 * is verified and held, the response is held back, and only a response below 400 is charged (see
 * held-response.ts); `settle: 'before-handler'` settles first. A route priced `{ upto: '$0.50' }` sells
 * by usage: the handler reports what it used with `res.locals.x402.charge('$0.0123')` and that is settled.
 */
export function paymentMiddleware(options: PaymentMiddlewareOptions): RequestHandler {
  const paywall = paywallSource(options, { transport: nodeTransport });
  return async (req, res, next) => {
    let outcome;
    try {
      outcome = await paywall.handle(paywallRequestOf(req));
    } catch (error) {
      // An unexpected failure in the paywall is a 500 through Express's error handling, never a pass.
      next(error);
      return;
    }
    switch (outcome.kind) {
      case 'pass':
        next();
        return;
      case 'paid':
        res.set(outcome.responseHeaders);
        exposePayment(res.locals, outcome.payment);
        next();
        return;
      case 'held':
        holdResponse(res, outcome.hold);
        exposePayment(res.locals, outcome.hold.payment);
        next();
        return;
      case 'payment-required':
        res.status(402).set(outcome.headers).send(outcome.bodyText);
        return;
      case 'reject':
      case 'unavailable':
        res.status(outcome.status).json(outcome.body);
        return;
    }
  };
}

/** `res.locals.payment`, and `res.locals.x402` (the same object) for `res.locals.x402.charge('$0.0123')` on upto routes. */
function exposePayment(locals: Record<string, unknown>, payment: RequestPayment): void {
  locals.payment = payment;
  locals.x402 = payment;
}

function paywallRequestOf(req: Request): PaywallRequest {
  return {
    method: req.method,
    // originalUrl survives sub-app mounting and router rewrites of req.url.
    url: req.originalUrl,
    host: req.headers.host,
    // Not req.protocol: that follows Express's own "trust proxy" setting; the Paywall applies trustProxy.
    protocol: (req.socket as TLSSocket).encrypted ? 'https' : 'http',
    // Node joins repeated headers with ", " (only set-cookie stays an array, and the Paywall never reads it).
    headers: req.headers as Record<string, string | undefined>,
  };
}
