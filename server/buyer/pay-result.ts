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
  | 'wallet_unavailable';

export interface PayRefusal {
  ok: false;
  code: PayCode;
  message: string;
}
