// The x402 `auth-capture` scheme's failure reasons on EVM: `invalid_auth_capture_evm_<what>`, as the spec
// names them.

/** What an auth-capture check refused. */
export type AuthCaptureRefusal =
  | 'amount_mismatch' | 'authorization_expired' | 'authorization_not_yet_valid' | 'capture_deadline_expired' | 'deadline_ordering'
  | 'extra' | 'insufficient_balance' | 'lifecycle_not_relayed' | 'missing_receiver_authorizer' | 'network_mismatch' | 'nonce_mismatch'
  | 'operator_not_admitted' | 'payload_format' | 'payload_method_mismatch' | 'payment_already_collected' | 'policy' | 'scheme'
  | 'signature' | 'token_collector_mismatch' | 'token_mismatch' | 'transaction_reverted' | 'unsupported_operator_type' | 'unsupported_payment_flow'
  // What the escrow contract's simulation reverted with.
  | 'simulation_failed' | 'token_collection_failed' | 'collector' | 'operator_mismatch' | 'amount_overflow' | 'fee_bps' | 'fee_bps_range'
  | 'fee_bps_out_of_range' | 'zero_fee_receiver' | 'fee_receiver' | 'insufficient_authorization' | 'zero_authorization'
  | 'refund_deadline_expired' | 'refund_exceeds_capture';

/** The spec's reason code of a refusal. */
export const authCaptureReason = (refusal: AuthCaptureRefusal): string => `invalid_auth_capture_evm_${refusal}`;
