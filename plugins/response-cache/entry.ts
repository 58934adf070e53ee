/**
 * What the cache keeps of an answer, and how it is played back: the status, the upstream's
 * headers minus the ones that belong to one exchange, and the body bytes.
 */
import type { ResponseState } from '../../core/proxy/plugin-api.ts'
import { upstreamAge } from './freshness.ts'

export interface StoredAnswer {
  status: number
  headers: Record<string, string>
  body: Buffer
  /** Date.now() when stored, for the Age header. */
  storedAt: number
  /** Age the upstream had already given it, seconds. */
  ageAtStore: number
  /** Bytes charged against the cache bound. */
  size: number
}

/** Headers of one exchange, or recomputed on replay: never stored. */
const PER_EXCHANGE = new Set(['content-length', 'age', 'set-cookie', 'x-request-id', 'x-cache', 'transfer-encoding'])
/** Fixed cost per entry on top of its bytes (the object, the map slot). */
const ENTRY_OVERHEAD = 128

/**
 * A storable copy of an answer. Repeated headers are joined with `, ` (RFC 9110 §5.3).
 * @example const stored = storedAnswer(ctx.response, key)
 */
export function storedAnswer(response: ResponseState, key: string): StoredAnswer {
  const headers: Record<string, string> = {}
  let size = ENTRY_OVERHEAD + key.length
  for (const name in response.headers) {
    if (PER_EXCHANGE.has(name) || name.startsWith('ratelimit-')) continue
    const value = response.headers[name]
    headers[name] = Array.isArray(value) ? value.join(', ') : value
    size += name.length + headers[name].length + 4
  }
  const body = response.body ?? Buffer.alloc(0)
  return { status: response.status, headers, body, storedAt: Date.now(), ageAtStore: upstreamAge(response.headers), size: size + body.length }
}

/** The `Age` to answer a stored copy with: seconds since the upstream made it. */
export function ageOf(stored: StoredAnswer): string {
  return String(stored.ageAtStore + Math.max(0, Math.floor((Date.now() - stored.storedAt) / 1000)))
}
