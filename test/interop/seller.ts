import { createAdaptorServer } from '@hono/node-server';
import type { Express } from 'express';
import type { FastifyInstance } from 'fastify';
import type { Hono } from 'hono';
import type Koa from 'koa';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { signUp } from '../support/agents.js';
import type { TestServer } from '../support/server.js';

/** A seller set up the way the console does it: acceptance on with a fresh payTo, and a seller key. */
export async function setUpSeller(server: TestServer) {
  const { platform_key: platformKey } = await signUp(server);
  const payTo = privateKeyToAccount(generatePrivateKey()).address as Address;
  const acceptance = await server.request('PUT', '/v0/payments/acceptance', { key: platformKey, body: { enabled: true, payTo } });
  if (acceptance.status !== 200) throw new Error(`acceptance: ${acceptance.status} ${acceptance.text}`);
  const key = await server.request('POST', '/v0/payments/seller-keys', { key: platformKey, body: {} });
  if (key.status !== 201) throw new Error(`seller key: ${key.status} ${key.text}`);
  return { platformKey, sellerKey: key.body.apiKey as string, payTo };
}

export async function registerEndpoint(server: TestServer, platformKey: string, body: { url: string; priceUsdc: string; skipUrlCheck?: boolean }) {
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
