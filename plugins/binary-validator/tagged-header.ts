/**
 * The cheap part of the proof server's "tagged" deserialisation, done at the gateway so a wrong
 * payload never occupies a proving slot (shared/reference/upstreams.md §1.5–1.6).
 *
 * A tagged value starts with the ASCII header `midnight:<tag>:`; the tag never holds a colon, and
 * the server looks at most 512 bytes ahead for the second one. For `/prove` and `/check` the byte
 * after the header is a version discriminant (0x01 = V2). Only the first ≤ 513 bytes are read,
 * so the cost does not grow with the payload.
 *
 * Messages copy the upstream's wording, so a client sees the same text whether the gateway or the
 * proof server refused the payload.
 */

/** `midnight:`: the global prefix of every tagged value. */
const GLOBAL_PREFIX = Buffer.from('midnight:', 'ascii')
/** How far the upstream's `peek_tag` looks for the second colon. */
export const MAX_HEADER_BYTES = 512
/** Characters a tag may hold; also the ones the upstream keeps when it echoes a wrong header. */
export const TAG_PATTERN = '^[A-Za-z0-9_\\-()\\[\\],]+$'
const COLON = 0x3a

/** byte → allowed in a tag (A-Z a-z 0-9 _ - ( ) [ ] ,). */
const TAG_BYTE = new Uint8Array(256)
for (const char of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-()[],') TAG_BYTE[char.charCodeAt(0)] = 1

/** What a payload must look like: one of `tags`, then (optionally) a discriminant byte. */
export interface TaggedPayloadSpec {
  /** Accepted tags, without the `midnight:` prefix and the closing colon. */
  tags: string[]
  /** Expected first byte after the header, and the type name the upstream uses in its message. */
  discriminant?: { value: number; type: string }
}

/** Why a payload was refused: a stable code and the upstream-style message. */
export interface PayloadProblem {
  code: 'invalid_tagged_header' | 'header_tag_mismatch' | 'invalid_discriminant' | 'truncated_payload'
  message: string
}

/** JSON Schema of a {@link TaggedPayloadSpec}; the binary-validator config and prove-batch endpoints use it. */
export const taggedPayloadSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['tags'],
  properties: {
    tags: {
      type: 'array',
      minItems: 1,
      uniqueItems: true,
      description:
        'Accepted header tags, without `midnight:` and the closing colon, e.g. `(proof-preimage-versioned,option(wrapped-ir))`. ' +
        'The first one is named in error messages.',
      items: { type: 'string', minLength: 1, maxLength: MAX_HEADER_BYTES - GLOBAL_PREFIX.length - 1, pattern: TAG_PATTERN },
    },
    discriminant: {
      type: 'object',
      additionalProperties: false,
      required: ['value', 'type'],
      description: 'The byte that must follow the header (the V2 preimage discriminant 0x01 for /prove and /check). Omit for none.',
      properties: {
        value: { type: 'integer', minimum: 0, maximum: 255, description: 'Expected byte value.' },
        type: { type: 'string', minLength: 1, description: 'Type name used in messages, e.g. ProofPreimageVersioned.' },
      },
    },
  },
} as const

/** The upstream's echo of a wrong header: `length` bytes, lossy UTF-8, foreign characters as U+FFFD. */
function echo(payload: Buffer, length: number): string {
  const decoded = new TextDecoder('utf-8', { fatal: false }).decode(payload.subarray(0, length))
  let out = ''
  for (const char of decoded) {
    const code = char.charCodeAt(0)
    out += char.length === 1 && (code === COLON || (code < 256 && TAG_BYTE[code] === 1)) ? char : '\uFFFD'
  }
  return out
}

/**
 * Compiles a spec into a check. The check returns null for an acceptable payload, else the problem.
 *
 * @example
 * ```ts
 * const check = compileTaggedCheck({ tags: ['(proof-preimage-versioned,option(wrapped-ir))'], discriminant: { value: 1, type: 'ProofPreimageVersioned' } })
 * check(Buffer.from('{"a":1}'))
 * // { code: 'invalid_tagged_header', message: "expected header tag 'midnight:(proof-…):', got '��a�:1�'" }
 * ```
 */
export function compileTaggedCheck(spec: TaggedPayloadSpec): (payload: Buffer) => PayloadProblem | null {
  const headers = spec.tags.map((tag) => Buffer.from(`midnight:${tag}:`, 'ascii'))
  const echoLength = headers[0].length
  const expected = headers.map((header) => `'${header.toString('ascii')}'`).join(' or ')
  const discriminant = spec.discriminant
  const refuse = (code: PayloadProblem['code'], payload: Buffer): PayloadProblem => ({
    code,
    message: `expected header tag ${expected}, got '${echo(payload, echoLength)}'`,
  })
  // Rust's io error when a value is cut short, as the upstream words it.
  const truncated: PayloadProblem = { code: 'truncated_payload', message: 'failed to fill whole buffer' }

  return (payload) => {
    if (payload.length < GLOBAL_PREFIX.length || payload.compare(GLOBAL_PREFIX, 0, GLOBAL_PREFIX.length, 0, GLOBAL_PREFIX.length) !== 0) {
      return refuse('invalid_tagged_header', payload)
    }
    const scanEnd = Math.min(payload.length, MAX_HEADER_BYTES)
    let colon = -1
    for (let i = GLOBAL_PREFIX.length; i < scanEnd; i++) {
      const byte = payload[i]
      if (byte === COLON) {
        colon = i
        break
      }
      if (TAG_BYTE[byte] !== 1) return refuse('invalid_tagged_header', payload)
    }
    if (colon <= GLOBAL_PREFIX.length) return refuse('invalid_tagged_header', payload)
    const headerLength = colon + 1
    let matched = false
    for (const header of headers) {
      if (header.length === headerLength && payload.compare(header, 0, headerLength, 0, headerLength) === 0) {
        matched = true
        break
      }
    }
    if (!matched) return refuse('header_tag_mismatch', payload)
    let bodyStart = headerLength
    if (discriminant) {
      if (payload.length <= headerLength) return truncated
      const byte = payload[headerLength]
      if (byte !== discriminant.value) {
        const kind = byte < discriminant.value ? 'invalid old' : 'unknown'
        return { code: 'invalid_discriminant', message: `${kind} discriminant for ${discriminant.type}: ${byte}` }
      }
      bodyStart++
    }
    // A header (and discriminant) with nothing after it cannot be a value.
    return payload.length <= bodyStart ? truncated : null
  }
}
