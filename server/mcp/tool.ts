import type { z } from 'zod';
import type { AppContext } from '../context.js';
import type { Principal } from '../platform/auth/authenticate.js';
import type { Scope } from '../platform/auth/scopes.js';

/**
 * One tool of the backend's MCP server. Each area exports a list of these (e.g. `mailTools`), each a thin
 * call into the same service as the area's HTTP route. The server lists only the tools whose scope the
 * caller's identity key holds, and refuses a call to any other.
 */
export interface ToolDefinition<S extends z.ZodObject = z.ZodObject> {
  name: string;
  title?: string;
  description: string;
  scope: Scope;
  input: S;
  /** Returns a JSON-serialisable result; throw AppError for a clean tool error. */
  run(app: AppContext, principal: Principal & { identityId: string }, input: z.output<S>): Promise<unknown>;
}

export const defineTool = <S extends z.ZodObject>(tool: ToolDefinition<S>): ToolDefinition => tool as unknown as ToolDefinition;
