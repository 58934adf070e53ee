/**
 * Pieces of the workstation sign-in (public-routes.ts): the cookies that bind a sign-in or a link
 * to the browser that started it, the sign-in start rate limit, and the page a link ends on.
 */
import { createHash, timingSafeEqual } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'

const PREFIX = '/workstations/'

/** The cookie that binds a link sign-in to the browser that started it (set by the admin API's POST …/link). */
export const LINK_COOKIE = 'tollgate_link'
/** The cookie that binds a plain workstation sign-in to the browser that started it (GET /workstations/_auth/login). */
export const LOGIN_COOKIE = 'tollgate_ws_login'

/** Sent only to the sign-in callback: cookies ignore ports, so one set by the admin listener reaches the public one on the same host. */
export const LINK_COOKIE_PATH = `${PREFIX}_auth/`

/** Events per key within a sliding window (in memory: a limit per instance). */
export class SlidingCounter {
  private readonly hits = new Map<string, number[]>()
  constructor(private readonly windowMs: number) {}

  /** Counts one event for `key` if fewer than `limit` happened within the window; false when over. */
  take(key: string, limit: number): boolean {
    const now = Date.now()
    const recent = (this.hits.get(key) ?? []).filter((at) => now - at < this.windowMs)
    if (recent.length >= limit) {
      this.hits.set(key, recent)
      return false
    }
    recent.push(now)
    this.hits.set(key, recent)
    if (this.hits.size > 10_000) for (const [k, v] of this.hits) if (!v.some((at) => now - at < this.windowMs)) this.hits.delete(k)
    return true
  }
}

export function cookieOf(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const at = part.indexOf('=')
    if (at > 0 && part.slice(0, at).trim() === name) return part.slice(at + 1).trim()
  }
  return undefined
}

export function bindingMatches(presented: string | undefined, expectedHash: string): boolean {
  if (!presented) return false
  const actual = createHash('sha256').update(presented).digest()
  const expected = Buffer.from(expectedHash, 'hex')
  return expected.length === actual.length && timingSafeEqual(actual, expected)
}

/** The end of a link sign-in that named no dashboard page to go back to (no script, no style). */
export function linkedPage(res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', 'content-security-policy': "default-src 'none'" })
  res.end('<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Identity linked</title></head><body><h1>Identity linked</h1><p>Your identity-provider account is linked to your tollgate account. You can close this tab.</p></body></html>')
}
