/**
 * The `invalidReason` / `errorReason` codes of the Solana facilitator. Spellings are the official
 * `@x402/svm` 2.27 facilitator's (`src/exact/facilitator/errors.ts`) wherever one exists; [LEGACY]
 * marks the v1 `x402` package's, [OURS] a check the official facilitator does not make.
 */
export const svmReasons = {
  invalidPayload: 'invalid_payload',
  invalidVersion: 'invalid_x402_version',
  invalidRequirements: 'invalid_payment_requirements',
  unsupportedScheme: 'invalid_exact_svm_unsupported_scheme',
  networkMismatch: 'invalid_exact_svm_network_mismatch',
  missingFeePayer: 'invalid_exact_svm_payload_missing_fee_payer',
  feePayerNotManaged: 'invalid_exact_svm_fee_payer_not_managed_by_facilitator',
  couldNotBeDecoded: 'invalid_exact_svm_payload_transaction_could_not_be_decoded',
  feePayerMismatch: 'invalid_exact_svm_fee_payer_mismatch',
  signatureInvalid: 'invalid_exact_svm_payload_signature_invalid',
  excessiveSigners: 'invalid_exact_svm_payload_excessive_signers',
  instructionsLength: 'invalid_exact_svm_payload_transaction_instructions_length',
  computeLimitInstruction: 'invalid_exact_svm_payload_transaction_instructions_compute_limit_instruction',
  computeLimitTooHigh: 'invalid_exact_svm_payload_transaction_instructions_compute_limit_instruction_too_high',
  computePriceInstruction: 'invalid_exact_svm_payload_transaction_instructions_compute_price_instruction',
  computePriceTooHigh: 'invalid_exact_svm_payload_transaction_instructions_compute_price_instruction_too_high',
  noTransferInstruction: 'invalid_exact_svm_payload_no_transfer_instruction',
  feePayerTransferringFunds: 'invalid_exact_svm_payload_transaction_fee_payer_transferring_funds',
  /** [LEGACY] the fee payer appears in an instruction's accounts (directly or through a lookup table). */
  feePayerInInstructionAccounts: 'invalid_exact_svm_payload_transaction_fee_payer_included_in_instruction_accounts',
  /** [OURS] a lookup table the transaction uses could not be resolved (fail closed). */
  lookupTableUnresolved: 'invalid_exact_svm_payload_address_lookup_table_unresolved',
  mintMismatch: 'invalid_exact_svm_payload_mint_mismatch',
  /** [OURS] TransferChecked decimals differ from the asset's. */
  decimalsMismatch: 'invalid_exact_svm_payload_decimals_mismatch',
  recipientMismatch: 'invalid_exact_svm_payload_recipient_mismatch',
  amountMismatch: 'invalid_exact_svm_payload_amount_mismatch',
  unknownInstruction: [
    'invalid_exact_svm_payload_unknown_fourth_instruction',
    'invalid_exact_svm_payload_unknown_fifth_instruction',
    'invalid_exact_svm_payload_unknown_sixth_instruction',
    'invalid_exact_svm_payload_unknown_seventh_instruction',
  ],
  memoCount: 'invalid_exact_svm_payload_memo_count',
  memoMismatch: 'invalid_exact_svm_payload_memo_mismatch',
  /** [OURS] the recent blockhash is no longer valid: the transaction can never land. */
  blockhashExpired: 'invalid_exact_svm_payload_blockhash_expired',
  simulationFailed: 'invalid_exact_svm_transaction_simulation_failed',
  transactionFailed: 'invalid_exact_svm_transaction_failed',
  settlementPending: 'settlement_pending',
  duplicateSettlement: 'duplicate_settlement',
  unexpectedVerifyError: 'unexpected_verify_error',
  unexpectedSettleError: 'unexpected_settle_error',
} as const
