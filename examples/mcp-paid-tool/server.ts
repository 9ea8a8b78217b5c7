/**
 * An MCP server over Streamable HTTP with one paid tool (`forecast`, $0.01 per call) and one free tool.
 * The seller registers the resource `mcp://tool/forecast` at 0.01 USDC once (POST /v0/payments/endpoints,
 * optionally with a webhookUrl), then runs:
 *
 *   AGENTGATE_URL=... AGENTGATE_SELLER_KEY=loid-... npx tsx examples/mcp-paid-tool/server.ts
 *
 * (`npm run dev` writes both to .agentgate/dev-seller.json, which this reads when the variables are unset.)
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { mcpPaywall, type McpPaywallOptions } from '../../adapters/mcp.js';
import { isMain, listenFailed, loadDevSeller, required } from '../dev-seller.js';
import { CITIES, forecastFor, WEATHER_PRICE } from '../weather.js';

export const PAID_TOOL = 'forecast';

/** One MCP server definition; `onPaidCall` lets a caller observe when the paid tool's body actually runs. */
export function createWeatherMcpServer(options: McpPaywallOptions, onPaidCall: (city: string) => void = () => {}): () => McpServer {
  // One paywall for the process: settings are fetched once and shared by every session.
  const paid = mcpPaywall(options);
  return () => {
    const server = new McpServer({ name: 'weather', version: '1.0.0' });
    paid.tool(server, PAID_TOOL, {
      price: WEATHER_PRICE,
      description: 'Current weather for a city (paid: $0.01 per call, x402)',
      inputSchema: { city: z.string().min(1).max(64) },
    }, async ({ city }) => {
      onPaidCall(city);
      return { content: [{ type: 'text', text: JSON.stringify(forecastFor(city)) }] };
    });
    server.registerTool('cities', { description: 'Cities with forecasts (free)' }, async () => ({ content: [{ type: 'text', text: CITIES.join(', ') }] }));
    return server;
  };
}

/** Stateless Streamable HTTP: a fresh server and transport per request, so any number of clients share nothing. */
export async function startWeatherMcp(options: McpPaywallOptions & { port?: number; host?: string; onPaidCall?: (city: string) => void }): Promise<{ url: string; close(): Promise<void> }> {
  const { port = 0, host = '127.0.0.1', onPaidCall, ...paywall } = options;
  const build = createWeatherMcpServer(paywall as McpPaywallOptions, onPaidCall);
  const app = express();
  app.use(express.json({ limit: '256kb' }));
  app.post('/mcp', async (req, res) => {
    const server = build();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => { void transport.close(); void server.close(); });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  });
  const refuse = (_req: express.Request, res: express.Response) => { res.status(405).json({ jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed' }, id: null }); };
  app.get('/mcp', refuse);
  app.delete('/mcp', refuse);
  // Express 5 hands a listen error (the port in use) to this callback.
  const http: Server = await new Promise((resolve, reject) => { const s = app.listen(port, host, (error?: Error) => (error ? reject(error) : resolve(s))); });
  return {
    url: `http://${host}:${(http.address() as AddressInfo).port}/mcp`,
    async close() {
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

// Run as a program (not when a test imports it): an async main, since the module itself is also a library.
if (isMain(import.meta.url)) void (async () => {
  const dev = loadDevSeller();
  const port = Number(process.env.PORT ?? 4040);
  const running = await startWeatherMcp({
    backendUrl: required(dev, 'backendUrl', 'AGENTGATE_URL'),
    apiKey: required(dev, 'sellerKey', 'AGENTGATE_SELLER_KEY'),
    port,
  }).catch((error: NodeJS.ErrnoException) => listenFailed(port, error));
  console.log(`weather MCP server on ${running.url}: tool "${PAID_TOOL}" costs ${WEATHER_PRICE} (resource mcp://tool/${PAID_TOOL}), "cities" is free`);
})();
