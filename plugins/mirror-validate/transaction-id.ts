/**
 * The `/transactions/{transactionIdOrHash}` path segment, as the mirror node reads it (facts from
 * its `rest/transactionId.js` and `rest/transactionHash.js`).
 *
 * A segment is either a transaction hash (48 bytes: 64 base64url characters, or 96 hex digits with
 * an optional `0x`) or a transaction id `shard.realm.num-seconds-nanos`.
 */
import { parseEntityId, type EntityIdParts } from './entity-id.ts'

/** The mirror's exact text for a malformed transaction id. */
export const INVALID_TRANSACTION_ID =
  'Invalid Transaction id. Please use "shard.realm.num-sss-nnn" format where sss are seconds and nnn are nanoseconds'

const HASH = /^([\dA-Za-z+\-/_]{64}|(0x)?[\dA-Fa-f]{96})$/
const TRANSACTION_ID = /^(\d+)\.(\d+)\.(\d+)-(\d{1,19})-(\d{1,9})$/
const MAX_LONG = 2n ** 63n - 1n

export interface ParsedTransactionId {
  payer: EntityIdParts
  /** Valid-start seconds, as a decimal string without leading zeros. */
  seconds: string
  nanos: number
}

/** True when the segment is a 48-byte transaction hash in one of the accepted encodings. */
export function isTransactionHash(segment: string): boolean {
  return HASH.test(segment)
}

/** The hash bytes of a segment accepted by {@link isTransactionHash}. */
export function decodeTransactionHash(segment: string): Buffer {
  if (segment.length === 64) return Buffer.from(segment, 'base64url')
  return Buffer.from(segment.startsWith('0x') ? segment.slice(2) : segment, 'hex')
}

/**
 * Parses a transaction id. Returns the parsed id, or the mirror's error message: the fixed
 * format text, or `Invalid entity ID "<payer>"` when the payer part is out of range.
 * @example parseTransactionId('0.0.10-1234567890-000000000') // { payer: {...num: 10}, seconds: '1234567890', nanos: 0 }
 */
export function parseTransactionId(segment: string): ParsedTransactionId | { error: string } {
  const match = TRANSACTION_ID.exec(segment)
  if (!match) return { error: INVALID_TRANSACTION_ID }
  const payerText = `${match[1]}.${match[2]}.${match[3]}`
  // A 40-digit num is read as an EVM address, as upstream does; an opaque one has no payer num
  // (upstream then fails with a 500), so it is reported as an invalid entity here.
  const payer = parseEntityId(payerText)
  if (!payer || payer.num === null) return { error: `Invalid entity ID "${payerText}"` }
  if (BigInt(match[4]) > MAX_LONG) return { error: INVALID_TRANSACTION_ID }
  return { payer, seconds: BigInt(match[4]).toString(), nanos: Number(match[5]) }
}

/** Formats a transaction id the way the mirror prints it (`0.0.10-1234567890-000000007`). */
export function formatTransactionId(payer: string, seconds: string, nanos: number): string {
  return `${payer}-${seconds}-${String(nanos).padStart(9, '0')}`
}
