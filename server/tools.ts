import type { ToolDefinition } from './platform/mcp-tool.js';
import { mailTools, type MailToolDeps } from './mail/tools.js';
import { domainTools } from './mail/domains/tools.js';
import { buyerTools } from './buyer/tools.js';
import type { BuyerDeps } from './buyer/calls.js';
import { vaultTools, type VaultToolDeps } from './vault/tools.js';
import { calendarTools, type CalendarToolDeps } from './calendar/tools.js';
import { didTools, type DidToolDeps } from './did/tools.js';
import { chatTools, type ChatToolDeps } from './chat/tools.js';
import { walletTools, type WalletToolDeps } from './wallet/tools.js';
import { paymentTools, type PaymentToolDeps } from './payments/tools.js';

/** The services the areas' tools use, together: what the MCP server hands to a tool's run(). */
export type AreaToolDeps = MailToolDeps & BuyerDeps & WalletToolDeps & VaultToolDeps & CalendarToolDeps & DidToolDeps & ChatToolDeps & PaymentToolDeps;

/** Every area's tools. An area adds its list here (one import, one spread) and its deps to AreaToolDeps. */
export const TOOLS: ToolDefinition<AreaToolDeps>[] = [
  ...mailTools,
  ...domainTools,
  ...buyerTools,
  ...walletTools,
  ...vaultTools,
  ...calendarTools,
  ...didTools,
  ...chatTools,
  ...paymentTools,
];
