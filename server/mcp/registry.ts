import type { ToolDefinition } from './tool.js';
import { buyerTools } from '../buyer/tools.js';

/** Every area's tools. An area adds its list here (one import, one spread). */
export const TOOLS: ToolDefinition[] = [
  ...buyerTools,
];
