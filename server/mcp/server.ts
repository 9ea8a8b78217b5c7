import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Principal } from '../platform/auth/authenticate.js';
import type { Logger } from '../platform/logger.js';
import { ZodError } from 'zod';
import { AppError, fromZodError } from '../platform/errors.js';
import { ToolRefusal, type ToolDefinition } from '../platform/mcp-tool.js';

const asText = (value: unknown): CallToolResult['content'] => [{ type: 'text', text: JSON.stringify(value) }];

/** Tool errors reach the model as a readable `{error, message, status}`, never a stack trace. */
function toolError(caught: unknown, log: Logger, tool: string): CallToolResult {
  const err = caught instanceof ZodError ? fromZodError(caught, 'arguments') : caught;
  const body = err instanceof AppError ? err.toBody()
    : { error: 'internal_error', message: 'Internal server error', status: 500 };
  if (!(err instanceof AppError)) log.error({ err, tool }, 'MCP tool failed');
  return { isError: true, content: asText(body) };
}

export function toolsFor<Deps>(principal: Principal, tools: ToolDefinition<Deps>[]): ToolDefinition<Deps>[] {
  return tools.filter((tool) => principal.scopes.has(tool.scope));
}

/**
 * The backend's MCP server for one identity key: only the tools its scopes allow are registered, so a
 * tool outside them is neither listed nor callable. Built per request (stateless Streamable HTTP).
 * `deps` are the services the tools use, handed to each run(); `log` gets the tools' unexpected errors.
 */
export function createMcpServer<Deps>(tools: ToolDefinition<Deps>[], deps: Deps, log: Logger, principal: Principal & { identityId: string }): McpServer {
  const server = new McpServer({ name: 'agentgate', version: '0.1.0' }, { capabilities: { tools: {} } });
  for (const tool of toolsFor(principal, tools)) {
    server.registerTool(tool.name, { title: tool.title, description: tool.description, inputSchema: tool.input }, async (input: unknown) => {
      try {
        const result = await tool.run(deps, principal, input as never);
        if (result instanceof ToolRefusal) return { isError: true, content: asText(result.body) };
        return { content: asText(result), structuredContent: result as Record<string, unknown> };
      } catch (err) {
        return toolError(err, log, tool.name);
      }
    });
  }
  return server;
}
