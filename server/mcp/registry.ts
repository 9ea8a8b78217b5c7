import type { ToolDefinition } from './tool.js';

/** Every area's tools. An area adds its list here (one import, one spread). */
export const TOOLS: ToolDefinition[] = [
];
