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

/** The Permit2 PermitWitnessTransferFrom the payer signed (x402 exact and upto over Permit2). */
export interface Permit2Authorization {
  from: string
  permitted: { token: string; amount: string }
  /** The x402 Permit2 proxy: exact `0x4020…0001`, upto `0x4020…0002`. */
  spender: string
  /** Permit2 unordered nonce, a decimal uint256 string. */
  nonce: string
  deadline: string | number
  /** `facilitator` is part of the upto witness only. */
  witness: { to: string; validAfter: string | number; facilitator?: string }
}

export interface Permit2EvmPayload {
  signature: string
  permit2Authorization: Permit2Authorization
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

/** A verify / settle body whose payload is a Permit2 authorization (exact v1/v2, upto v2). */
export type Permit2Request =
  | { x402Version: 1; paymentPayload: Omit<PaymentPayloadV1, 'payload'> & { payload: Permit2EvmPayload }; paymentRequirements: PaymentRequirementsV1 }
  | { x402Version: 2; paymentPayload: Omit<PaymentPayloadV2, 'payload'> & { payload: Permit2EvmPayload }; paymentRequirements: PaymentRequirementsV2 }

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
  /** upto: the amount actually settled (atomic units); "0" when nothing was sent. */
  amount?: string
  details?: Record<string, unknown>
}

/** One entry of the `supported` answer. */
export interface SupportedKind {
  x402Version: 1 | 2
  scheme: 'exact' | 'upto'
  network: string
  extra?: Record<string, unknown>
}

export interface SupportedResponse {
  kinds: SupportedKind[]
  extensions: string[]
  /** Facilitator signer addresses per CAIP family, e.g. `{"eip155:*": ["0x…"]}`. */
  signers: Record<string, string[]>
}
