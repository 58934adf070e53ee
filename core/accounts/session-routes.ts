/**
 * The session endpoints of the admin API:
 *
 *   POST   /admin/session         sign in {email, password} → Set-Cookie + {user, session, csrfToken}
 *   GET    /admin/session         who am I (+ the CSRF token)
 *   DELETE /admin/session         sign out
 *   GET    /admin/sessions        sessions: every one for operators, their own for owners
 *   DELETE /admin/sessions/:id    revoke one (owners: only their own; another's answers 404)
 *
 * Sign-in is the only admin route reachable without a credential.
 */
import type { IncomingMessage } from 'node:http'
import { GatewayError } from '../proxy/errors.ts'
import { parseJson, readBody } from '../proxy/http/body.ts'
import type { AdminPrincipal, Accounts } from './authenticate.ts'

export interface AdminAnswer {
  status?: number
  body: unknown
  headers?: Record<string, string>
}

const iso = (ms: number) => new Date(ms).toISOString()
const SESSION_ID = /^[0-9a-f-]{36}$/

function sessionAnswer(principal: Extract<AdminPrincipal, { kind: 'session' }>): Record<string, unknown> {
  const { session } = principal
  return {
    user: principal.user,
    session: { id: session.id, createdAt: iso(session.createdAt), expiresAt: iso(session.expiresAt), idleExpiresAt: iso(session.idleExpiresAt) },
    csrfToken: session.csrfToken,
  }
}

/** Sign-in: the one route that needs no credential. */
export async function signInRoute(accounts: Accounts, req: IncomingMessage): Promise<AdminAnswer> {
  const raw = await readBody(req, 1 << 14)
  const body = raw.length ? parseJson(raw) : undefined
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new GatewayError(400, 'invalid_body', 'the body must be a JSON object {email, password}')
  const { email, password } = body as Record<string, unknown>
  const { token, principal } = await accounts.signIn(email, password, req.socket.remoteAddress ?? 'unknown')
  return { status: 200, body: sessionAnswer(principal), headers: { 'set-cookie': accounts.sessionCookie(req, token), 'cache-control': 'no-store' } }
}

/** The other session routes for an authenticated caller; undefined for any other path. */
export async function sessionRoutes(accounts: Accounts, req: IncomingMessage, url: URL, principal: AdminPrincipal): Promise<AdminAnswer | undefined> {
  const method = req.method ?? 'GET'
  const path = url.pathname
  if (path === '/admin/session') {
    if (principal.kind !== 'session') throw new GatewayError(400, 'not_a_session', 'this request is authenticated by the admin token, not by a session')
    if (method === 'GET') return { body: sessionAnswer(principal), headers: { 'cache-control': 'no-store' } }
    if (method === 'DELETE') {
      await accounts.store.deleteSession(principal.session.id)
      return { body: { signedOut: true }, headers: { 'set-cookie': accounts.clearedCookie(req) } }
    }
    throw new GatewayError(405, 'method_not_allowed', `${method} is not allowed on /admin/session`, { headers: { allow: 'GET, POST, DELETE' } })
  }
  if (path === '/admin/sessions' && method === 'GET') {
    const own = principal.kind === 'session' && principal.role !== 'operator' ? principal.user.id : undefined
    const [sessions, users] = await Promise.all([accounts.store.listSessions(own), accounts.store.listUsers()])
    const emails = new Map(users.map((u) => [u.id, u.email]))
    const idleMs = accounts.idleTimeoutMs
    return {
      body: {
        sessions: sessions.map((s) => ({
          id: s.id,
          userId: s.userId,
          email: emails.get(s.userId) ?? null,
          createdAt: iso(s.createdAt),
          lastSeenAt: iso(s.lastSeenAt),
          expiresAt: iso(s.expiresAt),
          idleExpiresAt: iso(Math.min(s.expiresAt, s.lastSeenAt + idleMs)),
          current: principal.kind === 'session' && principal.session.id === s.id,
        })),
      },
    }
  }
  const revoke = /^\/admin\/sessions\/([^/]+)$/.exec(path)
  if (revoke && method === 'DELETE') {
    const id = decodeURIComponent(revoke[1])
    const notFound = new GatewayError(404, 'session_not_found', `no session ${SESSION_ID.test(id) ? id : ''}`.trim())
    if (!SESSION_ID.test(id)) throw notFound
    // Owners revoke only their own: another user's session answers exactly like a missing one.
    const mine = principal.kind === 'session' && principal.role !== 'operator' ? principal.user.id : undefined
    const candidates = await accounts.store.listSessions(mine)
    if (!candidates.some((s) => s.id === id)) throw notFound
    await accounts.store.deleteSession(id)
    const own = principal.kind === 'session' && principal.session.id === id
    return { body: { revoked: id }, headers: own ? { 'set-cookie': accounts.clearedCookie(req) } : {} }
  }
  return undefined
}
