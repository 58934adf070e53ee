/**
 * Wire types of the x402 facilitator API (`/verify`, `/settle`) for the EVM `exact` scheme,
 * versions 1 and 2. Field names follow the x402 specification; amounts are decimal strings in
 * atomic units. See schema.ts for the exact formats accepted.
 */

/** The EIP-3009 TransferWithAuthorization message the payer signed. */
export interface Eip3009Authorization {
  from: string
  to: string
  value: string
  /** Unix seconds. The reference clients send strings; the gateway spec shows numbers. Both are accepted. */
  validAfter: string | number
  validBefore: string | number
  /** 0x-prefixed 32-byte hex. */
  nonce: string
}

export interface ExactEvmPayload {
  signature: string
  authorization: Eip3009Authorization
}

export interface PaymentRequirementsV1 {
  scheme: string
  /** Short name (`base-sepolia`) or CAIP-2 (`eip155:84532`). */
  network: string
  maxAmountRequired: string
  asset: string
  payTo: string
  resource?: string
  description?: string
  mimeType?: string
  outputSchema?: unknown
  maxTimeoutSeconds?: number
  extra?: { name?: string; version?: string; [key: string]: unknown } | null
  [key: string]: unknown
}

export interface PaymentRequirementsV2 {
  scheme: string
  /** CAIP-2 (`eip155:84532`); short names are tolerated. */
  network: string
  amount: string
  asset: string
  payTo: string
  maxTimeoutSeconds?: number
  extra?: { name?: string; version?: string; [key: string]: unknown } | null
  [key: string]: unknown
}

export interface PaymentPayloadV1 {
  x402Version: 1
  scheme: string
  network: string
  payload: ExactEvmPayload
}

export interface PaymentPayloadV2 {
  x402Version: 2
  /** The requirements the client accepted, copied verbatim from the 402 answer. */
  accepted: PaymentRequirementsV2
  payload: ExactEvmPayload
  resource?: { url?: string; description?: string; mimeType?: string }
  extensions?: Record<string, unknown>
}

/** Body of POST verify and POST settle. */
export type FacilitatorRequestV1 = {
  x402Version: 1
  paymentPayload: PaymentPayloadV1
  paymentRequirements: PaymentRequirementsV1
}
export type FacilitatorRequestV2 = {
  x402Version: 2
  paymentPayload: PaymentPayloadV2
  paymentRequirements: PaymentRequirementsV2
}
export type FacilitatorRequest = FacilitatorRequestV1 | FacilitatorRequestV2

export interface VerifyResponse {
  isValid: boolean
  /** A stable code (see errors.ts); null when valid. */
  invalidReason: string | null
  /** Human-readable cause, e.g. the token's revert text "ERC20: transfer amount exceeds balance". */
  invalidMessage?: string
  /** The authorization's `from`; "" only when the body was too malformed to name one. */
  payer: string
  /** Structured facts about the failed check (expected vs received, the offending field). */
  details?: Record<string, unknown>
}

export interface SettleResponse {
  success: boolean
  /** A stable code (see errors.ts); null on success. */
  errorReason: string | null
  errorMessage?: string
  payer: string
  /** Transaction hash; "" when nothing was broadcast. */
  transaction: string
  /** The network string of the payment payload, echoed. */
  network: string
  details?: Record<string, unknown>
}

/** One entry of the `supported` answer. */
export interface SupportedKind {
  x402Version: 1 | 2
  scheme: 'exact'
  network: string
  extra?: Record<string, unknown>
}

export interface SupportedResponse {
  kinds: SupportedKind[]
  extensions: string[]
  /** Facilitator signer addresses per CAIP family, e.g. `{"eip155:*": ["0x…"]}`. */
  signers: Record<string, string[]>
}
