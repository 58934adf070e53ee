/**
 * Sign-in-with-x (the x402 `sign-in-with-x` extension, CAIP-122): the `SIGN-IN-WITH-X` header is
 * base64 of a JSON payload `{domain, address, statement?, uri, version, chainId, type, nonce,
 * issuedAt, expirationTime?, notBefore?, requestId?, resources?, signature}`. The message signed is
 * rebuilt here from those fields:
 *
 * - EVM (`type: eip191`, `chainId: eip155:<n>`): the EIP-4361 (SIWE) text, viem's
 *   `createSiweMessage`, verified with `verifyMessage` (EOA signatures, EIP-191).
 * - Solana (`type: ed25519`, `chainId: solana:<ref>`): the same text with "Solana account" and the
 *   chain reference as its Chain ID (SIWS), the signature base58 ed25519 over its UTF-8 bytes.
 *
 * Every refusal is a {@link SiwxError} with a stable code (the official extension's names where it
 * has one) and a message naming the field.
 */
import { getBase58Encoder, getPublicKeyFromAddress, verifySignature, type Address } from '@solana/kit'
import { isAddress, verifyMessage, type Hex } from 'viem'
import { createSiweMessage } from 'viem/siwe'
import { GatewayError } from '../../core/proxy/plugin-api.ts'

export const SIWX_HEADER = 'sign-in-with-x'

export interface SiwxPayload {
  domain: string
  address: string
  statement?: string
  uri: string
  version: string
  chainId: string
  type: 'eip191' | 'ed25519'
  nonce: string
  issuedAt: string
  expirationTime?: string
  notBefore?: string
  requestId?: string
  resources?: string[]
  signature: string
}

export class SiwxError extends GatewayError {}

const malformed = (message: string) => new SiwxError(400, 'invalid_siwx', `SIGN-IN-WITH-X ${message}`)
const refused = (code: string, message: string) => new SiwxError(401, code, message)

const TEXT = /^[\x20-\x7e]{1,512}$/
const NONCE = /^[a-zA-Z0-9]{8,64}$/
const EVM_CHAIN = /^eip155:([1-9][0-9]{0,17})$/
const SOLANA_CHAIN = /^solana:([1-9A-HJ-NP-Za-km-z]{1,44})$/
const BASE58_ADDRESS = /^[1-9A-HJ-NP-Za-km-z]{32,44}$/
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/

function text(value: unknown, field: string, optional = false): string | undefined {
  if (value === undefined && optional) return undefined
  if (typeof value !== 'string' || !TEXT.test(value)) throw malformed(`field ${field} must be a string of 1 to 512 printable ASCII characters`)
  return value
}

function time(value: unknown, field: string, optional = false): string | undefined {
  const raw = text(value, field, optional)
  if (raw === undefined) return undefined
  if (!ISO.test(raw) || Number.isNaN(Date.parse(raw))) throw malformed(`field ${field} must be an ISO 8601 date-time`)
  return raw
}

