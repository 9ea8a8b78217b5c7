import type { ToolDefinition } from './tool.js';
import { mailTools } from '../mail/tools.js';
import { buyerTools } from '../buyer/tools.js';
import { vaultTools } from '../vault/tools.js';
import { calendarTools } from '../calendar/tools.js';
import { didTools } from '../did/tools.js';
import { chatTools } from '../chat/tools.js';
import { walletTools } from '../wallet/tools.js';

/** Every area's tools. An area adds its list here (one import, one spread). */
export const TOOLS: ToolDefinition[] = [
  ...mailTools,
  ...buyerTools,
  ...walletTools,
  ...vaultTools,
  ...calendarTools,
  ...didTools,
  ...chatTools,
];
