import type { CommandIO } from './account-commands.js';
import { getJson, MAX_PAGE, target } from './receipt-commands.js';

// `agentgate channels list` and `agentgate channels calls <channel id>`: a seller's batch-settlement channels
// and each channel's paid calls, read from GET /v0/payments/channels[/{id}/calls], a page at a time
// (`--cursor`) or all (`--all`), `--json` for a program. A call's receipt is checked with
// `agentgate receipts verify <call id>`, as a payment's is.

interface ListOptions { url?: string; key?: string; limit?: string; cursor?: string; all?: boolean; json?: boolean }

/** The pages of one list route, as the options ask; or the exit code, after saying why not. */
async function pages(io: CommandIO, command: string, path: string, field: string, options: ListOptions): Promise<{ items: any[]; cursor?: string } | number> {
  const limit = options.limit === undefined ? (options.all ? MAX_PAGE : 20) : Number(options.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) {
    io.out(`agentgate ${command}: --limit must be a whole number from 1 to ${MAX_PAGE} (a page); for every one, use --all, or follow --cursor from page to page`);
    return 2;
  }
  if (options.all && options.cursor) {
    io.out(`agentgate ${command}: give --all or --cursor, not both`);
    return 2;
  }
  const t = target(io, options);
  if (!t) return 2;
  const items: any[] = [];
  let cursor = options.cursor;
  for (;;) {
    const query = new URLSearchParams({ limit: String(limit), ...(cursor ? { pageToken: cursor } : {}) });
    const res = await getJson(`${t.url}${path}?${query}`, t.key);
    if (res.status !== 200) {
      const badCursor = res.status === 400 && cursor && /pageToken/.test(JSON.stringify(res.body ?? {}));
      io.out(badCursor ? `agentgate ${command}: the cursor "${cursor}" is not one this backend gave out` : `agentgate ${command}: ${res.status} ${res.body?.message ?? ''}`.trim());
      return 1;
    }
    items.push(...res.body[field]);
    cursor = res.body.nextPageToken;
    if (!options.all || !cursor) break;
  }
  return { items, ...(cursor && !options.all ? { cursor } : {}) };
}

const usdc = (atomic: string) => (Number(atomic) / 1e6).toFixed(6).replace(/\.?0+$/, '');

/** `agentgate channels list`: one line per channel, newest first. */
export async function channelsListCommand(io: CommandIO, options: ListOptions): Promise<number> {
  const got = await pages(io, 'channels list', '/v0/payments/channels', 'channels', options);
  if (typeof got === 'number') return got;
  if (options.json) {
    io.out(JSON.stringify({ channels: got.items, ...(got.cursor ? { nextCursor: got.cursor } : {}) }, null, 2));
    return 0;
  }
  for (const c of got.items) {
    io.out(`${c.id}  ${c.state.padEnd(11)}  from ${c.payerAddress}  deposited ${usdc(c.depositedUsdcRaw)}  accepted ${usdc(c.acceptedUsdcRaw)}  claimed ${usdc(c.claimedUsdcRaw)}  refunded ${usdc(c.refundedUsdcRaw)} USDC  ${c.callCount} calls`);
  }
  if (got.items.length === 0) io.out(options.cursor ? 'no more channels' : 'no channels yet');
  if (got.cursor) io.out(`more: agentgate channels list --cursor ${got.cursor}${options.limit ? ` --limit ${options.limit}` : ''}  (or --all)`);
  return 0;
}

/** `agentgate channels calls <channel id>`: one line per paid call, newest first, with its claim transaction once claimed. */
export async function channelCallsCommand(io: CommandIO, channelId: string | undefined, options: ListOptions): Promise<number> {
  if (!channelId || !/^0x[0-9a-fA-F]{64}$/.test(channelId)) {
    io.out('agentgate channels calls: name the channel (0x and 64 hex digits, from agentgate channels list)');
    return 2;
  }
  const got = await pages(io, 'channels calls', `/v0/payments/channels/${channelId}/calls`, 'calls', options);
  if (typeof got === 'number') return got;
  if (options.json) {
    io.out(JSON.stringify({ calls: got.items, ...(got.cursor ? { nextCursor: got.cursor } : {}) }, null, 2));
    return 0;
  }
  for (const c of got.items) {
    io.out(`${c.id}  ${c.status.padEnd(8)}  ${c.amountUsdc.padStart(10)} USDC  cumulative ${usdc(c.cumulativeAmountUsdcRaw)}  ${c.resourceUrl}  ${c.acceptedAt}  ${c.txHash ? `claimed in ${c.txHash}` : '-'}`);
  }
  if (got.items.length === 0) io.out(options.cursor ? 'no more calls' : 'no calls yet');
  if (got.cursor) io.out(`more: agentgate channels calls ${channelId} --cursor ${got.cursor}${options.limit ? ` --limit ${options.limit}` : ''}  (or --all)`);
  return 0;
}
