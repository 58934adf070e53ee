/**
 * JSON Schemas of the Solana verify / settle bodies (x402 v1 and v2, `exact` scheme), and the one
 * function that validates a body and names the first offending field. Requirements allow unknown
 * keys (clients copy whole 402 answers); the payload is closed.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv'
import { svmReasons } from './errors.ts'
import { addressBytes } from './wire.ts'

const base58Address = '^[1-9A-HJ-NP-Za-km-z]{32,44}$'
const uint = '^(0|[1-9][0-9]{0,19})$'
const base64 = '^[A-Za-z0-9+/]*={0,2}$'

// The pattern gives the usual message; the format checks the text decodes to 32 bytes (a 36-character
// base58 string can be 27 bytes), which the ATA derivation and the chain require.
const address = (description: string) => ({ type: 'string', pattern: base58Address, format: 'solana-address', description })
const amount = (description: string) => ({ type: 'string', pattern: uint, description })
const nonEmpty = (description: string) => ({ type: 'string', minLength: 1, maxLength: 128, description })

const svmPayload = {
  type: 'object',
  description: 'The exact-SVM payment: a partially signed versioned transaction.',
  required: ['transaction'],
  additionalProperties: false,
  properties: {
    transaction: {
      type: 'string', minLength: 4, maxLength: 1644, pattern: base64,
      description: 'Base64 wire transaction (at most 1232 bytes), signed by the payer, the fee payer slot empty.',
    },
  },
}

const extra = {
  type: 'object',
  description: 'Scheme extras. For SVM exact: feePayer (required), optional memo and blockhash hints.',
  properties: {
    feePayer: { type: 'string', maxLength: 64, description: 'The facilitator address paying the transaction fee (from supported).' },
    memo: { type: 'string', maxLength: 256, description: 'Memo the transaction must carry exactly once (at most 256 bytes).' },
  },
}

const requirementsCommon = {
  scheme: nonEmpty('Payment scheme; only "exact" is served.'),
  network: nonEmpty('Network: solana-mainnet / solana-testnet, the SDK v1 names, or CAIP-2 solana:<genesis>.'),
  asset: address('SPL token mint.'),
  payTo: address('Owner of the token account that receives the payment.'),
  maxTimeoutSeconds: { type: 'integer', minimum: 1, description: 'Longest time the resource server waits for settlement.' },
  extra,
}

const requirementsV1 = {
  type: 'object',
  description: 'v1 payment requirements.',
  required: ['scheme', 'network', 'maxAmountRequired', 'asset', 'payTo'],
  properties: { ...requirementsCommon, maxAmountRequired: amount('Required amount in atomic units (matched exactly, u64).') },
}

const requirementsV2 = {
  type: 'object',
  description: 'v2 payment requirements.',
  required: ['scheme', 'network', 'amount', 'asset', 'payTo'],
  properties: { ...requirementsCommon, amount: amount('Required amount in atomic units (matched exactly, u64).') },
}

const schemas = {
  1: {
    type: 'object',
    required: ['x402Version', 'paymentPayload', 'paymentRequirements'],
    properties: {
      x402Version: { const: 1 },
      paymentPayload: {
        type: 'object',
        required: ['x402Version', 'scheme', 'network', 'payload'],
        properties: { x402Version: { const: 1 }, scheme: nonEmpty('Scheme paid with.'), network: nonEmpty('Network paid on.'), payload: svmPayload },
      },
      paymentRequirements: requirementsV1,
    },
  },
  2: {
    type: 'object',
    required: ['x402Version', 'paymentPayload', 'paymentRequirements'],
    properties: {
      x402Version: { const: 2 },
      paymentPayload: {
        type: 'object',
        required: ['x402Version', 'accepted', 'payload'],
        properties: { x402Version: { const: 2 }, accepted: requirementsV2, payload: svmPayload, resource: { type: 'object' }, extensions: { type: 'object' } },
      },
      paymentRequirements: requirementsV2,
    },
  },
}

const ajv = new Ajv({ allErrors: false, strict: false })
ajv.addFormat('solana-address', (text: string) => addressBytes(text) !== undefined)
const validators: Record<1 | 2, ValidateFunction> = { 1: ajv.compile(schemas[1]), 2: ajv.compile(schemas[2]) }

/** A schema-valid request, reduced to what the checks need. */
export interface SvmRequest {
  version: 1 | 2
  /** Scheme and network the payment says it uses (v2: `accepted`). */
  paidScheme: string
  paidNetwork: string
  requirements: { scheme: string; network: string; amount: string; asset: string; payTo: string; extra?: { feePayer?: unknown; memo?: unknown } | null }
  /** v2 only: the requirements the client accepted. */
  accepted?: Record<string, unknown>
  rawRequirements: Record<string, unknown>
  transaction: string
}

