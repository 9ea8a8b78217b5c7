// The x402 `exact` scheme's failure reasons on EVM: ours, one per check in the scheme's order, and the names
// the spec and the official SDK give them in a facilitator's answers.

/** Reason codes of a refused payment, one per check, in the order the exact-EVM scheme checks them. */
export type ExactReason =
  | 'unsupported_scheme'
  | 'network_mismatch'
  | 'asset_mismatch'
  | 'invalid_signature'
  | 'factory_not_allowed'
  | 'recipient_mismatch'
  | 'amount_mismatch'
  | 'authorization_not_yet_valid'
  | 'authorization_expired'
  | 'nonce_already_used'
  | 'insufficient_funds';

/** Our reason codes as the x402 exact EVM scheme and @x402/evm name them in a facilitator's answers. */
const EXACT_SPEC_REASONS: Record<string, string> = {
  unsupported_scheme: 'invalid_exact_evm_scheme',
  network_mismatch: 'invalid_exact_evm_network_mismatch',
  asset_mismatch: 'invalid_payment_requirements',
  invalid_signature: 'invalid_exact_evm_signature',
  factory_not_allowed: 'eip6492_factory_not_allowed',
  recipient_mismatch: 'invalid_exact_evm_recipient_mismatch',
  amount_mismatch: 'invalid_exact_evm_payload_authorization_value_mismatch',
  authorization_not_yet_valid: 'invalid_exact_evm_payload_authorization_valid_after',
  authorization_expired: 'invalid_exact_evm_payload_authorization_valid_before',
  nonce_already_used: 'invalid_exact_evm_nonce_already_used',
  insufficient_funds: 'invalid_exact_evm_insufficient_balance',
  invalid_payload: 'invalid_payload',
  unsupported_x402_version: 'invalid_x402_version',
  settle_failed: 'invalid_exact_evm_transaction_failed',
  settle_reverted: 'invalid_exact_evm_transaction_failed',
  settle_unconfirmed: 'settlement_pending',
  payer_blacklisted: 'invalid_exact_evm_transaction_failed',
  token_paused: 'invalid_exact_evm_transaction_failed',
};
export const exactSpecReason = (reason: string) => EXACT_SPEC_REASONS[reason] ?? reason;
/** A Permit2 payment's reasons are @x402/evm's names already; a second claim of its nonce is Permit2's nonce reason. */
export const exactPermit2SpecReason = (reason: string) => (reason === 'nonce_already_used' ? 'permit2_invalid_nonce' : exactSpecReason(reason));
