// The x402 `upto` scheme's failure reasons on EVM: ours, and the names the spec and @x402/evm's Permit2
// checks give them in a facilitator's answers (and the one answered with HTTP 412).

/** Our reason codes of a refused upto payment, one per check. */
export type UptoReason =
  | 'network_mismatch'
  | 'asset_mismatch'
  | 'invalid_spender'
  | 'recipient_mismatch'
  | 'facilitator_mismatch'
  | 'authorization_expired'
  | 'authorization_not_yet_valid'
  | 'amount_mismatch'
  | 'invalid_signature'
  | 'nonce_already_used'
  | 'permit2_allowance_required'
  | 'insufficient_funds'
  | 'settlement_exceeds_amount'
  | 'invalid_eip2612_permit'
  | 'settle_reverted';

/** Our reason codes as the x402 upto EVM scheme and @x402/evm's Permit2 checks name them. */
const UPTO_SPEC_REASONS: Record<string, string> = {
  unsupported_scheme: 'invalid_upto_evm_scheme',
  network_mismatch: 'invalid_upto_evm_network_mismatch',
  asset_mismatch: 'permit2_token_mismatch',
  invalid_spender: 'invalid_permit2_spender',
  recipient_mismatch: 'invalid_permit2_recipient_mismatch',
  facilitator_mismatch: 'upto_facilitator_mismatch',
  authorization_expired: 'permit2_deadline_expired',
  authorization_not_yet_valid: 'permit2_not_yet_valid',
  amount_mismatch: 'permit2_amount_mismatch',
  invalid_signature: 'invalid_permit2_signature',
  nonce_already_used: 'permit2_invalid_nonce',
  permit2_allowance_required: 'permit2_allowance_required',
  insufficient_funds: 'permit2_insufficient_balance',
  settlement_exceeds_amount: 'invalid_upto_evm_payload_settlement_exceeds_amount',
  invalid_eip2612_permit: 'invalid_eip2612_extension_format',
  settle_reverted: 'invalid_upto_evm_transaction_failed',
  settle_failed: 'invalid_upto_evm_transaction_failed',
  settle_unconfirmed: 'settlement_pending',
  unsupported_x402_version: 'invalid_x402_version',
};
export const uptoSpecReason = (reason: string) => UPTO_SPEC_REASONS[reason] ?? reason;
/** The spec's answer to a payer who never approved Permit2: 412 Precondition Failed, approve once and retry. */
export const uptoStatusOf = (reason: string) => (reason === 'permit2_allowance_required' ? 412 : 200);
