import Router from '@koa/router';
import type { Context } from 'koa';
import { authenticate, identityIdOf, principalOf, requireTier, type AuthDeps } from '../platform/auth/authenticate.js';
import type { Logger } from '../platform/logger.js';
import { aliasResolver } from './aliases.js';
import type { ToolDefinition } from '../platform/mcp-tool.js';
import { lazily } from '../platform/lazily.js';

// The MCP SDK (with its JSON schema validator) is loaded with the first MCP request: 0.06-0.13 s of a
// start on an idle machine.
const loadSdk = lazily(() => Promise.all([import('./server.js'), import('@modelcontextprotocol/sdk/server/streamableHttp.js')]));

export type McpRouteDeps = AuthDeps & { log: Logger };

/**
 * POST /mcp: the MCP server over Streamable HTTP, stateless (a fresh server and transport per request),
 * authenticated with the identity key as a bearer token. GET and DELETE exist for session streams,
 * which a stateless server does not have: they answer 405 as the transport spec asks.
 * `tools`: what it serves (the areas' tools, from the registry server/tools.ts, and the app extension's,
 * such as the dev faucet in `agentgate dev`). Every tool's run() gets `deps`, so they hold what the tools use.
 */
export function mcpRoutes<Deps extends McpRouteDeps>(deps: Deps, tools: ToolDefinition<Deps>[]): Router {
  const resolveAliases = aliasResolver(tools);
  const router = new Router({ prefix: '/mcp' });
  router.use(authenticate(deps.keys, deps.identities), requireTier('identity'));

  router.post('/', async (ctx: Context) => {
    const principal = { ...principalOf(ctx), identityId: identityIdOf(ctx) };
    const [{ createMcpServer }, { StreamableHTTPServerTransport }] = await loadSdk();
    const server = createMcpServer(tools, deps, deps.log, principal);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    ctx.res.on('close', () => { transport.close().catch(() => {}); server.close().catch(() => {}); });
    await server.connect(transport);
    ctx.respond = false;
    await transport.handleRequest(ctx.req, ctx.res, resolveAliases(ctx.request.body));
  });

  const notAllowed = (ctx: Context) => {
    ctx.status = 405;
    ctx.set('Allow', 'POST');
    ctx.body = { jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed: this MCP server is stateless, use POST' }, id: null };
  };
  router.get('/', notAllowed);
  router.delete('/', notAllowed);
  return router;
}