export type ParsedSvmRequest = { ok: true; request: SvmRequest } | { ok: false; reason: string; message: string; field: string }

function fieldOf(error: ErrorObject): string {
  const parts = error.instancePath.split('/').slice(1)
  if (error.keyword === 'required') parts.push(String(error.params.missingProperty))
  if (error.keyword === 'additionalProperties') parts.push(String(error.params.additionalProperty))
  return parts.join('.') || '(body)'
}

function describe(error: ErrorObject): string {
  switch (error.keyword) {
    case 'required': return 'is required'
    case 'additionalProperties': return 'is not allowed here'
    case 'pattern': return String(error.params.pattern) === base58Address ? 'must be a base58 address'
      : String(error.params.pattern) === uint ? 'must be a decimal integer string (u64)' : 'must be base64'
    case 'format': return 'must be a base58 address of 32 bytes'
    case 'const': return `must be ${JSON.stringify(error.params.allowedValue)}`
    case 'type': return `must be of type ${String(error.params.type)}`
    default: return error.message ?? 'is invalid'
  }
}

const U64_MAX = 0xffffffffffffffffn

/**
 * Validates a verify / settle body for the Solana exact scheme.
 *
 * @example
 * ```ts
 * const parsed = parseSvmRequest(body)
 * if (!parsed.ok) return { status: 400, body: { isValid: false, invalidReason: parsed.reason } }
 * ```
 */
export function parseSvmRequest(body: unknown): ParsedSvmRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return { ok: false, reason: svmReasons.invalidPayload, message: 'body must be a JSON object', field: '(body)' }
  }
  const record = body as Record<string, any>
  const payloadVersion = record.paymentPayload?.x402Version
  const version = record.x402Version ?? payloadVersion
  if (version !== 1 && version !== 2) {
    return { ok: false, reason: svmReasons.invalidVersion, field: 'x402Version', message: `x402Version must be 1 or 2, got ${JSON.stringify(version) ?? 'nothing'}` }
  }
  if (payloadVersion !== undefined && payloadVersion !== version) {
    return { ok: false, reason: svmReasons.invalidVersion, field: 'paymentPayload.x402Version', message: `paymentPayload.x402Version (${JSON.stringify(payloadVersion)}) differs from x402Version (${version})` }
  }
  const candidate = record.x402Version === undefined ? { ...record, x402Version: version } : record
  const validate = validators[version as 1 | 2]
  if (!validate(candidate)) {
    const error = validate.errors![0]!
    const field = fieldOf(error)
    return { ok: false, reason: svmReasons.invalidPayload, field, message: `${field} ${describe(error)}` }
  }
  const req = candidate.paymentRequirements
  const amount = version === 1 ? req.maxAmountRequired : req.amount
  const amountField = version === 1 ? 'paymentRequirements.maxAmountRequired' : 'paymentRequirements.amount'
  if (BigInt(amount) > U64_MAX) return { ok: false, reason: svmReasons.invalidPayload, field: amountField, message: `${amountField} exceeds the u64 range` }
  const payment = candidate.paymentPayload
  return {
    ok: true,
    request: {
      version,
      paidScheme: version === 1 ? payment.scheme : payment.accepted.scheme,
      paidNetwork: version === 1 ? payment.network : payment.accepted.network,
      requirements: { scheme: req.scheme, network: req.network, amount, asset: req.asset, payTo: req.payTo, extra: req.extra },
      accepted: version === 2 ? payment.accepted : undefined,
      rawRequirements: req,
      transaction: payment.payload.transaction,
    },
  }
}
