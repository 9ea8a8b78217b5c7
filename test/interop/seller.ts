import { createAdaptorServer } from '@hono/node-server';
import Router from '@koa/router';
import express, { type Express } from 'express';
import Fastify, { type FastifyInstance } from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';
import { once } from 'node:events';
import { HTTPFacilitatorClient } from '@x402/core/server';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { paymentMiddleware as expressPayments } from '../../adapters/express.js';
import { paymentMiddleware as fastifyPayments } from '../../adapters/fastify.js';
import { paymentMiddleware as honoPayments, type PaymentEnv } from '../../adapters/hono.js';
import { paymentMiddleware as koaPayments } from '../../adapters/koa.js';
import type { PaymentMiddlewareOptions } from '../../adapters/paywall-source.js';
import type { RequestPayment } from '../../middleware/index.js';
import { signUp } from '../support/agents.js';
import type { TestServer } from '../support/server.js';

/** A seller set up the way the console does it: acceptance on with a fresh payTo, and a seller key. */
export async function setUpSeller(server: TestServer) {
  const { platform_key: platformKey, org_id: orgId } = await signUp(server);
  const payTo = privateKeyToAccount(generatePrivateKey()).address as Address;
  const acceptance = await server.request('PUT', '/v0/payments/acceptance', { key: platformKey, body: { enabled: true, payTo } });
  if (acceptance.status !== 200) throw new Error(`acceptance: ${acceptance.status} ${acceptance.text}`);
  const key = await server.request('POST', '/v0/payments/seller-keys', { key: platformKey, body: {} });
  if (key.status !== 201) throw new Error(`seller key: ${key.status} ${key.text}`);
  return { platformKey, sellerKey: key.body.apiKey as string, payTo, orgId: orgId as string };
}

/** The official HTTPFacilitatorClient pointed at our /v0/x402 with a seller key, as an official SDK seller sets it up. */
export function ourFacilitator(server: TestServer, sellerKey: string): HTTPFacilitatorClient {
  const h = { Authorization: `Bearer ${sellerKey}` };
  return new HTTPFacilitatorClient({ url: `${server.url}/v0/x402`, createAuthHeaders: async () => ({ verify: h, settle: h, supported: h }) });
}

/** POST /v0/payments/endpoints: the backend fetches `url` and checks its 402 before it registers it. */
export async function registerEndpoint(server: TestServer, platformKey: string, body: { url: string; priceUsdc: string }) {
  return server.request('POST', '/v0/payments/endpoints', { key: platformKey, body });
}

export interface RunningApp {
  url: string;
  close(): Promise<void>;
}

/** Mounts an app (Express, Koa, Hono on @hono/node-server, or Fastify) on a free loopback port. */
export async function serve(app: Express | Koa | Hono<any> | FastifyInstance): Promise<RunningApp> {
  if ('inject' in app) {
    // Fastify runs its own server.
    await app.listen({ port: 0, host: '127.0.0.1' });
    return {
      url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
      async close() {
        app.server.closeAllConnections();
        await app.close();
      },
    };
  }
  const server: Server =
    'fetch' in app ? (createAdaptorServer({ fetch: app.fetch }) as Server) : createServer('callback' in app ? app.callback() : app);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export type Framework = 'Express' | 'Koa' | 'Hono' | 'Fastify';

/** What a paid route's handler answers, from the request's query and the payment the middleware put on it. */
export type PaidHandler = (query: Record<string, string | undefined>, payment: RequestPayment) => { status: number; body: unknown };

/** One route (`method path`) behind our payment middleware in `framework`, answered by `handle` (which may throw). */
export function paidApp(framework: Framework, options: PaymentMiddlewareOptions, method: 'GET' | 'POST', path: string, handle: PaidHandler): Express | Koa | Hono<PaymentEnv> | FastifyInstance {
  const verb = method === 'GET' ? 'get' : 'post';
  switch (framework) {
    case 'Express': {
      const a = express();
      a.use(expressPayments(options));
      a[verb](path, (req, res) => {
        const answer = handle(req.query as Record<string, string | undefined>, res.locals.x402);
        res.status(answer.status).json(answer.body);
      });
      return a;
    }
    case 'Koa': {
      const a = new Koa();
      const router = new Router();
      router[verb](path, (ctx) => {
        const answer = handle(ctx.query as Record<string, string | undefined>, ctx.state.x402);
        ctx.status = answer.status;
        ctx.body = answer.body;
      });
      a.use(koaPayments(options)).use(router.routes());
      return a;
    }
    case 'Hono': {
      const a = new Hono<PaymentEnv>();
      a.use(honoPayments(options));
      a[verb](path, (c) => {
        const answer = handle(c.req.query(), c.get('payment'));
        return c.json(answer.body as object, answer.status as 200);
      });
      return a;
    }
    case 'Fastify': {
      const a = Fastify();
      void a.register(fastifyPayments(options));
      a[verb](path, async (request, reply) => {
        const answer = handle(request.query as Record<string, string | undefined>, request.payment!);
        return reply.status(answer.status).send(answer.body);
      });
      return a;
    }
  }
}
