import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

/** The official MCP client, connected to a backend's /mcp with a key, as an agent connects. */
export async function connectMcp(baseUrl: string, key: string): Promise<Client> {
  const client = new Client({ name: 'agent-under-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  return client;
}

/** Calls a tool that must succeed, and parses the JSON it answers. */
export async function callTool(client: Client, name: string, args: Record<string, unknown>): Promise<any> {
  const result = await client.callTool({ name, arguments: args });
  expect(result.isError ?? false).toBe(false);
  return JSON.parse((result.content as Array<{ text: string }>)[0]!.text);
}
