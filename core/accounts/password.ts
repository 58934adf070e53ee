/**
 * Account passwords: scrypt (node:crypto), a memory-hard hash, with its parameters stored beside
 * the hash so they can be raised later without invalidating existing passwords.
 *
 * Stored form: `scrypt$<N>$<r>$<p>$<salt base64url>$<hash base64url>`.
 *
 * An unknown account must cost what a wrong password costs: {@link verifyPassword} with an
 * undefined stored hash runs the same scrypt against a dummy hash and answers false.
 */
import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto'

/** N = 2^15, r = 8, p = 1: 32 MiB of memory per hash (OWASP's scrypt floor is N=2^17 at r=8 for 128 MiB; this is the interactive-login compromise). */
export const SCRYPT_PARAMS = { N: 1 << 15, r: 8, p: 1 } as const
const KEY_LENGTH = 32
const SALT_LENGTH = 16
export const MIN_PASSWORD_LENGTH = 12
/** The longest password accepted (the dashboard's fields carry it as `maxlength`). */
export const MAX_PASSWORD_LENGTH = 1024

function derive(password: string, salt: Buffer, params: { N: number; r: number; p: number }): Promise<Buffer> {
  // maxmem must exceed 128 * N * r bytes, or scrypt refuses.
  const options: ScryptOptions = { N: params.N, r: params.r, p: params.p, maxmem: 256 * params.N * params.r + (1 << 20) }
  return new Promise((resolve, reject) => scrypt(password.normalize('NFC'), salt, KEY_LENGTH, options, (error, key) => (error ? reject(error) : resolve(key))))
}

/** Hashes a password with a fresh random salt. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_LENGTH)
  const key = await derive(password, salt, SCRYPT_PARAMS)
  return ['scrypt', SCRYPT_PARAMS.N, SCRYPT_PARAMS.r, SCRYPT_PARAMS.p, salt.toString('base64url'), key.toString('base64url')].join('$')
}

interface Parsed {
  N: number
  r: number
  p: number
  salt: Buffer
  key: Buffer
}

function parse(stored: string): Parsed | undefined {
  const parts = stored.split('$')
  if (parts.length !== 6 || parts[0] !== 'scrypt') return undefined
  const [N, r, p] = parts.slice(1, 4).map(Number)
  if (![N, r, p].every((n) => Number.isSafeInteger(n) && n > 0) || N > 1 << 20 || r > 32 || p > 16) return undefined
  return { N, r, p, salt: Buffer.from(parts[4], 'base64url'), key: Buffer.from(parts[5], 'base64url') }
}

let dummy: Promise<string> | undefined

/**
 * Constant-time check of a password against a stored hash. `stored` undefined (no such account)
 * still runs one scrypt of the same cost against a dummy hash, then answers false.
 */
export async function verifyPassword(password: string, stored: string | undefined): Promise<boolean> {
  dummy ??= hashPassword(randomBytes(16).toString('hex'))
  const parsed = parse(stored ?? (await dummy))
  if (!parsed) {
    await derive(password, randomBytes(SALT_LENGTH), SCRYPT_PARAMS)
    return false
  }
  const key = await derive(password, parsed.salt, parsed)
  return key.length === parsed.key.length && timingSafeEqual(key, parsed.key) && stored !== undefined
}

/** Why a new password is refused, or undefined when it is acceptable. */
export function weakPassword(password: string): string | undefined {
  if (password.length === 0) return 'the password is empty'
  if (password.length < MIN_PASSWORD_LENGTH) return `the password must be at least ${MIN_PASSWORD_LENGTH} characters long`
  if (password.length > MAX_PASSWORD_LENGTH) return `the password must be at most ${MAX_PASSWORD_LENGTH} characters long`
  if (new Set(password).size < 5) return 'the password must use at least 5 different characters'
  return undefined
}
