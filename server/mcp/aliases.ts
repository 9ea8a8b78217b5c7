import type { ToolDefinition } from './tool.js';

type Message = { method?: unknown; params?: { name?: unknown } & Record<string, unknown> } & Record<string, unknown>;

/**
 * Rewrites a `tools/call` for an alias (e.g. SPEC's `mail.list_messages`) to the tool's listed name
 * (`mail_list_messages`) before the MCP server sees it. Done on the request rather than by registering
 * each alias as a tool of its own, so `tools/list` shows every tool once and only under its listed name.
 * Anything that is not such a call passes through untouched; so does a batch's non-call members.
 */
export function resolveAliases(body: unknown, tools: ToolDefinition[]): unknown {
  const canonical = new Map<string, string>();
  for (const tool of tools) for (const alias of tool.aliases ?? []) canonical.set(alias, tool.name);
  if (canonical.size === 0) return body;
  const resolve = (message: unknown): unknown => {
    if (!message || typeof message !== 'object' || Array.isArray(message)) return message;
    const { method, params } = message as Message;
    if (method !== 'tools/call' || !params || typeof params !== 'object' || typeof params.name !== 'string') return message;
    const name = canonical.get(params.name);
    return name ? { ...message, params: { ...params, name } } : message;
  };
  return Array.isArray(body) ? body.map(resolve) : resolve(body);
}
