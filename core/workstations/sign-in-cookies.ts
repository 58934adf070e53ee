/**
 * Pieces of the workstation sign-in (public-routes.ts): the cookies that bind a sign-in or a link
 * to the browser that started it, the sign-in start rate limit, the page a link ends on, and the
 * refusals of the public routes (JSON, or a page for a person's browser).
 */
import { createHash, timingSafeEqual } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { serveAsset } from '../dashboard/assets.ts'
import { html } from '../dashboard/html.ts'
import { STANDALONE_POLICY, standalonePage } from '../dashboard/layout.ts'

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

/** Where the public listener serves the dashboard's stylesheet and icon (for {@link linkedPage}). */
export const PUBLIC_ASSETS = `${PREFIX}_auth/assets`
const PUBLIC_ASSET_NAMES = new Set(['app.css', 'favicon.svg'])

/** The stylesheet or icon under {@link PUBLIC_ASSETS}; false for any other path (the dashboard's script is not served here). */
export function publicAsset(res: ServerResponse, pathname: string): boolean {
  if (!pathname.startsWith(`${PUBLIC_ASSETS}/`)) return false
  const name = pathname.slice(PUBLIC_ASSETS.length + 1)
  if (!PUBLIC_ASSET_NAMES.has(name)) return false
  return serveAsset(res, name, { 'x-content-type-options': 'nosniff', 'content-security-policy': "default-src 'none'" })
}

/**
 * The end of a link sign-in that named no dashboard page to go back to (the link was started over
 * the API): styled like the dashboard (its stylesheet, served by this listener), no script, and a
 * next step that works from here: open a project's workstation, which now lets this identity in.
 */
export function linkedPage(res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', 'content-security-policy': STANDALONE_POLICY, 'x-content-type-options': 'nosniff' })
  res.end(standalonePage('Identity linked', html`<section class="card signin"><h1>Identity linked</h1>
    <p>Your identity-provider account is linked to your tollgate account: the workstations of your projects let you in when you sign in with it.</p>
    <form method="get" action="${PREFIX}_auth/login">
      <label>Project id <input name="project" required maxlength="64" pattern="[a-zA-Z0-9_.\\-]{1,64}" autocomplete="off" spellcheck="false" aria-describedby="project-rule">
        <span class="hint muted small" id="project-rule">1 to 64 letters, digits, _ . or -, as on the project's dashboard page</span></label>
      <button type="submit" class="primary">Open its workstation</button>
    </form>
    <p class="muted small">Or go back to the dashboard tab you started from. You can close this tab.</p></section>`, PUBLIC_ASSETS))
}

/** A person's browser opening the URL (a tab, a link), not a script: it gets a page rather than JSON. */
function navigation(req: IncomingMessage | undefined): boolean {
  const mode = req?.headers['sec-fetch-mode']
  const accept = req?.headers.accept ?? ''
  return mode === 'navigate' || (mode === undefined && /text\/html/.test(accept) && !/json/.test(accept))
}

const TITLES: Record<number, string> = { 400: 'Request refused', 401: 'Sign in required', 403: 'Not allowed', 404: 'Not found', 409: 'Not possible now', 429: 'Too many attempts' }

/**
 * A refusal of the public workstation routes: `{"error":{code,message}}` for scripts and clients,
 * and for a browser tab the same words on a page styled like the dashboard, with the stable code and
 * the next step (the project's Workstation card, or trying the same address again).
 */
export function sendRefusal(res: ServerResponse, status: number, code: string, message: string, headers: Record<string, string> = {}): void {
  const req = res.req as IncomingMessage | undefined
  if (!navigation(req)) {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', ...headers })
    return void res.end(JSON.stringify({ error: { code, message } }))
  }
  const title = status >= 500 ? 'Something went wrong' : (TITLES[status] ?? 'Request refused')
  const again = req?.method === 'GET' && req.url?.startsWith(PREFIX) ? html` or <a href="${req.url}">try this address again</a>` : ''
  res.writeHead(status, { ...headers, 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', 'content-security-policy': STANDALONE_POLICY, 'x-content-type-options': 'nosniff' })
  res.end(standalonePage(title, html`<section class="card signin"><h1>${title}</h1>
    <p>${message.charAt(0).toUpperCase()}${message.slice(1)} <span class="muted">(${status} <code>${code}</code>)</span>.</p>
    <p>Next: open the project's page in the tollgate dashboard, whose Workstation card shows its state and starts, links or opens it${again}.</p></section>`, PUBLIC_ASSETS))
}
