/**
 * The `invalidReason` / `errorReason` codes this facilitator answers with. Clients treat them as
 * opaque strings, so we reuse the reference implementation's spellings wherever one exists:
 * - [TS]  `@x402/evm` 2.27 exact facilitator (`src/exact/facilitator/errors.ts`, identical to Go);
 * - [SPEC] the x402 specification's error list (§9, v1 and v2);
 * - [LEGACY] the v1 `x402@1.2.0` ErrorReasons enum.
 * Codes marked [OURS] have no reference spelling.
 */
export const reasons = {
  /** [SPEC] Body fails the JSON Schema (missing field, wrong type, bad hex...). HTTP 400. */
  invalidPayload: 'invalid_payload',
  /** [SPEC] x402Version is neither 1 nor 2, or disagrees with paymentPayload.x402Version. HTTP 400. */
  invalidVersion: 'invalid_x402_version',
  /** [TS] payload.permit2Authorization and other non-EIP-3009 payloads. */
  unsupportedPayloadType: 'unsupported_payload_type',
  /** [TS] scheme of payload or requirements is not `exact`. */
  invalidScheme: 'invalid_exact_evm_scheme',
  /** [TS] payload network differs from the requirements', or is not the chain this facilitator serves. */
  networkMismatch: 'invalid_exact_evm_network_mismatch',
  /** [SPEC] asset not configured on this network, or v2 `accepted` differs from the requirements. */
  invalidRequirements: 'invalid_payment_requirements',
  /** [TS] extra.name differs from the token's EIP-712 name. */
  tokenNameMismatch: 'invalid_exact_evm_token_name_mismatch',
  /** [TS] extra.version differs from the token's EIP-712 version. */
  tokenVersionMismatch: 'invalid_exact_evm_token_version_mismatch',
  /** [TS] signature does not recover to `from` (EOA), or ERC-1271 did not return the magic value. */
  invalidSignature: 'invalid_exact_evm_signature',
  /** [TS] `from` has no code and the signature is not a 65-byte ECDSA signature. */
  undeployedSmartWallet: 'invalid_exact_evm_payload_undeployed_smart_wallet',
  /** [TS, newer] ERC-6492 counterfactual wallet: we allow no factories, so we never deploy one. */
  eip6492FactoryNotAllowed: 'eip6492_factory_not_allowed',
  /** [TS] authorization.to differs from payTo. */
  recipientMismatch: 'invalid_exact_evm_recipient_mismatch',
  /** [TS] validBefore is less than 6 s away (or past). */
  validBefore: 'invalid_exact_evm_payload_authorization_valid_before',
  /** [TS] validAfter is in the future. */
  validAfter: 'invalid_exact_evm_payload_authorization_valid_after',
  /** [TS v1 scheme] value differs from maxAmountRequired. */
  valueMismatchV1: 'invalid_exact_evm_authorization_value',
  /** [TS v2 scheme, = SPEC v2] value differs from amount. */
  valueMismatchV2: 'invalid_exact_evm_payload_authorization_value_mismatch',
  /** [TS, newer] the asset address has no code. */
  assetNotDeployed: 'asset_not_deployed_contract',
  /** [TS] authorizationState() reverts: the token has no EIP-3009. */
  eip3009NotSupported: 'invalid_exact_evm_eip3009_not_supported',
  /** [TS] authorizationState(from, nonce) is true. */
  nonceAlreadyUsed: 'invalid_exact_evm_nonce_already_used',
  /** [TS] balanceOf(from) < value; the message carries "ERC20: transfer amount exceeds balance". */
  insufficientBalance: 'invalid_exact_evm_insufficient_balance',
  /** [TS] eth_call of transferWithAuthorization reverted for another reason (message = revert text). */
  simulationFailed: 'invalid_exact_evm_transaction_simulation_failed',
  /** [TS] the settlement transaction was mined but reverted, or could not be sent. */
  transactionFailed: 'invalid_exact_evm_transaction_failed',
  /** [TS] receipt succeeded but carries no Transfer(from → to, value) log from the asset. */
  transferEventMismatch: 'invalid_exact_evm_transfer_event_mismatch',
  /** [TS, newer] broadcast, receipt not seen within the bound; `transaction` carries the hash. */
  settlementPending: 'settlement_pending',
  /** [LEGACY] another settle of the same authorization is in progress. */
  duplicateSettlement: 'duplicate_settlement',
  /** [TS] Permit2: permit2Authorization.spender is not the x402 exact (or upto) Permit2 proxy. */
  permit2InvalidSpender: 'invalid_permit2_spender',
  /** [TS] Permit2: witness.to differs from payTo. */
  permit2RecipientMismatch: 'invalid_permit2_recipient_mismatch',
  /** [TS] Permit2: deadline is less than 6 s away (or past). */
  permit2DeadlineExpired: 'permit2_deadline_expired',
  /** [TS] Permit2: witness.validAfter is in the future. */
  permit2NotYetValid: 'permit2_not_yet_valid',
  /** [TS] Permit2: permitted.amount differs from the required amount. */
  permit2AmountMismatch: 'permit2_amount_mismatch',
  /** [TS] Permit2: permitted.token differs from the asset. */
  permit2TokenMismatch: 'permit2_token_mismatch',
  /** [TS] Permit2: the signature does not authorize this permit for `from`. */
  permit2InvalidSignature: 'invalid_permit2_signature',
  /** [TS] Permit2: the payer's allowance to Permit2 is below the amount (resource servers answer 412). */
  permit2AllowanceRequired: 'permit2_allowance_required',
  /** [TS] Permit2: the payer's balance is below the amount. */
  permit2InsufficientBalance: 'permit2_insufficient_balance',
  /** [TS] Permit2: no code at Permit2 or at the proxy on this chain. */
  permit2ProxyNotDeployed: 'permit2_proxy_not_deployed',
  /** [TS] Permit2: the Permit2 nonce of `from` is already used. */
  permit2InvalidNonce: 'permit2_invalid_nonce',
  /** [TS] Permit2: the simulated proxy settle reverted for another reason. */
  permit2SimulationFailed: 'permit2_simulation_failed',
  /** [TS] Permit2 proxy reverts at settle. */
  permit2InvalidAmount: 'permit2_invalid_amount',
  permit2InvalidDestination: 'permit2_invalid_destination',
  permit2InvalidOwner: 'permit2_invalid_owner',
  permit2PaymentTooEarly: 'permit2_payment_too_early',
  /** [TS upto] scheme of payload or requirements is not `upto`. */
  uptoInvalidScheme: 'invalid_upto_evm_scheme',
  /** [TS upto] the settle amount is above the signed maximum. */
  uptoSettlementExceedsAmount: 'invalid_upto_evm_payload_settlement_exceeds_amount',
  /** [TS upto] witness.facilitator is not this facilitator's signer. */
  uptoFacilitatorMismatch: 'upto_facilitator_mismatch',
  /** [SPEC] an RPC or internal fault during verify / settle. */
  unexpectedVerifyError: 'unexpected_verify_error',
  unexpectedSettleError: 'unexpected_settle_error',
} as const

export type Reason = (typeof reasons)[keyof typeof reasons]

/** Reasons that mean the request itself was malformed: the HTTP layer answers 400 for these. */
export const malformedRequestReasons: ReadonlySet<string> = new Set([reasons.invalidPayload, reasons.invalidVersion])

/** Reasons that mean our side (RPC, store) failed, not the payment: the HTTP layer may answer 502. */
export const upstreamFaultReasons: ReadonlySet<string> = new Set([reasons.unexpectedVerifyError, reasons.unexpectedSettleError])

/** The revert text FiatToken (USDC) uses for a short balance; the gateway spec surfaces it verbatim. */
export const insufficientBalanceMessage = 'ERC20: transfer amount exceeds balance'
