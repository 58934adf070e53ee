/**
 * Associated token account derivation (the payTo side of a transfer), cached: the derivation
 * (sha256 and an off-curve check per bump) is the costliest step of verify, and payTo × mint
 * pairs repeat.
 */
import { getAddressEncoder, getProgramDerivedAddress, type Address } from '@solana/kit'
import { LRUCache } from 'lru-cache'

export const TOKEN_PROGRAM = 'TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA'
export const TOKEN_2022_PROGRAM = 'TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb'
const ASSOCIATED_TOKEN_PROGRAM = 'ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL' as Address

const encoder = getAddressEncoder()
const cache = new LRUCache<string, Promise<string>>({ max: 10_000 })

/**
 * The associated token account of `owner` for `mint` under `tokenProgram`; undefined when an input
 * is not an address.
 *
 * @example
 * ```ts
 * await associatedTokenAccount(payTo, usdcMint, TOKEN_PROGRAM)
 * ```
 */
export async function associatedTokenAccount(owner: string, mint: string, tokenProgram: string): Promise<string | undefined> {
  const id = `${owner}|${mint}|${tokenProgram}`
  let pending = cache.get(id)
  if (!pending) {
    // Inside the promise: the address encoder throws synchronously on a string that is not 32
    // base58 bytes, and that must come out as undefined, not as an exception.
    pending = Promise.resolve().then(() => getProgramDerivedAddress({
      programAddress: ASSOCIATED_TOKEN_PROGRAM,
      seeds: [encoder.encode(owner as Address), encoder.encode(tokenProgram as Address), encoder.encode(mint as Address)],
    })).then(([pda]) => pda as string)
    cache.set(id, pending)
  }
  try {
    return await pending
  } catch {
    cache.delete(id)
    return undefined
  }
}
