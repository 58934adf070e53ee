/**
 * JSON Schemas of the verify / settle request bodies (gateway spec "Format rules"), and the one
 * function that validates a body and names the first offending field.
 *
 * Requirements objects allow unknown keys (clients copy whole 402 answers, with `resource`,
 * `description`, `outputSchema`...), while the signed authorization is closed.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv'
import type { FacilitatorRequest, Permit2Request } from './types.ts'
import { reasons } from './errors.ts'

const hex = (digits: number) => `^0x[0-9a-fA-F]{${digits}}$`
const patterns = {
  address: hex(40),
  bytes32: hex(64),
  signature: '^0x([0-9a-fA-F]{2})+$',
  uint: '^(0|[1-9][0-9]{0,77})$',
} as const
/** Readable names for the patterns, used in error messages. */
const patternNames: Record<string, string> = {
  [patterns.address]: '0x followed by 40 hex digits (an address)',
  [patterns.bytes32]: '0x followed by 64 hex digits',
  [patterns.signature]: '0x followed by an even number of hex digits',
  [patterns.uint]: 'a decimal integer string without sign or leading zeros',
}

const address = (description: string) => ({ type: 'string', pattern: patterns.address, description })
const amount = (description: string) => ({ type: 'string', pattern: patterns.uint, description })
const timestamp = (description: string) => ({
  description: `${description} Unix seconds, as a decimal string (reference clients) or a number (gateway spec).`,
  anyOf: [
    { type: 'string', pattern: patterns.uint },
    { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
  ],
})
const nonEmpty = (description: string) => ({ type: 'string', minLength: 1, maxLength: 128, description })

const eip712Extra = {
  description: 'Scheme extras. For EVM exact: the token\'s EIP-712 domain name and version; when absent the configured asset\'s are used.',
  type: ['object', 'null'],
  properties: {
    name: { type: 'string', maxLength: 128, description: 'EIP-712 domain name of the token, e.g. "USDC" or "USD Coin".' },
    version: { type: 'string', maxLength: 32, description: 'EIP-712 domain version of the token, e.g. "2".' },
  },
}

const exactEvmPayload = {
  type: 'object',
  description: 'The EIP-3009 TransferWithAuthorization the payer signed, and the signature.',
  required: ['signature', 'authorization'],
  additionalProperties: false,
  properties: {
    signature: {
      type: 'string', pattern: patterns.signature, maxLength: 8194,
      description: '0x-prefixed signature: 65-byte ECDSA for an EOA, anything an ERC-1271 wallet accepts, or an ERC-6492 wrapper.',
    },
    authorization: {
      type: 'object',
      description: 'The signed EIP-3009 message.',
      required: ['from', 'to', 'value', 'validAfter', 'validBefore', 'nonce'],
      additionalProperties: false,
      properties: {
        from: address('Payer address; the token moves from here.'),
        to: address('Recipient; must equal paymentRequirements.payTo.'),
        value: amount('Amount in atomic token units; must equal the required amount exactly.'),
        validAfter: timestamp('The authorization is valid strictly after this time.'),
        validBefore: timestamp('The authorization is valid strictly before this time.'),
        nonce: { type: 'string', pattern: patterns.bytes32, description: '0x-prefixed 32-byte random nonce, unique per payer.' },
      },
    },
  },
}

const permit2Payload = {
  type: 'object',
  description: 'The Permit2 PermitWitnessTransferFrom the payer signed, and the signature.',
  required: ['signature', 'permit2Authorization'],
  additionalProperties: false,
  properties: {
    signature: exactEvmPayload.properties.signature,
    permit2Authorization: {
      type: 'object',
      description: 'The signed Permit2 message (spender = the x402 Permit2 proxy, witness = recipient and start time).',
      required: ['from', 'permitted', 'spender', 'nonce', 'deadline', 'witness'],
      additionalProperties: false,
      properties: {
        from: address('Payer address; the token moves from here.'),
        permitted: {
          type: 'object', description: 'Token and amount the payer permits.',
          required: ['token', 'amount'], additionalProperties: false,
          properties: {
            token: address('Token address; must equal paymentRequirements.asset.'),
            amount: amount('Permitted amount: the exact amount (exact) or the maximum (upto).'),
          },
        },
        spender: address('The x402 Permit2 proxy that may spend the permit.'),
        nonce: amount('Permit2 unordered nonce (decimal uint256).'),
        deadline: timestamp('The permit is valid up to this time.'),
        witness: {
          type: 'object', description: 'Data bound into the signature by the proxy.',
          required: ['to', 'validAfter'], additionalProperties: false,
          properties: {
            to: address('Recipient; must equal paymentRequirements.payTo.'),
            facilitator: address('upto only: the facilitator allowed to settle; must be this facilitator\'s signer.'),
            validAfter: timestamp('The permit is not valid before this time.'),
          },
        },
      },
    },
  },
}

const requirementsCommon = {
  scheme: nonEmpty('Payment scheme; only "exact" is served.'),
  network: nonEmpty('Network: v1 short name (e.g. "base-sepolia") or CAIP-2 (e.g. "eip155:84532").'),
  asset: address('Token contract address.'),
  payTo: address('Address that receives the payment.'),
  maxTimeoutSeconds: { type: 'integer', minimum: 1, description: 'Longest time the resource server waits for settlement.' },
  extra: eip712Extra,
}

const requirementsV1 = {
  type: 'object',
  description: 'v1 payment requirements (one entry of the 402 answer\'s accepts).',
  required: ['scheme', 'network', 'maxAmountRequired', 'asset', 'payTo'],
  properties: {
    ...requirementsCommon,
    maxAmountRequired: amount('Required amount in atomic token units (matched exactly).'),
    resource: { type: 'string', description: 'URL of the paid resource.' },
    description: { type: 'string', description: 'What is paid for.' },
    mimeType: { type: 'string', description: 'Media type of the resource.' },
    outputSchema: { description: 'Optional schema of the resource\'s answer.' },
  },
}

const requirementsV2 = {
  type: 'object',
  description: 'v2 payment requirements.',
  required: ['scheme', 'network', 'amount', 'asset', 'payTo'],
  properties: { ...requirementsCommon, amount: amount('Required amount in atomic token units (matched exactly).') },
}

/** Body of POST verify / settle, x402 version 1. */
export const requestSchemaV1 = {
  type: 'object',
  description: 'x402 v1 facilitator request: the payment and, separately, the requirements it must meet.',
  required: ['x402Version', 'paymentPayload', 'paymentRequirements'],
  properties: {
    x402Version: { const: 1, description: 'Protocol version 1.' },
    paymentPayload: {
      type: 'object',
      description: 'The payment from the X-PAYMENT header, decoded.',
      required: ['x402Version', 'scheme', 'network', 'payload'],
      properties: {
        x402Version: { const: 1, description: 'Must equal the body\'s x402Version.' },
        scheme: nonEmpty('Scheme the client paid with; must equal the requirements\'.'),
        network: nonEmpty('Network the client paid on; must equal the requirements\'.'),
        payload: exactEvmPayload,
      },
    },
    paymentRequirements: requirementsV1,
  },
}

/** Body of POST verify / settle, x402 version 2. */
export const requestSchemaV2 = {
  type: 'object',
  description: 'x402 v2 facilitator request: the payment (with the requirements it accepted) and the requirements.',
  required: ['x402Version', 'paymentPayload', 'paymentRequirements'],
  properties: {
    x402Version: { const: 2, description: 'Protocol version 2.' },
    paymentPayload: {
      type: 'object',
      description: 'The payment from the PAYMENT-SIGNATURE header, decoded.',
      required: ['x402Version', 'accepted', 'payload'],
      properties: {
        x402Version: { const: 2, description: 'Must equal the body\'s x402Version.' },
        accepted: { ...requirementsV2, description: 'The requirements the client accepted; must equal paymentRequirements.' },
        payload: exactEvmPayload,
        resource: { type: 'object', description: 'The paid resource ({url, description, mimeType}).' },
        extensions: { type: 'object', description: 'Protocol extensions; ignored by this facilitator.' },
      },
    },
    paymentRequirements: requirementsV2,
  },
}

/** The same bodies with a Permit2 payload. */
function withPayload(schema: typeof requestSchemaV1 | typeof requestSchemaV2, payload: object) {
  const paymentPayload = schema.properties.paymentPayload
  return { ...schema, properties: { ...schema.properties, paymentPayload: { ...paymentPayload, properties: { ...paymentPayload.properties, payload } } } }
}

const ajv = new Ajv({ allErrors: false, strict: true, allowUnionTypes: true })
const validators: Record<1 | 2, ValidateFunction> = {
  1: ajv.compile(requestSchemaV1),
  2: ajv.compile(requestSchemaV2),
}
const permit2Validators: Record<1 | 2, ValidateFunction> = {
  1: ajv.compile(withPayload(requestSchemaV1, permit2Payload)),
  2: ajv.compile(withPayload(requestSchemaV2, permit2Payload)),
}

/** Whether the body carries a Permit2 payload (so {@link parsePermit2Request} applies). */
export function isPermit2Body(body: unknown): boolean {
  const payload = (body as any)?.paymentPayload?.payload
  return typeof payload === 'object' && payload !== null && 'permit2Authorization' in payload
}

export type ParsedPermit2Request =
  | { ok: true; request: Permit2Request }
  | { ok: false; reason: string; message: string; field: string; payer: string }

/** {@link parseFacilitatorRequest} for bodies with a Permit2 payload. */
export function parsePermit2Request(body: unknown): ParsedPermit2Request {
  const parsed = parseWith(body, permit2Validators)
  return parsed.ok ? { ok: true, request: parsed.request as unknown as Permit2Request } : parsed
}

export type ParsedRequest =
  | { ok: true; request: FacilitatorRequest }
  | { ok: false; reason: string; message: string; field: string; payer: string }

function fieldOf(error: ErrorObject): string {
  const parts = error.instancePath.split('/').slice(1).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
  if (error.keyword === 'required') parts.push(String(error.params.missingProperty))
  if (error.keyword === 'additionalProperties') parts.push(String(error.params.additionalProperty))
  return parts.join('.') || '(body)'
}

function describe(error: ErrorObject): string {
  switch (error.keyword) {
    case 'required': return 'is required'
    case 'additionalProperties': return 'is not allowed here'
    case 'pattern': return `must be ${patternNames[String(error.params.pattern)] ?? `like ${error.params.pattern}`}`
    case 'const': return `must be ${JSON.stringify(error.params.allowedValue)}`
    case 'anyOf': return 'must be a decimal integer string or a non-negative integer'
    case 'type': return `must be of type ${String(error.params.type)}`
    default: return error.message ?? 'is invalid'
  }
}

/** Best effort: the payer named in a body that failed validation, so answers can carry it. */
function payerOf(body: unknown): string {
  const payload = (body as any)?.paymentPayload?.payload
  const from = payload?.authorization?.from ?? payload?.permit2Authorization?.from
  return typeof from === 'string' && new RegExp(patterns.address).test(from) ? from : ''
}

/**
 * Validates a verify / settle body. The version is taken from `x402Version` (or, when the body
 * lacks it, from `paymentPayload.x402Version`, as some clients send); its schema then applies.
 *
 * @example
 * ```ts
 * const parsed = parseFacilitatorRequest(JSON.parse(raw))
 * if (!parsed.ok) return { status: 400, body: { isValid: false, invalidReason: parsed.reason, invalidMessage: parsed.message } }
 * ```
 */
export function parseFacilitatorRequest(body: unknown): ParsedRequest {
  const parsed = parseWith(body, validators)
  return parsed.ok ? { ok: true, request: parsed.request as unknown as FacilitatorRequest } : parsed
}

function parseWith(
  body: unknown, byVersion: Record<1 | 2, ValidateFunction>,
): { ok: true; request: unknown } | { ok: false; reason: string; message: string; field: string; payer: string } {
  const payer = payerOf(body)
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return { ok: false, reason: reasons.invalidPayload, message: 'body must be a JSON object', field: '(body)', payer }
  }
  const record = body as Record<string, unknown>
  const payloadVersion = (record.paymentPayload as Record<string, unknown> | undefined)?.x402Version
  const version = record.x402Version ?? payloadVersion
  if (version !== 1 && version !== 2) {
    return {
      ok: false, reason: reasons.invalidVersion, field: 'x402Version', payer,
      message: `x402Version must be 1 or 2, got ${JSON.stringify(version) ?? 'nothing'}`,
    }
  }
  if (payloadVersion !== undefined && payloadVersion !== version) {
    return {
      ok: false, reason: reasons.invalidVersion, field: 'paymentPayload.x402Version', payer,
      message: `paymentPayload.x402Version (${JSON.stringify(payloadVersion)}) differs from x402Version (${version})`,
    }
  }
  const candidate = record.x402Version === undefined ? { ...record, x402Version: version } : record
  const validate = byVersion[version]
  if (!validate(candidate)) {
    const error = validate.errors![0]!
    const field = fieldOf(error)
    return { ok: false, reason: reasons.invalidPayload, field, payer, message: `${field} ${describe(error)}` }
  }
  return { ok: true, request: candidate }
}
