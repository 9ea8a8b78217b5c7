import { defineTool, type ToolDefinition } from '../mcp/tool.js';
import { payBody } from './schemas.js';
import { payFor } from './routes.js';

/** MCP tools of the buyer side. A refusal is a normal result (`ok: false, code`), not a tool error. */
export const buyerTools: ToolDefinition[] = [
  defineTool({
    name: 'payments_pay',
    title: 'Pay for an x402 URL',
    description:
      'Fetches a URL; if it answers 402 Payment Required (x402), pays it in USDC from this identity\'s wallet ' +
      'under its spending mandate and returns the paid response. Non-402 answers come back as they are (paid: false). ' +
      'Use maxAmountUsdc to refuse prices above a limit, dryRun to see the price without paying.',
    scope: 'payments:spend',
    input: payBody,
    run: (app, principal, input) => payFor(app, { orgId: principal.orgId, identityId: principal.identityId }, input),
  }),
];
