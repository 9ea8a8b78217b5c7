import { readFile, stat } from 'node:fs/promises';
import type { Logger } from '../platform/logger.js';
import { addressKey, type ScreeningSource, type SourceVerdict } from './sources.js';

/**
 * The operator's list of addresses, from a file (SCREENING_LIST_FILE), such as the OFAC SDN list's
 * digital-currency addresses. One address per line, anything after it on the line (after whitespace or a
 * comma) kept as the entry's note; blank lines and lines starting with `#` are skipped. A JSON array of
 * addresses (or of `{ address, note }`) is read as well. EVM addresses match in any case; Solana's are
 * case-sensitive, as base58 is.
 *
 * Reloaded without a restart: the file's modification time is looked at every `reloadEveryMs`, and a
 * changed file is read again and replaces the list at once (a deploy that writes a new file, a cron that
 * fetches the SDN list). A file that cannot be read or parsed keeps the list loaded before, and says so in
 * the log; at start it is an error (a screening the operator asked for and that is not running must not
 * look like one that is).
 */
export class AddressList implements ScreeningSource {
  readonly name = 'list' as const;
  private entries = new Map<string, string>();
  private loadedMtimeMs = -1;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly file: string, private readonly log: Logger, private readonly reloadEveryMs = 5_000) {}

  /** Reads the file (throws if it cannot), then watches it. */
  async start(): Promise<void> {
    await this.reload();
    this.timer = setInterval(() => {
      void this.reloadIfChanged().catch((err) => this.log.error({ file: this.file, err: (err as Error).message }, 'the screening list could not be reloaded; the list loaded before stays in force'));
    }, this.reloadEveryMs).unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  covers(): boolean {
    return true;
  }

  get size(): number {
    return this.entries.size;
  }

  /** The loaded file's modification time (ms since the epoch). */
  get modifiedAtMs(): number {
    return this.loadedMtimeMs;
  }

  async check(address: string): Promise<SourceVerdict> {
    const note = this.entries.get(addressKey(address));
    return note === undefined ? { listed: false } : { listed: true, ...(note ? { detail: note } : {}) };
  }

  /** Reads the file again if it changed since it was last read. */
  async reloadIfChanged(): Promise<void> {
    const { mtimeMs } = await stat(this.file);
    if (mtimeMs !== this.loadedMtimeMs) await this.reload();
  }

  private async reload(): Promise<void> {
    const { mtimeMs } = await stat(this.file);
    const entries = parseAddressList(await readFile(this.file, 'utf8'));
    this.entries = entries;
    this.loadedMtimeMs = mtimeMs;
    this.log.info({ file: this.file, addresses: entries.size }, 'screening list loaded');
  }
}

/** The addresses of a list file's text (see AddressList), each with its note ('' when none). */
export function parseAddressList(text: string): Map<string, string> {
  const entries = new Map<string, string>();
  const trimmed = text.trim();
  if (trimmed.startsWith('[')) {
    const items = JSON.parse(trimmed) as unknown;
    if (!Array.isArray(items)) throw new Error('a JSON screening list must be an array');
    for (const item of items) {
      const address = typeof item === 'string' ? item : (item as { address?: unknown })?.address;
      if (typeof address !== 'string' || !address.trim()) throw new Error('each entry of a JSON screening list must be an address or { address, note }');
      const note = typeof item === 'object' && typeof (item as { note?: unknown }).note === 'string' ? (item as { note: string }).note : '';
      entries.set(addressKey(address.trim()), note);
    }
    return entries;
  }
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const [address, ...rest] = line.split(/[\s,]+/);
    entries.set(addressKey(address!), rest.join(' ').trim());
  }
  return entries;
}