/** Parses and shape-checks the header; nothing is trusted yet. */
export function parseSiwx(header: string | string[] | undefined): SiwxPayload {
  if (typeof header !== 'string' || header.length === 0) throw malformed('header is required')
  if (header.length > 8192) throw malformed('header is longer than 8192 characters')
  let json: unknown
  try {
    json = JSON.parse(Buffer.from(header, 'base64').toString('utf8'))
  } catch {
    throw malformed('header must be base64 of a JSON object')
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw malformed('header must be base64 of a JSON object')
  const raw = json as Record<string, unknown>
  const type = raw.type
  if (type !== 'eip191' && type !== 'ed25519') throw malformed('field type must be eip191 or ed25519')
  const chainId = text(raw.chainId, 'chainId')!
  if (type === 'eip191' && !EVM_CHAIN.test(chainId)) throw malformed('field chainId must be eip155:<chain id> for type eip191')
  if (type === 'ed25519' && !SOLANA_CHAIN.test(chainId)) throw malformed('field chainId must be solana:<reference> for type ed25519')
  const address = text(raw.address, 'address')!
  if (type === 'eip191' && !isAddress(address, { strict: false })) throw malformed('field address must be a 0x EVM address')
  if (type === 'ed25519' && !BASE58_ADDRESS.test(address)) throw malformed('field address must be a base58 Solana address')
  const nonce = text(raw.nonce, 'nonce')!
  if (!NONCE.test(nonce)) throw malformed('field nonce must be 8 to 64 letters or digits')
  if (raw.version !== '1') throw malformed('field version must be "1"')
  const resources = raw.resources
  if (resources !== undefined && (!Array.isArray(resources) || resources.length > 16 || resources.some((r) => typeof r !== 'string' || !TEXT.test(r)))) {
    throw malformed('field resources must be an array of at most 16 URIs')
  }
  const signature = raw.signature
  if (typeof signature !== 'string' || signature.length < 8 || signature.length > 2048) throw malformed('field signature must be a string')
  return {
    domain: text(raw.domain, 'domain')!,
    address,
    statement: text(raw.statement, 'statement', true),
    uri: text(raw.uri, 'uri')!,
    version: '1',
    chainId,
    type,
    nonce,
    issuedAt: time(raw.issuedAt, 'issuedAt')!,
    expirationTime: time(raw.expirationTime, 'expirationTime', true),
    notBefore: time(raw.notBefore, 'notBefore', true),
    requestId: text(raw.requestId, 'requestId', true),
    resources: resources as string[] | undefined,
    signature,
  }
}

/** The text the wallet signed. */
export function siwxMessage(p: SiwxPayload): string {
  if (p.type === 'eip191') {
    try {
      return createSiweMessage({
        domain: p.domain,
        address: p.address as Hex,
        statement: p.statement,
        uri: p.uri,
        version: '1',
        chainId: Number(EVM_CHAIN.exec(p.chainId)![1]),
        nonce: p.nonce,
        issuedAt: new Date(p.issuedAt),
        expirationTime: p.expirationTime ? new Date(p.expirationTime) : undefined,
        notBefore: p.notBefore ? new Date(p.notBefore) : undefined,
        requestId: p.requestId,
        resources: p.resources,
      })
    } catch (error) {
      // viem refuses a field EIP-4361 does not allow (a domain with a path, a bad URI...).
      const field = (error as { message?: string }).message?.match(/"(\w+)"/)?.[1] ?? 'a field'
      throw malformed(`field ${field} is not valid in an EIP-4361 message`)
    }
  }
  const lines = [`${p.domain} wants you to sign in with your Solana account:`, p.address, '']
  if (p.statement) lines.push(p.statement, '')
  lines.push(`URI: ${p.uri}`, `Version: ${p.version}`, `Chain ID: ${SOLANA_CHAIN.exec(p.chainId)![1]}`, `Nonce: ${p.nonce}`, `Issued At: ${p.issuedAt}`)
  if (p.expirationTime) lines.push(`Expiration Time: ${p.expirationTime}`)
  if (p.notBefore) lines.push(`Not Before: ${p.notBefore}`)
  if (p.requestId) lines.push(`Request ID: ${p.requestId}`)
  if (p.resources?.length) lines.push('Resources:', ...p.resources.map((r) => `- ${r}`))
  return lines.join('\n')
}

/** True when `signature` is the address's signature of the message; never throws on a bad signature. */
export async function signatureValid(p: SiwxPayload, message: string): Promise<boolean> {
  try {
    if (p.type === 'eip191') {
      if (!/^0x[0-9a-fA-F]{130}$/.test(p.signature)) return false
      return await verifyMessage({ address: p.address as Hex, message, signature: p.signature as Hex })
    }
    const signature = getBase58Encoder().encode(p.signature)
    if (signature.length !== 64) return false
    const key = await getPublicKeyFromAddress(p.address as Address)
    return await verifySignature(key, signature as Parameters<typeof verifySignature>[1], new TextEncoder().encode(message))
  } catch {
    return false
  }
}

export const siwxRefused = refused
