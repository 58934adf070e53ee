/**
 * Signed receipts as compact JWS (RFC 7515) with Ed25519 (`alg: EdDSA`, RFC 8037), on node:crypto
 * alone: the gateway signs (plugins/receipt), anyone holding the public key verifies offline
 * (`tollgate receipt verify`). The payload follows the x402 offer-and-receipt extension's receipt
 * (`network`, `resourceUrl`, `payer`, `issuedAt`, `transaction?`) plus the gateway's own fields.
 *
 * @example
 * ```ts
 * const key = signingKeyFrom(process.env.TOLLGATE_RECEIPT_KEY!, 'receipt-1')
 * const jws = signReceipt(key, { network: 'eip155:84532', resourceUrl, payer, issuedAt: 1764288000 })
 * verifyReceipt(jws, { keys: [key.publicJwk] }) // { ok: true, payload, kid: 'receipt-1' }
 * ```
 */
import { createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto'

/** An Ed25519 public key as a JWK (RFC 8037). */
export interface PublicJwk {
  kty: 'OKP'
  crv: 'Ed25519'
  x: string
  kid: string
  alg: 'EdDSA'
  use: 'sig'
}

export interface SigningKey {
  kid: string
  privateKey: KeyObject
  publicJwk: PublicJwk
}

/** The receipt payload: the extension's fields, then the gateway's. */
export interface ReceiptPayload {
  /** CAIP-2 network of an x402 payment; `tollgate:credits` for an answer paid from a credit balance. */
  network: string
  resourceUrl: string
  /** The paying wallet, or `project:<id>` for credits. */
  payer: string
  /** Unix seconds. */
  issuedAt: number
  transaction?: string
  /** What was paid: atomic token units (x402) or credits. */
  amount: string
  /** Token contract or mint (x402); `credits` for credits. */
  asset: string
  /** The gateway's request id (`x-request-id`). */
  requestId: string
  /** The project the request was metered to, when it had one. */
  project?: string
}

// PKCS#8 DER prefix of an Ed25519 private key: the 32-byte seed follows.
const PKCS8_ED25519 = Buffer.from('302e020100300506032b657004220420', 'hex')

/**
 * Reads a private key: a PKCS#8 PEM, or the 32-byte seed in base64 / base64url / hex.
 * @throws Error that never quotes the key material.
 */
export function signingKeyFrom(text: string, kid: string): SigningKey {
  const trimmed = text.trim()
  let privateKey: KeyObject
  try {
    if (trimmed.startsWith('-----BEGIN')) privateKey = createPrivateKey(trimmed)
    else {
      const seed = /^[0-9a-fA-F]{64}$/.test(trimmed) ? Buffer.from(trimmed, 'hex') : Buffer.from(trimmed, 'base64url')
      if (seed.length !== 32) throw new Error('length')
      privateKey = createPrivateKey({ key: Buffer.concat([PKCS8_ED25519, seed]), format: 'der', type: 'pkcs8' })
    }
  } catch {
    throw new Error('the receipt key is not an Ed25519 key (a PKCS#8 PEM, or a 32-byte seed in base64url or hex)')
  }
  if (privateKey.asymmetricKeyType !== 'ed25519') throw new Error(`the receipt key is ${privateKey.asymmetricKeyType}, not Ed25519`)
  const jwk = createPublicKey(privateKey).export({ format: 'jwk' }) as { x: string }
  return { kid, privateKey, publicJwk: { kty: 'OKP', crv: 'Ed25519', x: jwk.x, kid, alg: 'EdDSA', use: 'sig' } }
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url')

/** Compact JWS of the payload, header `{alg: EdDSA, kid, typ: x402-receipt+jws}`. */
export function signReceipt(key: SigningKey, payload: ReceiptPayload): string {
  const input = `${b64({ alg: 'EdDSA', kid: key.kid, typ: 'x402-receipt+jws' })}.${b64(payload)}`
  return `${input}.${sign(null, Buffer.from(input), key.privateKey).toString('base64url')}`
}

export type Verdict = { ok: true; kid: string; payload: ReceiptPayload } | { ok: false; reason: string }

/** Checks a compact JWS against a JWKS: the header's kid picks the key; only EdDSA is accepted. */
export function verifyReceipt(jws: string, jwks: { keys: PublicJwk[] }): Verdict {
  const parts = jws.trim().split('.')
  if (parts.length !== 3 || parts.some((part) => !/^[A-Za-z0-9_-]*$/.test(part))) return { ok: false, reason: 'not a compact JWS (header.payload.signature)' }
  let header: { alg?: unknown; kid?: unknown }
  let payload: ReceiptPayload
  try {
    header = JSON.parse(Buffer.from(parts[0], 'base64url').toString())
    payload = JSON.parse(Buffer.from(parts[1], 'base64url').toString())
  } catch {
    return { ok: false, reason: 'the JWS header or payload is not JSON' }
  }
  // No algorithm choice is taken from the token beyond checking it is the one we sign with.
  if (header.alg !== 'EdDSA') return { ok: false, reason: `alg must be EdDSA, got ${JSON.stringify(header.alg)}` }
  const jwk = jwks.keys.find((k) => k.kid === header.kid && k.kty === 'OKP' && k.crv === 'Ed25519')
  if (!jwk) return { ok: false, reason: `no Ed25519 key with kid ${JSON.stringify(header.kid)} in the key set` }
  let publicKey: KeyObject
  try {
    publicKey = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: jwk.x }, format: 'jwk' })
  } catch {
    return { ok: false, reason: `key ${jwk.kid} is not a valid Ed25519 JWK` }
  }
  const good = verify(null, Buffer.from(`${parts[0]}.${parts[1]}`), publicKey, Buffer.from(parts[2], 'base64url'))
  return good ? { ok: true, kid: jwk.kid, payload } : { ok: false, reason: 'bad signature: the receipt was altered or signed by another key' }
}
