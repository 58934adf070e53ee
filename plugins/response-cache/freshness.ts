/**
 * How long an upstream answer may be served from the cache, from its own headers (RFC 9111 §4.2
 * for a shared cache): `s-maxage`, else `max-age`, minus the `Age` it already has, capped by the
 * operator. `no-store`, `private` and `no-cache` answers are never stored, nor shared with
 * concurrent requests; neither is an answer that sets a cookie or varies on request headers the
 * cache key does not hold.
 */

type Headers = Record<string, string | string[] | undefined>

function single(value: string | string[] | undefined): string {
  return value === undefined ? '' : Array.isArray(value) ? value.join(', ') : value
}

function directives(cacheControl: string): Map<string, string> {
  const out = new Map<string, string>()
  for (const part of cacheControl.split(',')) {
    const [name, ...rest] = part.trim().split('=')
    if (name) out.set(name.toLowerCase(), rest.join('=').trim().replace(/^"|"$/g, ''))
  }
  return out
}

const FORBIDDEN = ['no-store', 'private', 'no-cache']

/**
 * True when the answer may go to other clients than the one that asked (stored, or handed to
 * concurrent identical requests).
 * @example isShareable({ 'cache-control': 'public, max-age=2' }) // true
 */
export function isShareable(headers: Headers): boolean {
  const control = directives(single(headers['cache-control']))
  if (FORBIDDEN.some((name) => control.has(name))) return false
  if (headers['set-cookie'] !== undefined) return false
  // The key holds no request header; accept-encoding is pinned to identity on a miss.
  const vary = single(headers.vary).toLowerCase().split(',').map((v) => v.trim()).filter(Boolean)
  return vary.every((name) => name === 'accept-encoding')
}

/**
 * Seconds the answer stays fresh in this cache: 0 means do not store.
 * @example freshSeconds({ 'cache-control': 'public, max-age=600', age: '10' }, 60) // 60
 */
export function freshSeconds(headers: Headers, maxTtlSeconds: number): number {
  if (!isShareable(headers)) return 0
  const control = directives(single(headers['cache-control']))
  const declared = control.get('s-maxage') ?? control.get('max-age')
  if (declared === undefined || !/^\d+$/.test(declared)) return 0
  const age = /^\d+$/.test(single(headers.age)) ? Number(single(headers.age)) : 0
  return Math.max(0, Math.min(Number(declared) - age, maxTtlSeconds))
}

/**
 * Seconds of freshness the upstream itself declares (`s-maxage`, else `max-age`, minus `Age`),
 * uncapped; `undefined` when it declares none, so the caller may fall back to its own rule. A
 * directive that is present but unreadable counts as 0 (RFC 9111 §4.2.1: treat it as stale).
 * @example declaredSeconds({ 'cache-control': 'public, max-age=600', age: '10' }) // 590
 * @example declaredSeconds({ 'cache-control': 'public' }) // undefined
 */
export function declaredSeconds(headers: Headers): number | undefined {
  const control = directives(single(headers['cache-control']))
  const declared = control.get('s-maxage') ?? control.get('max-age')
  if (declared === undefined) return undefined
  if (!/^\d+$/.test(declared)) return 0
  return Math.max(0, Number(declared) - upstreamAge(headers))
}

/** The `Age` the upstream already gave the answer, in seconds. */
export function upstreamAge(headers: Headers): number {
  const value = single(headers.age)
  return /^\d+$/.test(value) ? Number(value) : 0
}
