import type { ToolDefinition } from '../platform/mcp-tool.js';

type Message = { method?: unknown; params?: { name?: unknown } & Record<string, unknown> } & Record<string, unknown>;

/**
 * A rewriter of `tools/call` requests for an alias (e.g. SPEC's `mail.list_messages`) to the tool's listed
 * name (`mail_list_messages`), applied before the MCP server sees the body. Done on the request rather than
 * by registering each alias as a tool of its own, so `tools/list` shows every tool once and only under its
 * listed name. Anything that is not such a call passes through untouched; so do a batch's other members.
 * The alias table is built once, when the routes are made.
 */
export function aliasResolver(tools: ReadonlyArray<Pick<ToolDefinition, 'name' | 'aliases'>>): (body: unknown) => unknown {
  const canonical = new Map<string, string>();
  for (const tool of tools) for (const alias of tool.aliases ?? []) canonical.set(alias, tool.name);
  const resolve = (message: unknown): unknown => {
    if (!message || typeof message !== 'object' || Array.isArray(message)) return message;
    const { method, params } = message as Message;
    if (method !== 'tools/call' || !params || typeof params !== 'object' || typeof params.name !== 'string') return message;
    const name = canonical.get(params.name);
    return name ? { ...message, params: { ...params, name } } : message;
  };
  return (body) => (canonical.size === 0 ? body : Array.isArray(body) ? body.map(resolve) : resolve(body));
}
