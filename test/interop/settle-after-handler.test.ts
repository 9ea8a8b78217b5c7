// Charge only for what was served: Express, Koa, Hono (on @hono/node-server) and Fastify sellers on the
// real backend and chain, paid by signed x402 headers. A route settles after its handler by default: a handler that fails charges nothing (the
// same signed payment works once it succeeds), a settlement that fails after the handler drops the held
// response (402, none of its bytes sent), concurrent copies of one payment run the handler once, and a
// streamed or piped response reaches the buyer only after the settlement. `before-handler` keeps the
// spec's order.
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { stream as honoStream } from 'hono/streaming';
import Koa from 'koa';
import Router from '@koa/router';
import { Readable } from 'node:stream';
import { parseEther, parseUnits } from 'viem';
import { createWalletClient, http } from 'viem';
import { paymentMiddleware as expressPayments } from '../../adapters/express.js';
import { paymentMiddleware as koaPayments } from '../../adapters/koa.js';
import { paymentMiddleware as honoPayments, type PaymentEnv } from '../../adapters/hono.js';
import { paymentMiddleware as fastifyPayments } from '../../adapters/fastify.js';
import type { RouteConfig } from '../../middleware/index.js';
import { usdcAbi } from '../../server/chain/usdc.js';
import { fundedBuyer, paymentHeaderV1, setEthBalance, signAuthorization, testChain, usdcBalance } from '../support/chain.js';
import { startTestServer, type TestServer } from '../support/server.js';
import { registerEndpoint, serve, setUpSeller, type RunningApp } from './seller.js';

const PRICE = 10_000n;
const SECRET = 'the-paid-content-7f3a';

let server: TestServer;
let seller: Awaited<ReturnType<typeof setUpSeller>>;
beforeAll(async () => {
  server = await startTestServer();
  seller = await setUpSeller(server);
}, 60_000);
afterAll(async () => { await server?.close(); });

/** What each test's handler does, set per test; every run is counted. */
interface Behaviour {
  runs: number;
  /** Runs inside the handler before it answers (e.g. the buyer spends its funds meanwhile). */
  before?: () => Promise<void>;
  answer: 'ok' | 'fail' | 'throw' | 'stream' | 'pipe';
  /** stream: the second chunk waits for this. */
  secondChunk?: Promise<void>;
}

type Framework = 'Express' | 'Koa' | 'Hono' | 'Fastify';
const FRAMEWORKS: Framework[] = ['Express', 'Koa', 'Hono', 'Fastify'];

function expressApp(route: RouteConfig, behaviour: Behaviour) {
  const app = express();
  app.use(expressPayments({ backendUrl: server.url, apiKey: seller.sellerKey, routes: { 'GET /paid': route } }));
  app.get('/paid', async (_req, res, next) => {
    behaviour.runs++;
    try {
      await behaviour.before?.();
      switch (behaviour.answer) {
        case 'ok': res.json({ secret: SECRET, payer: res.locals.payment.payer }); return;
        case 'fail': res.status(500).json({ error: 'upstream_down' }); return;
        case 'throw': throw new Error('handler blew up');
        case 'stream':
          res.setHeader('content-type', 'text/event-stream');
          res.write(`data: ${SECRET}-1\n\n`);
          await behaviour.secondChunk;
          res.end(`data: ${SECRET}-2\n\n`);
          return;
        case 'pipe':
          res.setHeader('content-type', 'application/octet-stream');
          Readable.from(bigBody()).pipe(res);
      }
    } catch (err) {
      next(err);
    }
  });
  return app;
}

function koaApp(route: RouteConfig, behaviour: Behaviour) {
  const app = new Koa();
  const router = new Router();
  router.get('/paid', async (ctx) => {
    behaviour.runs++;
    await behaviour.before?.();
    switch (behaviour.answer) {
      case 'ok': ctx.body = { secret: SECRET, payer: ctx.state.payment.payer }; return;
      case 'fail': ctx.status = 500; ctx.body = { error: 'upstream_down' }; return;
      case 'throw': throw new Error('handler blew up');
      case 'stream': {
        const stream = new Readable({ read() {} });
        stream.push(`data: ${SECRET}-1\n\n`);
        void behaviour.secondChunk!.then(() => { stream.push(`data: ${SECRET}-2\n\n`); stream.push(null); });
        ctx.type = 'text/event-stream';
        ctx.body = stream;
        return;
      }
      case 'pipe':
        ctx.type = 'application/octet-stream';
        ctx.body = Readable.from(bigBody());
    }
  });
  app.silent = true; // the thrown handler is expected
  app.use(koaPayments({ backendUrl: server.url, apiKey: seller.sellerKey, routes: { 'GET /paid': route } }));
  app.use(router.routes());
  return app;
}

