/**
 * Decoder of Solana's transaction wire format (legacy and version 0 messages), strict: every
 * length is bounded, every index checked, and trailing bytes refused, so a malformed payload is a
 * decode failure and never an exception further on.
 */
import { createHash } from 'node:crypto'
import { getBase58Decoder, getBase58Encoder } from '@solana/kit'

/** Solana's packet limit: no valid transaction is longer. */
export const MAX_TRANSACTION_BYTES = 1232

export interface CompiledInstruction {
  programIndex: number
  accountIndexes: number[]
  data: Uint8Array
}

export interface LookupTableUse {
  table: string
  writableIndexes: number[]
  readonlyIndexes: number[]
}

export interface DecodedTransaction {
  /** Signature slots, in signer order (slot 0 is the fee payer's). */
  signatures: Uint8Array[]
  /** The signed bytes. */
  message: Uint8Array
  version: 'legacy' | 0
  numRequiredSignatures: number
  numReadonlySigned: number
  numReadonlyUnsigned: number
  /** Static account keys, base58. */
  staticKeys: string[]
  recentBlockhash: string
  instructions: CompiledInstruction[]
  lookups: LookupTableUse[]
}

export class WireError extends Error {}

const base58 = getBase58Decoder()
const base58Bytes = getBase58Encoder()

class Reader {
  offset = 0
  constructor(readonly bytes: Uint8Array) {}
  byte(): number {
    if (this.offset >= this.bytes.length) throw new WireError('truncated transaction')
    return this.bytes[this.offset++]!
  }
  take(length: number): Uint8Array {
    if (this.offset + length > this.bytes.length) throw new WireError('truncated transaction')
    const out = this.bytes.subarray(this.offset, this.offset + length)
    this.offset += length
    return out
  }
  /** compact-u16 ("shortvec") */
  length(): number {
    let value = 0
    for (let i = 0; i < 3; i++) {
      const b = this.byte()
      value |= (b & 0x7f) << (7 * i)
      if ((b & 0x80) === 0) {
        if (i > 0 && b === 0) throw new WireError('non-canonical length')
        return value
      }
    }
    throw new WireError('length longer than 3 bytes')
  }
  key(): string {
    return base58.decode(this.take(32))
  }
  indexes(): number[] {
    return [...this.take(this.length())]
  }
}

/**
 * Decodes wire bytes; throws {@link WireError} on anything malformed.
 *
 * @example
 * ```ts
 * const tx = decodeTransaction(Buffer.from(payload.transaction, 'base64'))
 * tx.staticKeys[0] // the fee payer
 * ```
 */
export function decodeTransaction(bytes: Uint8Array): DecodedTransaction {
  if (bytes.length > MAX_TRANSACTION_BYTES) throw new WireError(`transaction is ${bytes.length} bytes; at most ${MAX_TRANSACTION_BYTES}`)
  const reader = new Reader(bytes)
  const signatureCount = reader.length()
  const signatures: Uint8Array[] = []
  for (let i = 0; i < signatureCount; i++) signatures.push(reader.take(64))
  const messageStart = reader.offset
  let version: 'legacy' | 0 = 'legacy'
  const first = bytes[messageStart]
  if (first !== undefined && (first & 0x80) !== 0) {
    const v = first & 0x7f
    if (v !== 0) throw new WireError(`transaction version ${v} is not supported`)
    version = 0
    reader.byte()
  }
  const numRequiredSignatures = reader.byte()
  const numReadonlySigned = reader.byte()
  const numReadonlyUnsigned = reader.byte()
  const keyCount = reader.length()
  const staticKeys: string[] = []
  for (let i = 0; i < keyCount; i++) staticKeys.push(reader.key())
  const recentBlockhash = reader.key()
  const instructionCount = reader.length()
  const instructions: CompiledInstruction[] = []
  for (let i = 0; i < instructionCount; i++) {
    const programIndex = reader.byte()
    const accountIndexes = reader.indexes()
    const data = reader.take(reader.length())
    instructions.push({ programIndex, accountIndexes, data })
  }
  const lookups: LookupTableUse[] = []
  if (version === 0) {
    const lookupCount = reader.length()
    for (let i = 0; i < lookupCount; i++) {
      const lookup = { table: reader.key(), writableIndexes: reader.indexes(), readonlyIndexes: reader.indexes() }
      // Solana's sanitize refuses a table that loads nothing; a real node answers such a
      // transaction's simulation with a JSON-RPC error, not a verdict.
      if (lookup.writableIndexes.length + lookup.readonlyIndexes.length === 0) throw new WireError(`address lookup table ${lookup.table} loads no account`)
      lookups.push(lookup)
    }
  }
  if (reader.offset !== bytes.length) throw new WireError('trailing bytes after the message')
  if (signatureCount !== numRequiredSignatures) throw new WireError(`${signatureCount} signatures for ${numRequiredSignatures} required signers`)
  if (numRequiredSignatures === 0 || numRequiredSignatures > keyCount) throw new WireError('invalid message header')
  if (numReadonlySigned >= numRequiredSignatures || numReadonlyUnsigned > keyCount - numRequiredSignatures) throw new WireError('invalid message header')
  if (new Set(staticKeys).size !== staticKeys.length) throw new WireError('duplicate account keys')
  const lookedUp = lookups.reduce((n, l) => n + l.writableIndexes.length + l.readonlyIndexes.length, 0)
  const totalKeys = keyCount + lookedUp
  if (totalKeys > 256) throw new WireError('more than 256 accounts')
  for (const ix of instructions) {
    if (ix.programIndex >= keyCount) throw new WireError('program index out of range (programs must be static keys)')
    if (ix.accountIndexes.some((a) => a >= totalKeys)) throw new WireError('account index out of range')
  }
  return {
    signatures, message: bytes.subarray(messageStart), version, numRequiredSignatures, numReadonlySigned, numReadonlyUnsigned,
    staticKeys, recentBlockhash, instructions, lookups,
  }
}

/** Hex sha256 of the message: the identity of a payment, whatever its signature bytes. */
export function messageHash(tx: DecodedTransaction): string {
  return createHash('sha256').update(tx.message).digest('hex')
}

/** Wire bytes of `tx` with `signature` in slot `index`. */
export function withSignature(wire: Uint8Array, tx: DecodedTransaction, index: number, signature: Uint8Array): Uint8Array {
  const out = new Uint8Array(wire)
  const prefix = wire.length - tx.message.length - 64 * tx.signatures.length
  out.set(signature, prefix + 64 * index)
  return out
}

/** base58 → 32 bytes, or undefined when it is not a 32-byte base58 string. */
export function addressBytes(address: string): Uint8Array | undefined {
  if (!/^[1-9A-HJ-NP-Za-km-z]{32,44}$/.test(address)) return undefined
  try {
    const bytes = base58Bytes.encode(address)
    return bytes.length === 32 ? new Uint8Array(bytes) : undefined
  } catch {
    return undefined
  }
}

export const toBase58 = (bytes: Uint8Array): string => base58.decode(bytes)
