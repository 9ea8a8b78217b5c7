import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { TLSSocket } from 'node:tls';
import type { ErrorBody, PaywallRequest, RequestPayment } from '../middleware/index.js';
import { paywallSource, type PaymentMiddlewareOptions, type PaywallSource } from './paywall-source.js';
import { holdResponse } from './held-response.js';
import { nodeTransport } from './node-transport.js';

export type { PaymentMiddlewareOptions } from './paywall-source.js';
// Start-up companion of the middleware: registers the same route table at the backend (platform key).
export { syncEndpoints } from '../middleware/index.js';
export type { EndpointSyncReport, SyncedEndpoint, SyncEndpointsOptions } from '../middleware/index.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The payment this request runs for: set on the routes the table prices, undefined on every other route. */
    payment: RequestPayment;
  }
}

/**
 * x402 paywall for Fastify (5), as a plugin. Register it before your routes:
 *
 *   app.register(paymentMiddleware({ backendUrl, apiKey, routes: { 'GET /weather': { price: '$0.01' } } }));
 *
 * Like a plugin wrapped in fastify-plugin, it is not encapsulated: its hook applies to the context it is
 * registered in and every context below it (registered on the root: the whole app, and the 404 handler,
 * so a path trick that matches no route still gets its 400).
 *
 * Unpaid: 402 with the x402 v1 body and the v2 `PAYMENT-REQUIRED` header. Paid (`X-Payment` or
 * `PAYMENT-SIGNATURE`): the route runs with `request.payment` set, and the response carries
 * `X-Payment-Response` and `PAYMENT-RESPONSE`. The check is an `onRequest` hook, so an unpaid request
 * costs no body parsing. A route settles after its handler by default: Fastify writes every answer
 * through the Node response (`reply.raw`), whatever was sent (an object, a string, a stream, a web
 * Response) and also after `reply.hijack()`, and that response is held back until the payment is settled
 * (only a status below 400 is charged; see held-response.ts); `settle: 'before-handler'` settles first.
 */
export function paymentMiddleware(options: PaymentMiddlewareOptions): FastifyPluginAsync {
  const paywall = paywallSource(options, { transport: nodeTransport });
  const plugin: FastifyPluginAsync = async (app) => {
    // Declared up front (Fastify keeps the request's shape stable); a second paywall elsewhere in the app
    // reuses it. Typed as present, like other request decorators, since a priced route always has it.
    if (!app.hasRequestDecorator('payment')) app.decorateRequest('payment', undefined as unknown as RequestPayment);
    app.addHook('onRequest', async (request, reply) => {
      // A throw here goes to Fastify's error handler (500); the route is never reached.
      const outcome = await paywall.handle(paywallRequestOf(request));
      switch (outcome.kind) {
        case 'pass':
          if (await emptyParameterOfPricedRoute(paywall, request)) return reply.code(400).send(EMPTY_PARAMETER);
          return;
        case 'paid':
          reply.headers(outcome.responseHeaders);
          request.payment = outcome.payment;
          return;
        case 'held':
          holdResponse(reply.raw, outcome.hold);
          request.payment = outcome.hold.payment;
          return;
        case 'payment-required':
          // The ready-made JSON text: a string with a JSON Content-Type goes out as it is.
          return reply.code(402).headers(outcome.headers).send(outcome.bodyText);
        case 'reject':
        case 'unavailable':
          return reply.code(outcome.status).send(outcome.body);
      }
    });
  };
  // What fastify-plugin does, without depending on it: skip-override runs the plugin in the context that
  // registers it rather than in a child of its own, where its hook would reach none of the app's routes.
  return Object.assign(plugin, {
    [Symbol.for('skip-override')]: true,
    [Symbol.for('fastify.display-name')]: 'agentgate-x402',
  });
}

const EMPTY_PARAMETER: ErrorBody = {
  error: 'empty_path_parameter',
  message: 'path has an empty segment where a protected route expects a parameter',
  status: 400,
};

/**
 * Fastify's router lets a parameter match an empty segment ("GET /city/" runs the "/city/:name" route
 * with name ""), where the paywall, like Express and Koa, reads no parameter and so no protected route
 * (it sees "/city"). Such a request is refused when the route Fastify chose is one the table prices:
 * the route's own pattern, read as a path, asks the table (no payment header, so nothing is redeemed).
 */
async function emptyParameterOfPricedRoute(paywall: PaywallSource, request: FastifyRequest): Promise<boolean> {
  const pattern = request.routeOptions.url;
  const params = request.params as Record<string, unknown> | undefined;
  if (pattern === undefined || params === undefined || !Object.values(params).includes('')) return false;
  const probe = await paywall.handle({ ...paywallRequestOf(request), url: pattern, headers: {} });
  return probe.kind !== 'pass';
}

function paywallRequestOf(request: FastifyRequest): PaywallRequest {
  return {
    method: request.method,
    // The request target as received (after Fastify's rewriteUrl, if any): what the router matched.
    url: request.url,
    host: request.headers.host,
    // Not request.protocol: that follows Fastify's own trustProxy; the Paywall applies its own.
    protocol: (request.raw.socket as TLSSocket).encrypted ? 'https' : 'http',
    // Node joins repeated headers with ", " (only set-cookie stays an array, and the Paywall never reads it).
    headers: request.headers as Record<string, string | undefined>,
  };
}
