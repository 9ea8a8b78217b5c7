/**
 * An agent that pays an x402 URL with no wallet of its own: it signs up, gets test USDC from the dev
 * faucet, sets itself a spending mandate and calls the backend's `payments_pay` tool, which signs from
 * the identity's server-held smart account.
 *
 *   npm run dev                                    # the backend, dev chain and the dev seller
 *   npm run example:express-seller                 # a paid weather API on :4021
 *   npm run example:agent-buyer -- <url>           # default: the Express example's /weather
 *
 * The backend URL comes from AGENTGATE_URL (AGENTGATE_BACKEND_URL, deprecated), else .agentgate/dev-seller.json, else :3000.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { isMain, loadDevSeller } from '../dev-seller.js';

interface Json { [key: string]: any }

async function call(backend: string, method: string, path: string, key: string | undefined, body?: unknown): Promise<Json> {
  const response = await fetch(`${backend}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const parsed = (await response.json().catch(() => ({}))) as Json;
  if (!response.ok) throw new Error(`${method} ${path} answered ${response.status}: ${parsed.message ?? JSON.stringify(parsed)}`);
  return parsed;
}

/** Calls the MCP tool `payments_pay` on the backend's MCP server (POST /mcp), authenticated by the identity key. */
async function payThroughMcp(backend: string, key: string, args: Json): Promise<Json> {
  const client = new Client({ name: 'agentgate-agent-buyer', version: '0.1.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${backend}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } });
  await client.connect(transport);
  try {
    const result = await client.callTool({ name: 'payments_pay', arguments: args });
    if (result.structuredContent) return result.structuredContent as Json;
    const text = (result.content as Array<{ type: string; text?: string }>).find((c) => c.type === 'text')?.text ?? '{}';
    return JSON.parse(text) as Json;
  } finally {
    await client.close();
  }
}

export async function runAgentBuyer(backend: string, url: string, log: (line: string) => void = console.log): Promise<Json> {
  const signup = await call(backend, 'POST', '/v0/agent-signup', undefined, {});
  const key: string = signup.identity.rawKey;
  log(`signed up identity ${signup.identity.identityId} (${signup.identity.emailAddress})`);

  const funded = await call(backend, 'POST', '/v0/dev/faucet', key, { amountUsdc: '1' });
  log(`wallet ${funded.wallet.address} on ${funded.wallet.network}: ${funded.wallet.balanceUsdc} USDC from the dev faucet`);

  const validUntil = new Date(Date.now() + 86_400_000).toISOString();
  const mandate = await call(backend, 'POST', '/v0/payments/mandates', key, { maxPerCallUsdc: '0.10', dailyCapUsdc: '0.50', validUntil });
  log(`mandate ${mandate.mandateId}: up to ${mandate.maxPerCallUsdc} USDC per call, ${mandate.dailyCapUsdc} USDC per day`);

  let result: Json;
  try {
    result = await payThroughMcp(backend, key, { url, maxAmountUsdc: '0.10' });
    log(`payments_pay (MCP) ${url}`);
  } catch (error) {
    // A backend without the MCP server still has the same operation over HTTP.
    log(`MCP unavailable (${(error as Error).message.split('\n')[0]}); calling POST /v0/payments/pay`);
    const response = await fetch(`${backend}/v0/payments/pay`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, body: JSON.stringify({ url, maxAmountUsdc: '0.10' }),
    });
    result = (await response.json()) as Json;
  }
  return result;
}

// Run as a program (not when a test imports it): an async main, since the module itself is also a library.
if (isMain(import.meta.url)) void (async () => {
  const dev = loadDevSeller();
  const backend = (dev.backendUrl ?? 'http://localhost:3000').replace(/\/+$/, '');
  const url = process.argv.slice(2).find((a) => !a.startsWith('--')) ?? process.env.PAY_URL ?? dev.endpoints?.express ?? 'http://localhost:4021/weather';
  try {
    const result = await runAgentBuyer(backend, url);
    console.log(JSON.stringify(result, null, 2));
    if (result.ok && result.paid) console.log(`paid ${result.cost.amountUsdc} USDC to ${result.recipient}, transaction ${result.txHash}`);
    process.exitCode = result.ok ? 0 : 1;
  } catch (error) {
    console.error(`agent-buyer: ${(error as Error).message} (is \`npm run dev\` running at ${backend}?)`);
    process.exitCode = 1;
  }
})();
