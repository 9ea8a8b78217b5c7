// The x402 `exact` scheme's failure reasons on Solana, as the spec (scheme_exact_svm.md) and @x402/svm
// name them in a facilitator's answers. Ours are these names: one per check, in the order the scheme
// checks them.

export const EXACT_SVM_REASONS = {
  unsupportedScheme: 'invalid_exact_svm_unsupported_scheme',
  networkMismatch: 'invalid_exact_svm_network_mismatch',
  missingFeePayer: 'invalid_exact_svm_payload_missing_fee_payer',
  feePayerNotManaged: 'invalid_exact_svm_fee_payer_not_managed_by_facilitator',
  couldNotDecode: 'invalid_exact_svm_payload_transaction_could_not_be_decoded',
  signatureInvalid: 'invalid_exact_svm_payload_signature_invalid',
  excessiveSigners: 'invalid_exact_svm_payload_excessive_signers',
  feePayerMismatch: 'invalid_exact_svm_fee_payer_mismatch',
  instructionsLength: 'invalid_exact_svm_payload_transaction_instructions_length',
  computeLimitInstruction: 'invalid_exact_svm_payload_transaction_instructions_compute_limit_instruction',
  computeLimitTooHigh: 'invalid_exact_svm_payload_transaction_instructions_compute_limit_instruction_too_high',
  computePriceInstruction: 'invalid_exact_svm_payload_transaction_instructions_compute_price_instruction',
  computePriceTooHigh: 'invalid_exact_svm_payload_transaction_instructions_compute_price_instruction_too_high',
  noTransferInstruction: 'invalid_exact_svm_payload_no_transfer_instruction',
  feePayerTransferringFunds: 'invalid_exact_svm_payload_transaction_fee_payer_transferring_funds',
  feePayerInInstruction: 'invalid_exact_svm_payload_transaction_fee_payer_included_in_instruction_accounts',
  mintMismatch: 'invalid_exact_svm_payload_mint_mismatch',
  recipientMismatch: 'invalid_exact_svm_payload_recipient_mismatch',
  amountMismatch: 'invalid_exact_svm_payload_amount_mismatch',
  unknownOptionalInstruction: 'invalid_exact_svm_payload_unknown_optional_instruction',
  memoCount: 'invalid_exact_svm_payload_memo_count',
  memoMismatch: 'invalid_exact_svm_payload_memo_mismatch',
  simulationFailed: 'invalid_exact_svm_transaction_simulation_failed',
  transactionFailed: 'invalid_exact_svm_transaction_failed',
  duplicateSettlement: 'duplicate_settlement',
  settlementPending: 'settlement_pending',
} as const;

/** The instructions after the transfer a payment may carry: a memo (the seller's, or the client's nonce) and Lighthouse assertions. */
export const EXACT_SVM_MAX_INSTRUCTIONS = 7;
/** The highest compute-unit price a payment may set, in micro-lamports (the spec's cap, as @x402/svm's). */
export const EXACT_SVM_MAX_COMPUTE_UNIT_PRICE = 5_000_000n;
/** The most compute units a payment may ask for: a TransferChecked with a memo needs well under this. */
export const EXACT_SVM_MAX_COMPUTE_UNITS = 200_000;