function honoApp(route: RouteConfig, behaviour: Behaviour) {
  const app = new Hono<PaymentEnv>();
  app.onError((_error, c) => c.text('Internal Server Error', 500)); // Hono's answer, without logging the expected throw
  app.use(honoPayments({ backendUrl: server.url, apiKey: seller.sellerKey, routes: { 'GET /paid': route } }));
  app.get('/paid', async (c) => {
    behaviour.runs++;
    await behaviour.before?.();
    switch (behaviour.answer) {
      case 'ok': return c.json({ secret: SECRET, payer: c.get('payment').payer });
      case 'fail': return c.json({ error: 'upstream_down' }, 500);
      case 'throw': throw new Error('handler blew up');
      case 'stream':
        c.header('content-type', 'text/event-stream');
        return honoStream(c, async (stream) => {
          await stream.write(`data: ${SECRET}-1\n\n`);
          await behaviour.secondChunk;
          await stream.write(`data: ${SECRET}-2\n\n`);
        });
      case 'pipe':
        return c.body(Readable.toWeb(Readable.from(bigBody())) as ReadableStream, 200, { 'content-type': 'application/octet-stream' });
    }
  });
  return app;
}

function fastifyApp(route: RouteConfig, behaviour: Behaviour) {
  const app = Fastify();
  app.register(fastifyPayments({ backendUrl: server.url, apiKey: seller.sellerKey, routes: { 'GET /paid': route } }));
  app.get('/paid', async (request, reply) => {
    behaviour.runs++;
    await behaviour.before?.();
    switch (behaviour.answer) {
      case 'ok': return { secret: SECRET, payer: request.payment.payer };
      case 'fail': return reply.code(500).send({ error: 'upstream_down' });
      case 'throw': throw new Error('handler blew up');
      case 'stream':
        // Server-sent events the usual Fastify way: the handler takes the Node response over.
        reply.hijack();
        reply.raw.writeHead(200, { 'content-type': 'text/event-stream' });
        reply.raw.write(`data: ${SECRET}-1\n\n`);
        await behaviour.secondChunk;
        reply.raw.end(`data: ${SECRET}-2\n\n`);
        return;
      case 'pipe':
        return reply.type('application/octet-stream').send(Readable.from(bigBody()));
    }
  });
  return app;
}

const APPS = { Express: expressApp, Koa: koaApp, Hono: honoApp, Fastify: fastifyApp };

/** 4 MiB in 64 KiB chunks, the last byte of each chunk its index. */
function* bigBody() {
  for (let i = 0; i < 64; i++) {
    const chunk = Buffer.alloc(65_536, 0x61);
    chunk[chunk.length - 1] = i;
    yield chunk;
  }
}

/** A seller app on a free port, registered at the backend for its /paid route. */
async function sellerApp(framework: Framework, behaviour: Behaviour, route: RouteConfig = { price: '$0.01' }): Promise<RunningApp> {
  const running = await serve(APPS[framework](route, behaviour));
  const registered = await registerEndpoint(server, seller.platformKey, { url: `${running.url}/paid`, priceUsdc: '0.01' });
  if (registered.status !== 201) throw new Error(`register: ${registered.status} ${registered.text}`);
  return running;
}

async function signedHeader(buyer?: Awaited<ReturnType<typeof fundedBuyer>>) {
  const payer = buyer ?? await fundedBuyer('1');
  return { payer, header: paymentHeaderV1(await signAuthorization(payer, { to: seller.payTo, value: PRICE })) };
}

const get = (app: RunningApp, header: string) => fetch(`${app.url}/paid`, { headers: { 'X-Payment': header } });

