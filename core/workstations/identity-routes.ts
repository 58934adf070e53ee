/**
 * The signed-in user's identity-provider link, on the admin API (a session of a tollgate user; the
 * admin bearer token is nobody's account; CSRF checked by the admin listener before this runs):
 *
 *   GET    /admin/account/identity        { linked, identity? }
 *   POST   /admin/account/identity/link   { authorizeUrl }: the browser goes there to sign in with
 *                                         the provider; the callback stores the link. Optional JSON
 *                                         body { returnTo: "/dashboard/..." }: where the callback
 *                                         sends the browser afterwards (on the caller's origin).
 *   DELETE /admin/account/identity        unlinks; 404 identity_not_linked when there was none
 */
import { createHash, randomBytes } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import type { TLSSocket } from 'node:tls'
import type { AdminPrincipal } from '../accounts/authenticate.ts'
import type { IdentityLinks } from './identity-links.ts'
import { SignInError } from './oidc.ts'
import { LINK_COOKIE, LINK_COOKIE_PATH, type WorkstationPublicRoutes } from './public-routes.ts'
import type { AdminAnswer } from './admin-routes.ts'

const IDENTITY = '/admin/account/identity'
const LINK = '/admin/account/identity/link'
const ORIGIN = /^https?:\/\/[A-Za-z0-9.\-[\]:]{1,200}$/
const DASHBOARD_PATH = /^\/dashboard(?:\/[A-Za-z0-9_.~%\-/]*)?$/

export interface IdentityRoutesDeps {
  links: IdentityLinks
  routes: WorkstationPublicRoutes
  /** Base URL of the public listener (where the OIDC callback lands). */
  publicBase(): string
}

const error = (status: number, code: string, message: string): AdminAnswer => ({ status, body: { error: { code, message } } })

async function readJson(req: IncomingMessage, limit = 4096): Promise<unknown> {
  let size = 0
  const chunks: Buffer[] = []
  for await (const chunk of req) {
    size += (chunk as Buffer).length
    if (size > limit) throw new SignInError(400, 'body_too_large', `the body must be under ${limit} bytes`)
    chunks.push(chunk as Buffer)
  }
  const text = Buffer.concat(chunks).toString('utf8').trim()
  if (text === '') return {}
  try {
    return JSON.parse(text)
  } catch {
    throw new SignInError(400, 'invalid_json', 'the body must be JSON')
  }
}

/** The account identity routes; undefined for other paths. */
export async function identityAdminRoute(deps: IdentityRoutesDeps, req: IncomingMessage, url: URL, principal: AdminPrincipal): Promise<AdminAnswer | undefined> {
  const path = url.pathname.replace(/\/$/, '')
  if (path !== IDENTITY && path !== LINK) return undefined
  if (principal.kind !== 'session') return error(403, 'account_session_required', 'identity links belong to a signed-in user: sign in (POST /admin/session), the admin token has no account')
  const userId = principal.user.id
  const method = req.method ?? 'GET'
  if (path === IDENTITY) {
    req.resume()
    if (method === 'GET') {
      const link = await deps.links.linkOf(userId)
      return { status: 200, body: link ? { linked: true, identity: link } : { linked: false } }
    }
    if (method === 'DELETE') {
      if (!(await deps.links.unlink(userId))) return error(404, 'identity_not_linked', 'no identity-provider account is linked to this user')
      return { status: 200, body: { linked: false } }
    }
    return error(405, 'method_not_allowed', `${IDENTITY} allows GET, DELETE`)
  }
  if (method !== 'POST') return (req.resume(), error(405, 'method_not_allowed', `${LINK} allows POST`))
  try {
    const body = (await readJson(req)) as { returnTo?: unknown }
    let returnTo: string | undefined
    if (body && typeof body === 'object' && body.returnTo !== undefined) {
      const origin = req.headers.origin
      if (typeof body.returnTo !== 'string' || !DASHBOARD_PATH.test(body.returnTo)) return error(400, 'invalid_body', 'returnTo must be a dashboard path such as /dashboard/projects/p1')
      if (typeof origin !== 'string' || !ORIGIN.test(origin)) return error(400, 'invalid_header', 'returnTo needs the request to carry an Origin header (a browser sends it)')
      returnTo = `${origin}${body.returnTo}`
    }
    // The browser that asked gets a secret cookie; the callback requires it (see public-routes.ts).
    const binding = randomBytes(32).toString('base64url')
    const authorizeUrl = await deps.routes.beginLink(userId, deps.publicBase(), returnTo, createHash('sha256').update(binding).digest('hex'))
    const secure = (req.socket as TLSSocket).encrypted ? '; Secure' : ''
    const cookie = `${LINK_COOKIE}=${binding}; Path=${LINK_COOKIE_PATH}; Max-Age=600; HttpOnly; SameSite=Lax${secure}`
    return { status: 200, body: { authorizeUrl }, headers: { 'set-cookie': cookie } }
  } catch (failure) {
    if (failure instanceof SignInError) return error(failure.status, failure.code, failure.message)
    throw failure
  }
}
