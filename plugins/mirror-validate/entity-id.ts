/**
 * Ledger entity ids as the Hiero mirror node's REST module accepts them (facts from its
 * `rest/entityId.js`, `rest/accountAlias.js`; re-implemented, not copied).
 *
 * The mirror checks ids in two steps, and the steps give different error texts:
 * 1. a shape check (`isValidEntityId`), failing with `Invalid parameter: <name>`;
 * 2. a parse that pads missing shard/realm with the node's own (0.0 on every public network),
 *    range-checks shard (10 bits), realm (16 bits) and num (38 bits), and rejects EVM addresses
 *    under a foreign shard/realm. A shape-valid id that fails here yields
 *    `Invalid entity ID "<padded id>"` unless the caller names the parameter.
 */

/** Which EVM-address forms an id parameter also accepts. */
export type EvmForm =
  /** `0x`+40 hex, 40 hex, or `[shard.][realm.]`+40 hex. */
  | 'any'
  /** Only long-zero addresses (12 zero bytes then an entity num): token ids. */
  | 'num-alias'
  | 'none'

/** A parsed id: `num` for numeric and long-zero forms, `evmAddress` (40 hex, no 0x) for opaque EVM ones. */
export interface EntityIdParts {
  shard: number
  realm: number
  num: number | null
  evmAddress: string | null
}

const SHAPE = /^(\d{1,4}\.)?\d{1,5}\.\d{1,12}$/
const ENCODED = /^-?\d{1,19}$/
const EVM_PLAIN = /^(0x)?[A-Fa-f0-9]{40}$/
const EVM_WITH_SHARD_REALM = /^(\d{1,4}\.)?(\d{1,5}\.)?[A-Fa-f0-9]{40}$/
const LONG_ZERO_PREFIX = '0'.repeat(24)
const MAX_NUM = 2n ** 38n - 1n
const MAX_REALM = 2n ** 16n - 1n
const MAX_SHARD = 2n ** 10n - 1n

function stripHexPrefix(value: string): string {
  return value.startsWith('0x') ? value.slice(2) : value
}

function isEvmShape(value: string): boolean {
  return EVM_PLAIN.test(value) || EVM_WITH_SHARD_REALM.test(value)
}

/** True for an EVM address that does not encode an entity num (not long-zero, or num over 38 bits). */
export function isOpaqueEvmAddress(value: string): boolean {
  if (!isEvmShape(value)) return false
  const hex = stripHexPrefix(value).split('.').at(-1)!
  return hex.slice(0, 24) !== LONG_ZERO_PREFIX || BigInt('0x' + hex.slice(24, 40)) > MAX_NUM
}

/**
 * The mirror's shape check for an id parameter.
 * @example isValidEntityId('0.0.1001') // true; isValidEntityId('0x' + 'ab'.repeat(20), 'none') // false
 */
export function isValidEntityId(value: string, evm: EvmForm = 'any'): boolean {
  if (SHAPE.test(value) || ENCODED.test(value)) return true
  if (evm === 'none') return false
  if (evm === 'num-alias') return isEvmShape(value) && !isOpaqueEvmAddress(value)
  return isEvmShape(value)
}

/**
 * Pads an id the way the mirror does before parsing it (`5` -> `0.0.5`, `1.5` -> `0.1.5`); opaque
 * EVM addresses lose their `0x` and are not padded. The result is what error messages quote.
 */
export function paddedEntityId(value: string): string {
  const stripped = stripHexPrefix(value)
  const pieces = stripped.split('.')
  if (isOpaqueEvmAddress(stripped)) return pieces.join('.')
  // Same arithmetic as the mirror, including its quirk for ids with more than three parts.
  return [...['0', '0'].slice(0, 3 - pieces.length), ...pieces].join('.')
}

