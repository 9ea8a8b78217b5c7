import type { GuardedResponse } from '../platform/ssrf.js';
import { parseJsonWithin } from 'agentgate-x402-wire';
import { MAX_REMOTE_JSON_DEPTH, type SettlementResponse } from './challenge.js';
import type { PayCode, PayRefusal } from './pay-result.js';

/** What payments_pay answers about a seller's response: shared by every scheme's payer. */

export const refuse = (code: PayCode, message: string): PayRefusal => ({ ok: false, code, message });

/** A request as payments_pay sends it. */
export interface OutgoingRequest { method: string; headers: Record<string, string>; body?: string }

/** payments_pay's guarded fetch: the response, or a refusal saying why there is none. */
export type PayFetch = (url: string, request: OutgoingRequest) => Promise<{ ok: true; response: GuardedResponse } | PayRefusal>;

export function contentOf(response: GuardedResponse) {
  const contentType = typeof response.headers['content-type'] === 'string' ? response.headers['content-type'] : null;
  if (contentType && /\bjson\b/i.test(contentType)) {
    // A body that is not JSON, or nests too deep to hand back safely, goes to the caller as text.
    const content = parseJsonWithin(response.bodyText, MAX_REMOTE_JSON_DEPTH);
    if (content !== undefined) return { status: response.status, contentType, content };
  }
  return { status: response.status, contentType, contentText: response.bodyText };
}

export function settlementFailure(response: GuardedResponse, settlement: SettlementResponse | undefined): string {
  if (settlement?.errorReason) return `the seller did not settle: ${settlement.errorReason}`;
  let reason = '';
  try {
    const body = JSON.parse(response.bodyText) as { error?: unknown; message?: unknown };
    reason = [body.error, body.message].filter((v) => typeof v === 'string').join(': ');
  } catch {
    reason = '';
  }
  return `the seller answered ${response.status} to the payment${reason ? ` (${reason})` : ''}`;
}
