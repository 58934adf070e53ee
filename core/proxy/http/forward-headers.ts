/**
 * The headers of a forwarded exchange, both ways (http/forward.ts sends them): hop-by-hop headers and
 * the ones named in `Connection` dropped, credentials kept on the client's side unless the route opts
 * in (gateway-cookies.ts), X-Forwarded-* set (believed from a trusted proxy only: client-address.ts).
 */
import type { IncomingMessage } from 'node:http'
import { createRequire } from 'node:module'
import type { Context } from '../context.ts'
import { withoutGatewayCookies, type UpstreamCredentialPolicy } from './gateway-cookies.ts'
import type { ProxyTrust } from './client-address.ts'

/** Hop-by-hop headers (RFC 9110 §7.6.1) plus ones a proxy must set itself. */
const REQUEST_DROP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'proxy-authorization', 'host', 'x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'content-length'])
const RESPONSE_DROP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade'])

const NO_TOKENS: readonly string[] = []
const KEEP_ALIVE: readonly string[] = ['keep-alive']
const CLOSE: readonly string[] = ['close']

/** Header names a `Connection` header lists (RFC 9110 §7.6.1); the two common values are not parsed. */
function connectionTokens(value: string | string[] | undefined): readonly string[] {
  if (!value) return NO_TOKENS
  if (value === 'keep-alive' || value === 'Keep-Alive') return KEEP_ALIVE
  if (value === 'close' || value === 'Close') return CLOSE
  return (Array.isArray(value) ? value.join(',') : value).split(',').map((t) => t.trim().toLowerCase()).filter(Boolean)
}

export function upstreamRequestHeaders(ctx: Context, req: IncomingMessage, proxies: ProxyTrust, credentials: UpstreamCredentialPolicy): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = {}
  const named = connectionTokens(req.headers.connection)
  for (const name in req.headers) {
    if (REQUEST_DROP.has(name) || ctx.isSecretHeader(name) || named.includes(name)) continue
    const value = req.headers[name]
    if (value === undefined) continue
    if (name === 'authorization' && !credentials.authorization) continue
    if (name === 'cookie' && !credentials.gatewayCookies) {
      const kept = withoutGatewayCookies(value as string)
      if (kept !== undefined) headers.cookie = kept
      continue
    }
    headers[name] = value
  }
  // What a peer that is not a trusted proxy says of earlier hops is not passed on as if one had written it.
  const trustProxy = proxies.trustsPeer(req.socket.remoteAddress)
  const priorFor = trustProxy ? req.headers['x-forwarded-for'] : undefined
  headers['x-forwarded-for'] = priorFor ? `${priorFor}, ${req.socket.remoteAddress ?? ''}` : (req.socket.remoteAddress ?? '')
  headers['x-forwarded-proto'] = (trustProxy && (req.headers['x-forwarded-proto'] as string)) || 'http'
  if (req.headers.host) headers['x-forwarded-host'] = (trustProxy && (req.headers['x-forwarded-host'] as string)) || req.headers.host
  if (ctx.body) headers['content-length'] = String(ctx.body.raw.length)
  else if (req.headers['content-length'] !== undefined) headers['content-length'] = req.headers['content-length']
  for (const name in ctx.upstreamHeaders) {
    const value = ctx.upstreamHeaders[name]
    if (value === null) delete headers[name]
    else headers[name] = value
  }
  return headers
}

/**
 * A raw header name (undici's Buffer) as a lower-case string. undici's own lookup returns the
 * interned name of a well-known header without making a string; its module is not among the
 * package's public entry points, so a lower-casing of our own stands in if it ever moves.
 */
const lowerCaseName: (name: Buffer) => string = (() => {
  try {
    const util = createRequire(import.meta.url)('undici/lib/core/util.js') as { headerNameToString?: (name: Buffer) => string }
    if (typeof util.headerNameToString === 'function') return util.headerNameToString
  } catch {}
  return (name: Buffer) => name.toString('latin1').toLowerCase()
})()

/** The value of header `name` (lower case) in undici's raw list, the first one if repeated. */
export function rawHeaderValue(raw: Buffer[], name: string): string | undefined {
  for (let i = 0; i < raw.length; i += 2) if (lowerCaseName(raw[i]) === name) return raw[i + 1].toString('latin1')
  return undefined
}

/**
 * The upstream's answer head as the client gets it, from undici's raw list in one pass: names in
 * lower case, a repeated header as an array of its values (as undici's own parse makes them),
 * hop-by-hop headers and the ones `Connection` names dropped.
 */
export function upstreamResponseHeaders(raw: Buffer[]): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {}
  let connection: string | string[] | undefined
  for (let i = 0; i < raw.length; i += 2) {
    const name = lowerCaseName(raw[i])
    const value = raw[i + 1].toString('latin1')
    if (RESPONSE_DROP.has(name)) {
      if (name === 'connection') connection = connection === undefined ? value : ([] as string[]).concat(connection, value)
      continue
    }
    // Never a property of the object's prototype; undici's parse dropped it the same way in effect.
    if (name === '__proto__') continue
    const before = out[name]
    if (before === undefined) out[name] = value
    else if (typeof before === 'string') out[name] = [before, value]
    else before.push(value)
  }
  if (connection !== undefined) {
    const named = connectionTokens(connection)
    if (named !== KEEP_ALIVE && named !== CLOSE) for (const name of named) delete out[name]
  }
  return out
}
