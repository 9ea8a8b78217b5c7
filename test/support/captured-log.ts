import { createLogger, type Logger } from '../../server/platform/logger.js';

export type LogLine = Record<string, any>;

/** A pino logger at `level` whose lines land, parsed, in `lines` (what a log shipper would read from stdout). */
export function capturedLog(level: 'info' | 'debug' = 'info'): { log: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const log = createLogger({ level, destination: { write: (text: string) => { for (const l of text.split('\n').filter(Boolean)) lines.push(JSON.parse(l)); } } });
  return { log, lines };
}