/** The buyer empties its wallet (to someone else) while the handler runs: the held payment cannot settle. */
async function spendEverything(buyer: Awaited<ReturnType<typeof fundedBuyer>>) {
  await setEthBalance(buyer.address, parseEther('1'));
  const { chain, rpcUrl, usdc, publicClient } = testChain();
  const wallet = createWalletClient({ chain, transport: http(rpcUrl), account: buyer });
  const hash = await wallet.writeContract({ address: usdc, abi: usdcAbi, functionName: 'transfer', args: ['0x000000000000000000000000000000000000dEaD', await usdcBalance(buyer.address)] });
  await publicClient.waitForTransactionReceipt({ hash });
}

describe.each<Framework>(FRAMEWORKS)('%s, settling after the handler (the default)', (framework) => {
  it('a handler that answers 500 charges nothing; the same signed payment is charged once the handler succeeds', async () => {
    const behaviour: Behaviour = { runs: 0, answer: 'fail' };
    const app = await sellerApp(framework, behaviour);
    try {
      const { payer, header } = await signedHeader();
      const [buyerBefore, sellerBefore] = [await usdcBalance(payer.address), await usdcBalance(seller.payTo)];
      const failed = await get(app, header);
      expect(failed.status).toBe(500);
      expect(failed.headers.get('x-payment-response')).toBeNull();
      expect(await usdcBalance(payer.address)).toBe(buyerBefore);
      expect(await usdcBalance(seller.payTo)).toBe(sellerBefore);

      behaviour.answer = 'ok';
      const ok = await get(app, header);
      expect(ok.status).toBe(200);
      expect(await ok.json()).toMatchObject({ secret: SECRET, payer: payer.address });
      expect(ok.headers.get('x-payment-response')).toBeTruthy();
      expect(await usdcBalance(payer.address)).toBe(buyerBefore - PRICE);
      expect(await usdcBalance(seller.payTo)).toBe(sellerBefore + PRICE);
      expect(behaviour.runs).toBe(2);
    } finally {
      await app.close();
    }
  });

  it('a handler that throws charges nothing', async () => {
    const behaviour: Behaviour = { runs: 0, answer: 'throw' };
    const app = await sellerApp(framework, behaviour);
    try {
      const { payer, header } = await signedHeader();
      const before = await usdcBalance(payer.address);
      expect((await get(app, header)).status).toBe(500);
      expect(await usdcBalance(payer.address)).toBe(before);
      // Released: nothing stays claimed on the backend.
      const records = await server.app.payments.records.payments.find({ payerAddress: payer.address }).lean();
      expect(records).toEqual([]);
    } finally {
      await app.close();
    }
  });

  it('a handler that answers 200 is charged once, and the buyer gets the body with the settlement headers', async () => {
    const behaviour: Behaviour = { runs: 0, answer: 'ok' };
    const app = await sellerApp(framework, behaviour);
    try {
      const { payer, header } = await signedHeader();
      const before = await usdcBalance(seller.payTo);
      const res = await get(app, header);
      expect(res.status).toBe(200);
      expect(res.headers.get('payment-response')).toBeTruthy();
      expect(res.headers.get('cache-control')).toBe('private, no-store');
      expect(await res.json()).toMatchObject({ secret: SECRET });
      expect(await usdcBalance(seller.payTo)).toBe(before + PRICE);
      await server.app.payments.records.recordsWritten();
      const [record] = await server.app.payments.records.payments.find({ payerAddress: payer.address }).lean();
      expect(record).toMatchObject({ status: 'settled' });
    } finally {
      await app.close();
    }
  });

  it('a settlement that fails after the handler: 402 with the reason, and none of the held body reaches the buyer', async () => {
    const behaviour: Behaviour = { runs: 0, answer: 'ok' };
    const app = await sellerApp(framework, behaviour);
    try {
      const { payer, header } = await signedHeader();
      behaviour.before = () => spendEverything(payer);
      const res = await get(app, header);
      const text = await res.text();
      expect(res.status).toBe(402);
      expect(JSON.parse(text)).toMatchObject({ error: 'insufficient_funds' });
      expect(text).not.toContain(SECRET);
      expect(res.headers.get('x-payment-response')).toBeNull();
      expect(behaviour.runs).toBe(1);
    } finally {
      await app.close();
    }
  });

  it('concurrent copies of one payment run the handler once and charge once', async () => {
    const behaviour: Behaviour = { runs: 0, answer: 'ok' };
    const app = await sellerApp(framework, behaviour);
    try {
      const { payer, header } = await signedHeader();
      const before = await usdcBalance(payer.address);
      const answers = await Promise.all(Array.from({ length: 10 }, () => get(app, header)));
      expect(answers.filter((r) => r.status === 200)).toHaveLength(1);
      const refused = await Promise.all(answers.filter((r) => r.status === 402).map((r) => r.json() as Promise<{ error: string }>));
      expect(refused).toHaveLength(9);
      for (const body of refused) expect(body.error).toBe('nonce_already_used');
      expect(behaviour.runs).toBe(1);
      expect(await usdcBalance(payer.address)).toBe(before - PRICE);
    } finally {
      await app.close();
    }
  });

  it('a streamed response (server-sent events) reaches the buyer only after the payment settled; then it flows', async () => {
    let next!: () => void;
    const behaviour: Behaviour = { runs: 0, answer: 'stream', secondChunk: new Promise<void>((resolve) => { next = resolve; }) };
    const app = await sellerApp(framework, behaviour);
    // The settlement transaction is held (as a slow chain would) until the test lets it go.
    const settler = server.app.settlement!.settler;
    let letSettle!: () => void;
    const settling = new Promise<void>((resolve) => { letSettle = resolve; });
    let submitted = false;
    const hook = async () => { submitted = true; await settling; };
    settler.onSubmitted.push(hook);
    try {
      const { payer, header } = await signedHeader();
      const before = await usdcBalance(payer.address);
      const response = get(app, header);
      while (!submitted) await new Promise((r) => setTimeout(r, 10));
      // The handler has written its first event, and the settlement is under way: nothing has reached the buyer.
      const early = await Promise.race([response.then(() => 'answered'), new Promise((r) => setTimeout(() => r('nothing yet'), 500))]);
      expect(early).toBe('nothing yet');
      letSettle();
      const res = await response;
      expect(res.status).toBe(200);
      expect(res.headers.get('x-payment-response')).toBeTruthy();
      const reader = res.body!.getReader();
      const first = new TextDecoder().decode((await reader.read()).value);
      expect(first).toContain(`${SECRET}-1`);
      // The first bytes came after the money moved, and while the handler still streams.
      expect(await usdcBalance(payer.address)).toBe(before - PRICE);
      next();
      let rest = '';
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) rest += new TextDecoder().decode(chunk.value);
      expect(rest).toContain(`${SECRET}-2`);
    } finally {
      letSettle();
      settler.onSubmitted.splice(settler.onSubmitted.indexOf(hook), 1);
      await app.close();
    }
  });

  it('a streamed response whose settlement fails sends none of the stream: 402', async () => {
    const behaviour: Behaviour = { runs: 0, answer: 'stream', secondChunk: Promise.resolve() };
    const app = await sellerApp(framework, behaviour);
    try {
      const { payer, header } = await signedHeader();
      behaviour.before = () => spendEverything(payer);
      const res = await get(app, header);
      const text = await res.text();
      expect(res.status).toBe(402);
      expect(text).not.toContain(SECRET);
    } finally {
      await app.close();
    }
  });

  it('a large piped response (4 MiB) arrives whole after the settlement', async () => {
    const behaviour: Behaviour = { runs: 0, answer: 'pipe' };
    const app = await sellerApp(framework, behaviour);
    try {
      const { payer, header } = await signedHeader();
      const before = await usdcBalance(payer.address);
      const res = await get(app, header);
      expect(res.status).toBe(200);
      const body = Buffer.from(await res.arrayBuffer());
      expect(body.length).toBe(64 * 65_536);
      expect([...Array(64).keys()].every((i) => body[(i + 1) * 65_536 - 1] === i)).toBe(true);
      expect(await usdcBalance(payer.address)).toBe(before - PRICE);
    } finally {
      await app.close();
    }
  });
});

