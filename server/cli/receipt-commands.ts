import { existsSync, readFileSync } from 'node:fs';
import { type DidDocument, type Receipt, verifyJwsReceipt, verifyReceipt } from 'agentgate-x402-wire';
import { backendUrl, callBackend, commandKey } from './backend.js';
import { resolveDidWeb } from './did-resolution.js';
import type { CommandIO } from './account-commands.js';

interface Target { url: string; key: string }

/** The backend and the key a read command uses (platform or seller key), or undefined after saying what is missing. */
export function target(io: CommandIO, options: { url?: string; key?: string }): Target | undefined {
  const url = backendUrl(io.env, options.url);
  const key = commandKey(io.env, url, options.key, (saved) => saved.platformKey);
  if ('missing' in key) {
    io.out(key.missing.replace('pass --key', 'pass --key <platform or seller key>'));
    return undefined;
  }
  return { url, key: key.key };
}

export async function getJson(url: string, key?: string): Promise<{ status: number; body: any }> {
  const res = await callBackend(url, { headers: key ? { authorization: `Bearer ${key}` } : {} });
  return { status: res.status, body: await res.json().catch(() => undefined) };
}

/**
 * A JSON file the user named, or the one line that says why not (missing, unreadable, not JSON) instead
 * of Node's ENOENT or JSON.parse message.
 */
function readJsonFile(path: string, what: string): { ok: true; value: any } | { ok: false; message: string } {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return { ok: false, message: code === 'ENOENT' ? `no such file: ${path} (${what})` : `cannot read ${path}: ${(err as Error).message}` };
  }
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false, message: `${path} is not JSON (${what})` };
  }
}

/** A subject that names a file rather than a payment id (ids are pay_… and hold no path characters). */
const looksLikeAPath = (subject: string) => /[\\/]|\.json$/i.test(subject);

const RECEIPT_FILE = 'a payment record saved from GET /v0/payments/{id}, or its signedReceipt';

/** The most payments one page may hold (GET /v0/payments `limit`). */
export const MAX_PAGE = 100;

/**
 * `agentgate receipts list`: the org's payments, newest first, one line each, a page at a time
 * (`--cursor` for the next one) or all of them (`--all`); `--json` for a program.
 */
export async function receiptsListCommand(io: CommandIO, options: { url?: string; key?: string; limit?: string; cursor?: string; all?: boolean; json?: boolean; network?: string }): Promise<number> {
  const limit = options.limit === undefined ? (options.all ? MAX_PAGE : 20) : Number(options.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) {
    io.out(`agentgate receipts list: --limit must be a whole number from 1 to ${MAX_PAGE} (a page); to list every payment, use --all, or follow --cursor from page to page`);
    return 2;
  }
  if (options.all && options.cursor) {
    io.out('agentgate receipts list: give --all or --cursor, not both');
    return 2;
  }
  const t = target(io, options);
  if (!t) return 2;
  const payments: any[] = [];
  let cursor = options.cursor;
  for (;;) {
    const query = new URLSearchParams({ limit: String(limit), ...(cursor ? { pageToken: cursor } : {}), ...(options.network ? { network: options.network } : {}) });
    const res = await getJson(`${t.url}/v0/payments?${query}`, t.key);
    if (res.status !== 200) {
      const badCursor = res.status === 400 && cursor && /pageToken/.test(JSON.stringify(res.body ?? {}));
      io.out(badCursor ? `agentgate receipts list: the cursor "${cursor}" is not one this backend gave out` : `listing payments failed: ${res.status} ${res.body?.message ?? ''}`.trim());
      return 1;
    }
    payments.push(...res.body.payments);
    cursor = res.body.nextPageToken;
    if (!options.all || !cursor) break;
  }
  if (options.json) {
    io.out(JSON.stringify({ payments, ...(cursor && !options.all ? { nextCursor: cursor } : {}) }, null, 2));
    return 0;
  }
  for (const p of payments) {
    io.out(`${p.id}  ${p.status.padEnd(8)}  ${p.amountUsdc.padStart(10)} USDC  ${p.network}  ${p.resourceUrl}  from ${p.payerAddress}  ${p.createdAt}  ${p.txHash ?? '-'}`);
  }
  if (payments.length === 0) io.out(options.cursor ? 'no more payments' : 'no payments yet');
  if (cursor && !options.all) io.out(`more: agentgate receipts list --cursor ${cursor}${options.limit ? ` --limit ${limit}` : ''}${options.network ? ` --network ${options.network}` : ''}  (or --all)`);
  return 0;
}

