/**
 * Reads the client's payment: `PAYMENT-SIGNATURE` (v2) or `X-PAYMENT` (v1), each standard base64
 * of a JSON PaymentPayload, and finds the offered network it pays for: a v2 payment's `accepted`
 * must deep-equal one advertised requirement (key order aside), a v1 payment must name an offered
 * scheme and network (v1 payloads carry no requirements).
 */
import { parseBoundedJson, type JsonTextError } from '../../core/proxy/plugin-api.ts'
import type { RequestContext } from '../../core/proxy/plugin-api.ts'
import type { NetworkOffer } from './offers.ts'

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/
/** Far above any EVM payment (≈1 KB), far below the server's header limit. */
const MAX_HEADER_CHARS = 8192

export type ReadPayment =
  | { kind: 'none' }
  | { kind: 'invalid'; version: 1 | 2; message: string }
  | { kind: 'payment'; version: 1 | 2; payload: Record<string, any> }

function isObject(value: unknown): value is Record<string, any> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/**
 * The payment header of the request, decoded.
 *
 * @example
 * ```ts
 * readPayment(ctx) // { kind: 'payment', version: 2, payload: { x402Version: 2, accepted: {...}, payload: {...} } }
 * ```
 */
export function readPayment(ctx: RequestContext): ReadPayment {
  const v2 = ctx.headers['payment-signature']
  const raw = v2 ?? ctx.headers['x-payment']
  if (raw === undefined) return { kind: 'none' }
  const version = v2 !== undefined ? 2 : 1
  const header = version === 2 ? 'PAYMENT-SIGNATURE' : 'X-PAYMENT'
  const text = (Array.isArray(raw) ? raw.join(',') : raw).trim()
  if (text.length > MAX_HEADER_CHARS) return { kind: 'invalid', version, message: `${header} header is longer than ${MAX_HEADER_CHARS} characters` }
  if (text === '' || !BASE64.test(text)) return { kind: 'invalid', version, message: `${header} header must be base64-encoded JSON` }
  let payload: unknown
  try {
    payload = parseBoundedJson(Buffer.from(text, 'base64'))
  } catch (error) {
    if ((error as JsonTextError).tooDeep) return { kind: 'invalid', version, message: `${header} header JSON ${(error as Error).message}` }
    return { kind: 'invalid', version, message: `${header} header must be base64-encoded JSON` }
  }
  if (!isObject(payload)) return { kind: 'invalid', version, message: `${header} header must hold a JSON object` }
  if (payload.x402Version !== version) {
    // Reflected in the 402 (header and body): never more than a short excerpt of what was sent.
    const shown = (JSON.stringify(payload.x402Version) ?? 'nothing').slice(0, 32)
    return { kind: 'invalid', version, message: `${header} carries x402Version ${shown}; expected ${version}` }
  }
  return { kind: 'payment', version, payload }
}

/** Structural equality, ignoring key order (what the reference resource server uses). */
export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((item, i) => deepEqual(item, b[i]))
  }
  if (!isObject(a) || !isObject(b)) return false
  const keys = Object.keys(a)
  return keys.length === Object.keys(b).length && keys.every((key) => Object.hasOwn(b, key) && deepEqual(a[key], b[key]))
}

/** The offer a payment pays for, or undefined. */
export function matchOffer(offers: readonly NetworkOffer[], version: 1 | 2, payload: Record<string, any>): NetworkOffer | undefined {
  if (version === 2) return offers.find((offer) => deepEqual(offer.v2, payload.accepted))
  return offers.find((offer) => offer.v1 !== undefined && payload.scheme === 'exact' && payload.network === offer.v1Network)
}

/** The authorization's identity, for the paywall's own redemption records; undefined if absent. */
export function authorizationKey(offer: NetworkOffer, payload: Record<string, any>): string | undefined {
  if (offer.caip2.startsWith('solana:')) return offer.paymentKey?.(payload)
  const permit = payload.payload?.permit2Authorization
  if (typeof permit?.from === 'string' && typeof permit?.nonce === 'string') return `${offer.caip2}:permit2:${permit.from}:${permit.nonce}`.toLowerCase()
  const authorization = payload.payload?.authorization
  const from = authorization?.from
  const nonce = authorization?.nonce
  if (typeof from !== 'string' || typeof nonce !== 'string') return undefined
  return `${offer.caip2}:${offer.asset.address}:${from}:${nonce}`.toLowerCase()
}
