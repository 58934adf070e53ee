/**
 * The signature of a low-balance webhook (also what a receiver runs to check one).
 *
 * Scheme, documented in README "Low-balance alerts":
 *   x-tollgate-timestamp: <unix seconds when this attempt was sent>
 *   x-tollgate-signature: v1=<hex HMAC-SHA256(secret, "<timestamp>.<raw body>")>
 * The timestamp is part of the signed text so a captured request cannot be replayed later with a
 * fresh timestamp; receivers reject timestamps older than a tolerance (300 s suggested).
 */
import { createHmac, timingSafeEqual } from 'node:crypto'

export const TIMESTAMP_HEADER = 'x-tollgate-timestamp'
export const SIGNATURE_HEADER = 'x-tollgate-signature'

/** `v1=<hex>` for a body sent at `timestampSeconds`. */
export function signWebhook(secret: string, timestampSeconds: number, body: string): string {
  return 'v1=' + createHmac('sha256', secret).update(`${timestampSeconds}.${body}`, 'utf8').digest('hex')
}

/**
 * Checks a received webhook: the signature matches (constant-time) and the timestamp is within
 * `toleranceSeconds` of `nowSeconds`.
 */
export function verifyWebhook(
  secret: string,
  headers: { timestamp: string | undefined; signature: string | undefined },
  body: string,
  nowSeconds: number = Math.floor(Date.now() / 1000),
  toleranceSeconds = 300,
): boolean {
  const timestamp = Number(headers.timestamp)
  if (!Number.isSafeInteger(timestamp) || Math.abs(nowSeconds - timestamp) > toleranceSeconds) return false
  const expected = Buffer.from(signWebhook(secret, timestamp, body))
  const presented = Buffer.from(headers.signature ?? '')
  return expected.length === presented.length && timingSafeEqual(expected, presented)
}
