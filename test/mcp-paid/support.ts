import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import express from 'express';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A paid MCP server on a loopback port and a buyer's client connected to it; `close` ends both. */
export interface ServedMcp { client: Client; close(): Promise<void> }

/**
 * Serves `build()` as a stateless Streamable HTTP MCP server (a new server per request, as the SDK's
 * stateless mode wants) at POST /mcp, and connects a client to it.
 */
export async function serveMcp(build: () => McpServer): Promise<ServedMcp> {
  const app = express();
  app.use(express.json());
  app.post('/mcp', async (req, res) => {
    const mcp = build();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => { void transport.close(); void mcp.close(); });
    await mcp.connect(transport);
    await transport.handleRequest(req, res, req.body);
  });
  const http: Server = await new Promise((resolve) => { const s = app.listen(0, '127.0.0.1', () => resolve(s)); });
  const client = new Client({ name: 'buyer', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`)));
  return {
    client,
    close: async () => {
      await client.close();
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