/**
 * `agentgate receipts verify <payment id | receipt.json>`: checks the Ed25519 signature against the DID
 * document of the DID the receipt names, resolved at that DID's own address as a buyer's verifier does
 * (or given with --did-document for a fully offline check), never against the key the receipt itself
 * carries, nor against whatever backend --url points at: a DID nobody can resolve is not "valid".
 */
export async function receiptsVerifyCommand(io: CommandIO, subject: string | undefined, options: { url?: string; key?: string; 'did-document'?: string }): Promise<number> {
  if (!subject) {
    io.out('usage: agentgate receipts verify <payment id | receipt.json> [--did-document did.json] [--url URL] [--key KEY]');
    return 2;
  }
  let receipt: Receipt;
  let offerReceipt: unknown;
  let url = backendUrl(io.env, options.url);
  if (existsSync(subject) || looksLikeAPath(subject)) {
    const file = readJsonFile(subject, RECEIPT_FILE);
    if (!file.ok) {
      io.out(file.message);
      return 2;
    }
    const parsed = file.value;
    receipt = parsed?.signedReceipt ?? parsed;
    offerReceipt = parsed?.offerReceipt;
    if (typeof receipt?.did !== 'string' || typeof receipt.signature !== 'string' || typeof receipt.body !== 'object' || receipt.body === null) {
      io.out(`${subject} holds no signed receipt (expected ${RECEIPT_FILE})`);
      return 2;
    }
  } else {
    const t = target(io, options);
    if (!t) return 2;
    url = t.url;
    const res = await getJson(`${t.url}/v0/payments/${encodeURIComponent(subject)}`, t.key);
    if (res.status !== 200) {
      io.out(`payment ${subject}: ${res.status} ${res.body?.message ?? ''}`.trim());
      return 1;
    }
    if (!res.body.signedReceipt) {
      io.out(`payment ${subject} has no receipt (status ${res.body.status})`);
      return 1;
    }
    receipt = res.body.signedReceipt;
    offerReceipt = res.body.offerReceipt;
  }
  let didDocument: DidDocument;
  if (options['did-document']) {
    const file = readJsonFile(options['did-document'], 'a DID document, e.g. saved from /.well-known/did.json');
    if (!file.ok) {
      io.out(file.message);
      return 2;
    }
    didDocument = file.value;
  } else {
    const resolved = await resolveDidWeb(String(receipt.did));
    if (!resolved.ok) {
      io.out(`INVALID receipt: its DID ${receipt.did} cannot be resolved${resolved.url ? ` at ${resolved.url}` : ''} (${resolved.reason}), so a buyer's verifier cannot check it either`);
      // Say why when the backend itself still serves that DID: it runs on another address than the DID names.
      const served = await getJson(`${url}/.well-known/did.json`).catch(() => undefined);
      if (served?.status === 200 && served.body?.id === receipt.did) {
        io.out(`${url} serves this DID's document, but the DID names another address: run the backend where the DID points (agentgate dev keeps the port of its first start), or check offline with --did-document`);
      }
      return 1;
    }
    didDocument = resolved.document;
  }
  const result = await verifyReceipt(receipt, didDocument);
  if (!result.ok) {
    io.out(`INVALID receipt: ${result.reason}`);
    return 1;
  }
  const body = receipt.body as Record<string, string>;
  // A channel call's receipt is signed when the call is paid: its value is claimed later, in a transaction
  // the call's record names (not the receipt, which never changes).
  const where = body.scheme === 'batch-settlement' ? `channel ${body.channelId}, cumulative ${body.cumulativeAmountUsdcRaw}` : `tx ${body.txHash}`;
  io.out(`valid receipt for payment ${body.paymentId}: ${body.amountUsdcRaw} atomic USDC from ${body.payerAddress} to ${body.recipientAddress}, ${where}, signed by ${receipt.did}`);
  // The offer-receipt extension's JWS form of the same settlement, when the record carries one.
  if (offerReceipt) {
    const jws = await verifyJwsReceipt(offerReceipt, didDocument);
    if (!jws.ok) {
      io.out(`INVALID offer-receipt (JWS): ${jws.reason}`);
      return 1;
    }
    io.out(`valid offer-receipt (JWS, EdDSA) signed by ${jws.kid}`);
  }
  return 0;
}