function partsFromDotted(id: string): EntityIdParts | null {
  const pieces = stripHexPrefix(id).split('.')
  const last = pieces[pieces.length - 1]
  const shard = pieces.length === 3 ? BigInt(pieces.shift()!) : 0n
  const realm = pieces.length === 2 ? BigInt(pieces.shift()!) : 0n
  if (last.length === 40 || last.length === 42) {
    if (shard !== 0n || realm !== 0n) return null
    const hex = stripHexPrefix(last)
    const num = BigInt('0x' + hex.slice(24, 40))
    if (hex.slice(0, 24) !== LONG_ZERO_PREFIX || num > MAX_NUM) {
      return { shard: 0, realm: 0, num: null, evmAddress: last.toLowerCase() }
    }
    return { shard: 0, realm: 0, num: Number(num), evmAddress: null }
  }
  return checkRange(shard, realm, BigInt(last))
}

function checkRange(shard: bigint, realm: bigint, num: bigint): EntityIdParts | null {
  if (num > MAX_NUM || realm > MAX_REALM || shard > MAX_SHARD) return null
  return { shard: Number(shard), realm: Number(realm), num: Number(num), evmAddress: null }
}

/**
 * Parses an id the way the mirror does after its shape check; `null` means the mirror would
 * answer `Invalid entity ID "<paddedEntityId(value)>"` (or `Invalid parameter: <name>`).
 * @example parseEntityId('1001') // { shard: 0, realm: 0, num: 1001, evmAddress: null }
 */
export function parseEntityId(value: string, evm: EvmForm = 'any'): EntityIdParts | null {
  // Padding always yields a dotted id or a 40-hex address, so the mirror's encoded-id branch
  // (a bare 64-bit number) is never reached from a request parameter.
  const padded = paddedEntityId(value)
  return isValidEntityId(padded, evm) ? partsFromDotted(padded) : null
}

/** `shard.realm.num`, the form the mirror prints ids in. */
export function formatEntityId(parts: { shard: number; realm: number; num: number }): string {
  return `${parts.shard}.${parts.realm}.${parts.num}`
}

const ALIAS = /^(\d{1,5}\.){0,2}[A-Z2-7]+$/
const BASE32_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567'

/**
 * Decodes unpadded RFC 4648 base32; `null` when the length leaves a partial byte or the unused
 * trailing bits are not zero (the mirror's decoder rejects both).
 */
export function decodeBase32(text: string): Buffer | null {
  let bits = 0
  let buffer = 0
  const out: number[] = []
  for (const char of text) {
    const value = BASE32_ALPHABET.indexOf(char)
    if (value < 0) return null
    buffer = ((buffer << 5) | value) & 0xffff
    bits += 5
    if (bits >= 8) {
      bits -= 8
      out.push((buffer >> bits) & 0xff)
    }
  }
  if (bits >= 5 || ((buffer << (8 - bits)) & 0xff) !== 0) return null
  return Buffer.from(out)
}

/** Encodes bytes as unpadded RFC 4648 base32 (the form account aliases are printed in). */
export function encodeBase32(bytes: Uint8Array): string {
  let bits = 0
  let buffer = 0
  let out = ''
  for (const byte of bytes) {
    buffer = ((buffer << 8) | byte) & 0xffff
    bits += 8
    while (bits >= 5) {
      bits -= 5
      out += BASE32_ALPHABET[(buffer >> bits) & 31]
    }
  }
  if (bits > 0) out += BASE32_ALPHABET[(buffer << (5 - bits)) & 31]
  return out
}

/**
 * An account alias path segment (`[shard.][realm.]BASE32`), accepted only under shard/realm 0
 * and when the base32 decodes; returns the alias bytes or `null`.
 */
export function parseAccountAlias(value: string): Buffer | null {
  if (!ALIAS.test(value)) return null
  const pieces = value.split('.')
  const alias = pieces.pop()!
  if (pieces.some((piece) => BigInt(piece) !== 0n)) return null
  const bytes = decodeBase32(alias)
  return bytes && bytes.length > 0 ? bytes : null
}
