/**
 * Account data of the local SVM: dev keypairs derived from fixed names, and SPL Token mint and
 * token-account images written straight into LiteSVM (the same bytes the Token program would
 * write), so start-up needs no transactions.
 *
 * Layouts are SPL Token's `Mint` (82 bytes) and `Account` (165 bytes); Token-2022 uses the same
 * base layout for accounts without extensions.
 */
import { createHash, createPrivateKey, createPublicKey } from 'node:crypto'
import { getAddressDecoder, getAddressEncoder, getBase58Decoder, getProgramDerivedAddress, type Address } from '@solana/kit'

export const TOKEN_PROGRAM = 'TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA' as Address
export const TOKEN_2022_PROGRAM = 'TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb' as Address
export const ASSOCIATED_TOKEN_PROGRAM = 'ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL' as Address
export const LOOKUP_TABLE_PROGRAM = 'AddressLookupTab1e1111111111111111111111111' as Address

/** A development keypair; never use one anywhere real. */
export interface SvmAccount {
  address: Address
  /** 64 bytes: the 32-byte seed then the public key (the Solana CLI / wallet export layout). */
  secretKey: Uint8Array
  /** `secretKey` in base58, the form wallets export and `signerKeyEnv` accepts. */
  secretKeyBase58: string
}

const PKCS8_ED25519_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex')
const addressEncoder = getAddressEncoder()
const addressDecoder = getAddressDecoder()

/**
 * A deterministic dev keypair: the seed is sha256 of a fixed label and `name`.
 *
 * @example
 * ```ts
 * devAccount('payer').address // always the same address
 * ```
 */
export function devAccount(name: string): SvmAccount {
  const seed = createHash('sha256').update(`tollgate local svm dev key: ${name}`).digest()
  const privateKey = createPrivateKey({ key: Buffer.concat([PKCS8_ED25519_PREFIX, seed]), format: 'der', type: 'pkcs8' })
  const publicKey = Buffer.from(createPublicKey(privateKey).export({ format: 'jwk' }).x!, 'base64url')
  const secretKey = new Uint8Array(Buffer.concat([seed, publicKey]))
  return { address: addressDecoder.decode(publicKey), secretKey, secretKeyBase58: getBase58Decoder().decode(secretKey) }
}

function option(address: Address | undefined): Uint8Array {
  const out = new Uint8Array(36)
  if (address) {
    out[0] = 1
    out.set(addressEncoder.encode(address), 4)
  }
  return out
}

/** SPL Token `Mint` bytes. */
export function mintData(opts: { authority: Address; supply: bigint; decimals: number }): Uint8Array {
  const data = new Uint8Array(82)
  const view = new DataView(data.buffer)
  data.set(option(opts.authority), 0)
  view.setBigUint64(36, opts.supply, true)
  data[44] = opts.decimals
  data[45] = 1 // initialized
  data.set(option(undefined), 46)
  return data
}

/** SPL Token `Account` bytes (initialized, no delegate, not native). */
export function tokenAccountData(opts: { mint: Address; owner: Address; amount: bigint }): Uint8Array {
  const data = new Uint8Array(165)
  const view = new DataView(data.buffer)
  data.set(addressEncoder.encode(opts.mint), 0)
  data.set(addressEncoder.encode(opts.owner), 32)
  view.setBigUint64(64, opts.amount, true)
  data.set(option(undefined), 72)
  data[108] = 1 // AccountState::Initialized
  return data
}

/** The amount field of token-account bytes. */
export function tokenAmountOf(data: Uint8Array): bigint {
  return new DataView(data.buffer, data.byteOffset, data.byteLength).getBigUint64(64, true)
}

/** Address Lookup Table bytes (active, no authority) holding `addresses`. */
export function lookupTableData(addresses: readonly Address[]): Uint8Array {
  const data = new Uint8Array(56 + 32 * addresses.length)
  const view = new DataView(data.buffer)
  view.setUint32(0, 1, true) // ProgramState::LookupTable
  view.setBigUint64(4, 0xffffffffffffffffn, true) // deactivation slot: never
  addresses.forEach((a, i) => data.set(addressEncoder.encode(a), 56 + 32 * i))
  return data
}

/** The associated token account of `owner` for `mint` under `tokenProgram`. */
export async function associatedTokenAddress(owner: Address, mint: Address, tokenProgram: Address = TOKEN_PROGRAM): Promise<Address> {
  const [pda] = await getProgramDerivedAddress({
    programAddress: ASSOCIATED_TOKEN_PROGRAM,
    seeds: [addressEncoder.encode(owner), addressEncoder.encode(tokenProgram), addressEncoder.encode(mint)],
  })
  return pda
}
