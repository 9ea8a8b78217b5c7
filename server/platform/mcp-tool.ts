import type { z } from 'zod';
import type { Principal } from './auth/authenticate.js';
import type { Scope } from './auth/scopes.js';

/**
 * One tool of the backend's MCP server. Each area exports a list of these (e.g. `mailTools`), each a thin
 * call into the same service as the area's HTTP route. The server lists only the tools whose scope the
 * caller's identity key holds, and refuses a call to any other.
 * `Deps` are the services the tool uses (e.g. `{ mail: MailService }`): the MCP server hands them to run().
 */
export interface ToolDefinition<Deps = unknown, S extends z.ZodObject = z.ZodObject> {
  /** The listed name; must match TOOL_NAME (many LLM clients accept nothing else). */
  name: string;
  /**
   * Other names `tools/call` accepts for this tool, never listed: SPEC names the mail tools `mail.*`, a
   * spelling some clients refuse, so those names stay callable while the listed one is `mail_*`.
   */
  aliases?: string[];
  title?: string;
  description: string;
  scope: Scope;
  input: S;
  /**
   * Returns a JSON-serialisable result; throw AppError for a clean tool error, or return a ToolRefusal
   * when the answer is a refusal whose body the agent should read as it is (e.g. a refused payment).
   */
  run: (deps: Deps, principal: Principal & { identityId: string }, input: z.output<S>) => Promise<unknown>;
}

/** What a tool name may look like: the pattern LLM clients (OpenAI, Anthropic, Gemini) accept for function names. */
export const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/**
 * The `defineTool` of a tool set using `Deps`: `const defineTool = toolDefiner<VaultToolDeps>()`. Each
 * tool's input type comes from its own schema, and the set is a list of `ToolDefinition<Deps>`.
 */
export const toolDefiner = <Deps>() => <S extends z.ZodObject>(tool: ToolDefinition<Deps, S>): ToolDefinition<Deps> => tool as unknown as ToolDefinition<Deps>;

/**
 * A refusal that is the tool's answer rather than a failure of ours: the server returns it with
 * `isError: true` so the model sees that nothing happened, and the body (with `error` and `message`) as content.
 */
export class ToolRefusal {
  constructor(readonly body: { error: string; message: string; [extra: string]: unknown }) {}
}
