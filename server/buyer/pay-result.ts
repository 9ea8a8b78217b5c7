/** Why `payments_pay` did not pay. Every refusal before signing leaves the wallet untouched. */
export type PayCode =
  | 'mandate_not_found'
  | 'mandate_expired'
  | 'mandate_revoked'
  | 'mandate_host_not_allowed'
  | 'mandate_per_call_exceeded'
  | 'mandate_daily_cap_exceeded'
  | 'max_amount_exceeded'
  | 'balance_insufficient'
  | 'url_blocked'
  | 'url_invalid'
  | 'fetch_failed'
  | 'url_not_x402'
  | 'network_unsupported'
  | 'asset_unsupported'
  | 'settle_failed'
  | 'channel_withdrawal_pending'
  | 'wallet_unavailable'
  | 'sanctioned_address'
  | 'screening_unavailable';

export interface PayRefusal {
  ok: false;
  code: PayCode;
  message: string;
}

/** The HTTP status of a refused payment; the body keeps `ok: false` and `code` for agents. */
const REFUSAL_STATUS: Record<PayCode, number> = {
  mandate_not_found: 403, mandate_expired: 403, mandate_revoked: 403, mandate_host_not_allowed: 403,
  mandate_per_call_exceeded: 403, mandate_daily_cap_exceeded: 403, max_amount_exceeded: 403,
  balance_insufficient: 402, url_blocked: 400, url_invalid: 400, fetch_failed: 502, url_not_x402: 422,
  network_unsupported: 422, asset_unsupported: 422, settle_failed: 502, channel_withdrawal_pending: 409, wallet_unavailable: 503,
  sanctioned_address: 403, screening_unavailable: 403,
};

/** A refusal in the API error shape (`error`, `message`, `status`) as POST /v0/payments/pay and `payments_pay` answer it. */
export function refusalBody(refusal: PayRefusal) {
  const status = REFUSAL_STATUS[refusal.code];
  return { ...refusal, error: refusal.code, status };
}
