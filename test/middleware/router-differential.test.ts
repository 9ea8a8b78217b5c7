/**
 * Differential check of the routing guarantee against the real routers: raw request lines go over a
 * socket to Express 5, Koa + @koa/router, Hono (on @hono/node-server) and Fastify, each with the
 * protected routes mounted; for every target that reaches a protected handler there, our Paywall must
 * answer 402 or 400, never pass. Once as the core sees a raw target (the Express and Koa adapters hand
 * it the target as received), and once end to end with each framework's adapter mounted: Hono routes on
 * the URL its server parsed, and Fastify lets a parameter match an empty segment, which its adapter
 * answers for (adapters/fastify.ts).
 */
import { createAdaptorServer } from '@hono/node-server';
import Router from '@koa/router';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { paymentMiddleware as expressPayments } from '../../adapters/express.js';
import { paymentMiddleware as fastifyPayments } from '../../adapters/fastify.js';
import { paymentMiddleware as honoPayments } from '../../adapters/hono.js';
import { paymentMiddleware as koaPayments } from '../../adapters/koa.js';
import { Paywall, type PaywallOptions } from '../../middleware/paywall.js';
import { anvilSettings, FakeFacilitator, request } from './fixtures.js';

const PROTECTED = ['GET /weather', 'GET /city/:name', 'POST /items/:id'];
const paywallOptions: PaywallOptions = {
  routes: Object.fromEntries(PROTECTED.map((p) => [p, { price: '$0.01' }])),
  facilitator: new FakeFacilitator(),
  settings: anvilSettings,
};
const paywall = new Paywall(paywallOptions);

const TARGETS = [
  '/weather', '/WEATHER', '/Weather/', '/weather//', '//weather', '/weather?x', '/weather#x', '/weather#',
  '/%77eather', '/./weather', '/x/../weather', '/weather/.', '/weather/..', '/weather%2f', '/weather%2F',
  '/weather%20', '/weather;x', '/weather\\', '/weather%5c', '/weather%00', '/weather\t', '/weather%09',
  '/weatherx', 'http://shop.example/weather', 'HTTP://shop.example/WEATHER/', '/city/paris', '/city/..',
  '/city/.', '/city/a%2Fb', '/city/%2e%2e', '/city/paris;x', '/CITY/Paris/', '/city/', '/city//x',
  '/city/%ZZ', '/city/caf%C3%A9', '/city/a%252Fb', '/items/1', '/items/..', '/items/%2e', '/items/1/',
  '/city/x?y=/../weather', '/weather%23', '/weather%3F', '/%2fweather', '/;/weather',
];

/** Sends one raw request line; resolves with the status code, or 0 if the server refused the bytes. */
async function rawStatus(port: number, method: string, target: string): Promise<number> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  socket.write(`${method} ${target} HTTP/1.1\r\nHost: shop.example\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  await once(socket, 'close');
  const match = /^HTTP\/1\.1 (\d{3})/.exec(Buffer.concat(chunks).toString('latin1'));
  return match ? Number(match[1]) : 0;
}

const REACHED = 299; // status the protected handlers answer with

const routesOf = () => PROTECTED.map((pattern) => pattern.split(' ') as ['GET' | 'POST', string]);

function expressApp(paywalled = false) {
  const app = express();
  if (paywalled) app.use(expressPayments(paywallOptions));
  for (const pattern of PROTECTED) {
    const [verb, path] = pattern.split(' ') as [string, string];
    app[verb.toLowerCase() as 'get' | 'post'](path, (_req, res) => res.status(REACHED).end());
  }
  return createServer(app);
}

function koaApp(paywalled = false) {
  const app = new Koa();
  const router = new Router();
  if (paywalled) app.use(koaPayments(paywallOptions));
  for (const pattern of PROTECTED) {
    const [verb, path] = pattern.split(' ') as [string, string];
    router[verb.toLowerCase() as 'get' | 'post'](path, (ctx) => {
      ctx.status = REACHED;
    });
  }
  app.use(router.routes());
  return createServer(app.callback());
}

function honoApp(paywalled = false) {
  const app = new Hono();
  if (paywalled) app.use(honoPayments(paywallOptions));
  for (const [verb, path] of routesOf()) app.on(verb, path, (c) => c.body(null, REACHED as 200));
  return createAdaptorServer({ fetch: app.fetch }) as Server;
}

async function fastifyApp(paywalled = false) {
  const app = Fastify();
  if (paywalled) app.register(fastifyPayments(paywallOptions));
  for (const [verb, path] of routesOf()) app.route({ method: verb, url: path, handler: (_request, reply) => reply.code(REACHED).send() });
  await app.ready();
  return app.server;
}

async function listening(server: Server): Promise<{ server: Server; port: number }> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, port: (server.address() as AddressInfo).port };
}

describe.each([
  ['Express 5', expressApp],
  ['Koa + @koa/router', koaApp],
])('%s', (_name, makeServer) => {
  let server: Server;
  let port: number;
  beforeAll(async () => {
    server = await makeServer();
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    server.close();
    await once(server, 'close');
  });

  test.each(['GET', 'HEAD', 'POST'])('every %s target the router sends to a protected handler is protected or refused', async (method) => {
    const reached: string[] = [];
    for (const target of TARGETS) {
      if ((await rawStatus(port, method, target)) === REACHED) reached.push(target);
    }
    expect(reached.length).toBeGreaterThan(0); // the harness itself works
    if (process.env.SHOW_REACHED) console.log(_name, method, reached);
    for (const target of reached) {
      const outcome = await paywall.handle(request(target, { method }));
      expect({ target, kind: outcome.kind }).toEqual({ target, kind: expect.stringMatching(/^(payment-required|reject)$/) });
    }
  });
});

describe.each([
  ['Express 5', expressApp],
  ['Koa + @koa/router', koaApp],
  ['Hono on @hono/node-server', honoApp],
  ['Fastify', fastifyApp],
])('%s with its adapter mounted', (_name, makeServer) => {
  let open: { server: Server; port: number };
  let paywalled: { server: Server; port: number };
  beforeAll(async () => {
    open = await listening(await makeServer());
    paywalled = await listening(await makeServer(true));
  });
  afterAll(async () => {
    for (const { server } of [open, paywalled]) {
      server.close();
      await once(server, 'close');
    }
  });

  test.each(['GET', 'HEAD', 'POST'])('no %s target reaches a protected handler unpaid: each one that would is answered 402 or 400', async (method) => {
    const answers: Array<{ target: string; status: number }> = [];
    for (const target of TARGETS) {
      const reached = (await rawStatus(open.port, method, target)) === REACHED;
      const status = await rawStatus(paywalled.port, method, target);
      if (reached) answers.push({ target, status });
      expect({ target, status }).not.toEqual({ target, status: REACHED });
    }
    expect(answers.length).toBeGreaterThan(0); // the harness itself works
    expect(answers.filter(({ status }) => status !== 402 && status !== 400)).toEqual([]);
  });
});
