/**
 * The fee payer's ed25519 key (from the environment variable named by `signerKeyEnv`) and
 * ed25519 signing and verification with node:crypto. The key is accepted as a wallet export
 * (base58 of the 64-byte secret key) or a `solana-keygen` file's content (a JSON array of 64
 * numbers); its value never appears in an error or a log line.
 */
import { createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto'
import { getBase58Encoder } from '@solana/kit'
import { toBase58 } from './wire.ts'

const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex')

export interface SvmSigner {
  address: string
  sign(message: Uint8Array): Uint8Array
}

export type SvmKeyLookup = { ok: true; signer: SvmSigner } | { ok: false; missing: string }

function secretBytes(value: string): Uint8Array | undefined {
  if (value.startsWith('[')) {
    try {
      const parsed = JSON.parse(value) as unknown
      if (Array.isArray(parsed) && parsed.length === 64 && parsed.every((n) => Number.isInteger(n) && n >= 0 && n <= 255)) return Uint8Array.from(parsed)
    } catch {
      return undefined
    }
    return undefined
  }
  try {
    const bytes = getBase58Encoder().encode(value)
    return bytes.length === 64 ? new Uint8Array(bytes) : undefined
  } catch {
    return undefined
  }
}

/** A signer over a 64-byte secret key (seed ‖ public key); throws when the halves disagree. */
export function signerFromSecretKey(secret: Uint8Array): SvmSigner {
  const key = createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, secret.subarray(0, 32)]), format: 'der', type: 'pkcs8' })
  const publicKey = Buffer.from(createPublicKey(key).export({ format: 'jwk' }).x!, 'base64url')
  if (!publicKey.equals(Buffer.from(secret.subarray(32, 64)))) throw new Error('the secret key\'s public half does not match its seed')
  return { address: toBase58(publicKey), sign: (message) => new Uint8Array(sign(null, message, key)) }
}

/**
 * Reads the key named by `envName`; unset → not configured (501), malformed → throws (config error).
 *
 * @example
 * ```ts
 * const lookup = readSvmSignerKey('X402_SOLANA_FACILITATOR_KEY')
 * if (lookup.ok) lookup.signer.address
 * ```
 */
export function readSvmSignerKey(envName: string, env: NodeJS.ProcessEnv = process.env): SvmKeyLookup {
  const value = env[envName]?.trim()
  if (!value) return { ok: false, missing: `environment variable ${envName} (signerKeyEnv) is not set` }
  const secret = secretBytes(value)
  if (!secret) throw new Error(`environment variable ${envName} (signerKeyEnv) must hold a 64-byte Solana secret key (base58, or a JSON array of 64 numbers)`)
  try {
    return { ok: true, signer: signerFromSecretKey(secret) }
  } catch {
    throw new Error(`environment variable ${envName} (signerKeyEnv) does not hold a valid Solana secret key`)
  }
}

const publicKeys = new Map<string, KeyObject>()

/** Whether `signature` is `address`'s ed25519 signature of `message`. */
export function verifySignature(address: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean {
  const id = Buffer.from(address).toString('base64url')
  let key = publicKeys.get(id)
  if (!key) {
    try {
      key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: id }, format: 'jwk' })
    } catch {
      return false
    }
    if (publicKeys.size > 10_000) publicKeys.clear()
    publicKeys.set(id, key)
  }
  try {
    return verify(null, message, key, signature)
  } catch {
    return false
  }
}
