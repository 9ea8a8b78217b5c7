/**
 * Differential check of the routing guarantee against the real routers: raw request lines go over a
 * socket to Express 5 and to Koa + @koa/router, each with the protected routes mounted; for every
 * target that reaches a protected handler there, our Paywall must answer 402 or 400, never pass.
 */
import Router from '@koa/router';
import express from 'express';
import Koa from 'koa';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { Paywall } from '../../middleware/paywall.js';
import { anvilSettings, FakeFacilitator, request } from './fixtures.js';

const PROTECTED = ['GET /weather', 'GET /city/:name', 'POST /items/:id'];
const paywall = new Paywall({
  routes: Object.fromEntries(PROTECTED.map((p) => [p, { price: '$0.01' }])),
  facilitator: new FakeFacilitator(),
  settings: anvilSettings,
});

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

function expressApp() {
  const app = express();
  for (const pattern of PROTECTED) {
    const [verb, path] = pattern.split(' ') as [string, string];
    app[verb.toLowerCase() as 'get' | 'post'](path, (_req, res) => res.status(REACHED).end());
  }
  return createServer(app);
}

function koaApp() {
  const app = new Koa();
  const router = new Router();
  for (const pattern of PROTECTED) {
    const [verb, path] = pattern.split(' ') as [string, string];
    router[verb.toLowerCase() as 'get' | 'post'](path, (ctx) => {
      ctx.status = REACHED;
    });
  }
  app.use(router.routes());
  return createServer(app.callback());
}

describe.each([
  ['Express 5', expressApp],
  ['Koa + @koa/router', koaApp],
])('%s', (_name, makeServer) => {
  let server: Server;
  let port: number;
  beforeAll(async () => {
    server = makeServer();
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