describe.each<Framework>(FRAMEWORKS)('%s, settle: before-handler', (framework) => {
  it('settles before the handler runs: a handler that fails afterwards has already been paid for', async () => {
    const behaviour: Behaviour = { runs: 0, answer: 'fail' };
    const app = await sellerApp(framework, behaviour, { price: '$0.01', settle: 'before-handler' });
    try {
      const { payer, header } = await signedHeader();
      const before = await usdcBalance(payer.address);
      let chargedWhenHandlerRan: bigint | undefined;
      behaviour.before = async () => { chargedWhenHandlerRan = before - await usdcBalance(payer.address); };
      const res = await get(app, header);
      expect(res.status).toBe(500);
      expect(res.headers.get('x-payment-response')).toBeTruthy();
      expect(chargedWhenHandlerRan).toBe(PRICE);
    } finally {
      await app.close();
    }
  });
});

it('a hold nobody decides expires and is released: nothing is charged and the payment may be presented again', async () => {
  const payer = await fundedBuyer('1');
  const signed = await signAuthorization(payer, { to: seller.payTo, value: PRICE });
  const app = await sellerApp('Express', { runs: 0, answer: 'ok' });
  try {
    const resource = `${app.url}/paid`;
    const held = await server.request('POST', '/v0/payments/holds', { key: seller.sellerKey, body: { paymentHeader: paymentHeaderV1(signed), resource, amount: '0.01', holdSeconds: 1 } });
    expect(held.status).toBe(201);
    // Released once its second has passed: by this call of the sweep or by the server's own sweep, which
    // runs in the background and may come first (the hold's one decision says which happened, either way).
    const decisions = server.app.db.collection('payment_hold_decisions');
    const deadline = Date.now() + 30_000;
    while (!(await decisions.findOne({ _id: held.body.holdId } as never)) && Date.now() < deadline) {
      await server.app.holds.releaseExpired();
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(await decisions.findOne({ _id: held.body.holdId } as never)).toMatchObject({ decision: 'release', why: 'expired' });
    const capture = await server.request('POST', `/v0/payments/holds/${held.body.holdId}/capture`, { key: seller.sellerKey });
    expect(capture.status).toBe(409);
    expect(capture.body).toMatchObject({ error: 'hold_expired' });
    expect(await usdcBalance(payer.address)).toBe(parseUnits('1', 6));
    // The same signed payment works again.
    const paid = await get(app, paymentHeaderV1(signed));
    expect(paid.status).toBe(200);
    expect(await usdcBalance(payer.address)).toBe(parseUnits('1', 6) - PRICE);
  } finally {
    await app.close();
  }
});

it('a hold is captured or released once: the later call is refused (409), and another seller cannot see it (404)', async () => {
  const payer = await fundedBuyer('1');
  const app = await sellerApp('Express', { runs: 0, answer: 'ok' });
  const other = await setUpSeller(server);
  try {
    const hold = async () => (await server.request('POST', '/v0/payments/holds', {
      key: seller.sellerKey, body: { paymentHeader: paymentHeaderV1(await signAuthorization(payer, { to: seller.payTo, value: PRICE })), resource: `${app.url}/paid`, amount: '0.01' },
    })).body.holdId as string;
    const first = await hold();
    expect((await server.request('POST', `/v0/payments/holds/${first}/capture`, { key: other.sellerKey })).status).toBe(404);
    const [captured, released] = await Promise.all([
      server.request('POST', `/v0/payments/holds/${first}/capture`, { key: seller.sellerKey }),
      server.request('POST', `/v0/payments/holds/${first}/release`, { key: seller.sellerKey }),
    ]);
    // Exactly one of the two decided it.
    expect([captured.status, released.status].sort()).toEqual(captured.status === 200 ? [200, 409] : [200, 409]);
    if (captured.status === 200) expect(released.body.error).toBe('hold_captured');
    else expect(captured.body.error).toBe('hold_released');

    const second = await hold();
    expect((await server.request('POST', `/v0/payments/holds/${second}/release`, { key: seller.sellerKey })).body).toEqual({ holdId: second, released: true });
    expect((await server.request('POST', `/v0/payments/holds/${second}/release`, { key: seller.sellerKey })).status).toBe(200);
    expect((await server.request('POST', `/v0/payments/holds/${second}/capture`, { key: seller.sellerKey })).body).toMatchObject({ error: 'hold_released', status: 409 });
  } finally {
    await app.close();
  }
});
