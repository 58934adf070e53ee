/**
 * Who is calling the admin API: the admin bearer token (an operator, the machine actor) or a
 * signed-in user's session cookie; sign-in, sign-out, CSRF and project access rules.
 *
 * Session token: 32 random bytes (base64url) in the `tollgate_session` cookie; the store keeps only
 * its sha256, so a leaked database signs nobody in. The CSRF token is derived from the session
 * token (sha256 with a fixed label): stable for the session, unknowable without the cookie's value,
 * and it needs no storage. A session ends at its absolute expiry or after `idleTimeoutSeconds`
 * without a request; an expired one is deleted when it is presented.
 */
import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import type { TLSSocket } from 'node:tls'
import type { AdminSessionsConfig } from '../config/types.ts'
import { GatewayError } from '../proxy/errors.ts'
import { credentialMatches, hashCredential } from '../projects/projects.ts'
import type { AccountsStore, Role, SessionRecord, UserRecord } from '../store/accounts/types.ts'
import type { Store } from '../store/types.ts'
import { verifyPassword } from './password.ts'

export const SESSION_COOKIE = 'tollgate_session'
export const CSRF_HEADER = 'x-csrf-token'

/** A user as the admin API shows it (never the password hash). */
export interface AdminUser {
  id: string
  email: string
  role: Role
  projects: string[]
}

/**
 * The audit actor of the admin bearer token. The token is one shared secret, so the principal is
 * the token itself, whoever holds it: a name the caller sends (`x-admin-actor`) is recorded as a
 * note beside it and can never pass for a user (a user's actor is an email, which this is not).
 */
export const TOKEN_ACTOR = 'admin-token'
/** The header a caller may use to add a note (who, on whose behalf) to the audit entries it makes. */
export const ACTOR_NOTE_HEADER = 'x-admin-actor'

export type AdminPrincipal =
  | { kind: 'token'; role: 'operator'; actor: typeof TOKEN_ACTOR; note?: string }
  | {
      kind: 'session'
      role: Role
      /** The user's email: the audit trail's actor. */
      actor: string
      /** The caller's `x-admin-actor`, recorded beside the actor, never in its place. */
      note?: string
      user: AdminUser
      session: { id: string; csrfToken: string; createdAt: number; expiresAt: number; idleExpiresAt: number }
    }

export interface AccountsDeps {
  store: Pick<Store, 'takeToken'> & { accounts: AccountsStore }
  sessions: () => AdminSessionsConfig
  /** `sha256:<hex>` of the admin bearer token, if one is configured. */
  tokenHash: () => string | undefined
  clock?: () => number
}

const TOKEN_SHAPE = /^[A-Za-z0-9_-]{43}$/
const NOTE = /^[\x21-\x7e][\x20-\x7e]{0,127}$/
const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,190}$/
const STATE_CHANGING = new Set(['POST', 'PUT', 'PATCH', 'DELETE'])

/** Normalises and checks an email address; undefined when it is not one. */
export function normaliseEmail(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined
  const email = value.trim().toLowerCase()
  return EMAIL.test(email) ? email : undefined
}

export function userView(user: UserRecord): AdminUser {
  return { id: user.id, email: user.email, role: user.role, projects: [...user.projects] }
}

function csrfFor(token: string): string {
  return createHash('sha256').update('tollgate-csrf:' + token).digest('base64url')
}

function sameText(a: string, b: string): boolean {
  const x = createHash('sha256').update(a).digest()
  const y = createHash('sha256').update(b).digest()
  return timingSafeEqual(x, y) && a.length === b.length
}

/** The value of one cookie of a request, if present. */
export function cookieValue(req: IncomingMessage, name: string): string | undefined {
  const header = req.headers.cookie
  if (!header) return undefined
  for (const part of header.split(';')) {
    const at = part.indexOf('=')
    if (at > 0 && part.slice(0, at).trim() === name) return part.slice(at + 1).trim()
  }
  return undefined
}

/** The caller's `x-admin-actor` note, if it sent one; 400 when it is not short printable text. */
function actorNote(req: IncomingMessage): string | undefined {
  const value = req.headers[ACTOR_NOTE_HEADER]
  if (value === undefined) return undefined
  if (typeof value !== 'string' || !NOTE.test(value)) throw new GatewayError(400, 'invalid_header', `${ACTOR_NOTE_HEADER} must be 1 to 128 printable ASCII characters`)
  return value
}

/** Who an admin request's changes are recorded as: the principal, and the caller's note beside it. */
export function auditActor(principal: AdminPrincipal): { actor: string; note?: string } {
  return principal.note === undefined ? { actor: principal.actor } : { actor: principal.actor, note: principal.note }
}

const unauthorised = (code: string, message: string) => new GatewayError(401, code, message, { headers: { 'www-authenticate': 'Bearer' } })

export class Accounts {
  readonly #deps: AccountsDeps
  readonly #clock: () => number

  constructor(deps: AccountsDeps) {
    this.#deps = deps
    this.#clock = deps.clock ?? Date.now
  }

  /** How long an unused session lives. */
  get idleTimeoutMs(): number {
    return this.#deps.sessions().idleTimeoutSeconds * 1000
  }

  get store(): AccountsStore {
    return this.#deps.store.accounts
  }

  /**
   * Signs a user in. Unknown email and wrong password answer the same 401 after the same scrypt
   * work. Attempts are limited per client IP and per email (token buckets), before any password
   * work; a refusal is 429 with Retry-After.
   */
  async signIn(emailInput: unknown, password: unknown, ip: string): Promise<{ token: string; principal: Extract<AdminPrincipal, { kind: 'session' }> }> {
    const email = normaliseEmail(emailInput)
    if (email === undefined) throw new GatewayError(400, 'invalid_body', 'email must be an email address')
    if (typeof password !== 'string' || password.length === 0 || password.length > 1024) throw new GatewayError(400, 'invalid_body', 'password must be a non-empty string')
    const { perAccount, perIp } = this.#deps.sessions().signInLimit
    await this.#limit(`signin:ip:${ip}`, perIp)
    await this.#limit(`signin:account:${email}`, perAccount)
    const user = await this.store.userByEmail(email)
    const ok = await verifyPassword(password, user?.passwordHash)
    if (!ok || !user) throw unauthorised('invalid_credentials', 'wrong email or password')
    const now = this.#clock()
    const config = this.#deps.sessions()
    // Expired sessions are swept here: sign-ins are rare enough and this keeps the table small.
    await this.store.deleteExpiredSessions(now, config.idleTimeoutSeconds * 1000).catch(() => 0)
    const token = randomBytes(32).toString('base64url')
    const session: SessionRecord = { id: randomUUID(), tokenHash: hashCredential(token), userId: user.id, createdAt: now, lastSeenAt: now, expiresAt: now + config.absoluteTimeoutSeconds * 1000 }
    await this.store.createSession(session)
    return { token, principal: this.#sessionPrincipal(user, session, token) }
  }

  /**
   * The caller, or undefined when the request carries neither a bearer token nor a session cookie.
   * A credential that is present but wrong, forged or expired throws 401.
   */
  async principalOf(req: IncomingMessage): Promise<AdminPrincipal | undefined> {
    const header = req.headers.authorization
    if (header !== undefined) {
      const token = header.startsWith('Bearer ') ? header.slice(7) : ''
      const tokenHash = this.#deps.tokenHash()
      if (!tokenHash || token === '' || !credentialMatches(token, tokenHash)) throw unauthorised('admin_unauthorized', 'a valid admin bearer token is required')
      const note = actorNote(req)
      return note === undefined ? { kind: 'token', role: 'operator', actor: TOKEN_ACTOR } : { kind: 'token', role: 'operator', actor: TOKEN_ACTOR, note }
    }
    const token = cookieValue(req, SESSION_COOKIE)
    if (token === undefined) return undefined
    if (!TOKEN_SHAPE.test(token)) throw unauthorised('session_invalid', 'the session cookie is not valid; sign in again')
    const session = await this.store.sessionByTokenHash(hashCredential(token))
    if (!session) throw unauthorised('session_invalid', 'the session cookie is not valid; sign in again')
    const now = this.#clock()
    const idleMs = this.#deps.sessions().idleTimeoutSeconds * 1000
    if (now >= session.expiresAt || now >= session.lastSeenAt + idleMs) {
      await this.store.deleteSession(session.id)
      throw unauthorised('session_expired', 'the session has expired; sign in again')
    }
    const user = await this.store.userById(session.userId)
    if (!user) throw unauthorised('session_invalid', 'the session cookie is not valid; sign in again')
    // Activity is recorded at most every few seconds: idle expiry needs no finer grain.
    if (now - session.lastSeenAt >= Math.min(5000, idleMs / 4)) {
      await this.store.touchSession(session.id, now)
      session.lastSeenAt = now
    }
    const principal = this.#sessionPrincipal(user, session, token)
    const note = actorNote(req)
    if (note !== undefined) principal.note = note
    return principal
  }

  /** The caller; 401 when the request has no credential at all. */
  async authenticate(req: IncomingMessage): Promise<AdminPrincipal> {
    const principal = await this.principalOf(req)
    if (principal) return principal
    throw unauthorised('admin_unauthorized', 'sign in (POST /admin/session) or send a valid admin bearer token')
  }

  /** A session's state-changing request must carry its CSRF token; bearer-token requests are exempt. */
  requireCsrf(req: IncomingMessage, principal: AdminPrincipal): void {
    if (principal.kind !== 'session' || !STATE_CHANGING.has(req.method ?? 'GET')) return
    const presented = req.headers[CSRF_HEADER]
    if (typeof presented !== 'string' || presented === '') throw new GatewayError(403, 'csrf_required', `the ${CSRF_HEADER} header is required (its value is in GET /admin/session)`)
    if (!sameText(presented, principal.session.csrfToken)) throw new GatewayError(403, 'csrf_invalid', `the ${CSRF_HEADER} header does not match this session`)
  }

  /** Operators reach every project; owners only theirs. */
  canAccessProject(principal: AdminPrincipal, projectId: string): boolean {
    return principal.role === 'operator' || (principal.kind === 'session' && principal.user.projects.includes(projectId))
  }

  /**
   * Re-checks the signed-in user's password (feature toggles); the same scrypt cost either way.
   * Each check spends a sign-in attempt of the account, so a stolen session cannot guess it freely.
   */
  async passwordMatches(principal: AdminPrincipal, password: string): Promise<boolean> {
    if (principal.kind !== 'session') return false
    await this.#limit(`signin:account:${principal.user.email}`, this.#deps.sessions().signInLimit.perAccount)
    const user = await this.store.userById(principal.user.id)
    return verifyPassword(password, user?.passwordHash)
  }

  /** The Set-Cookie value of a new session: Secure over TLS or when configured. */
  sessionCookie(req: IncomingMessage, token: string): string {
    return this.#cookie(req, token, this.#deps.sessions().absoluteTimeoutSeconds)
  }

  /** The Set-Cookie value that removes the session cookie. */
  clearedCookie(req: IncomingMessage): string {
    return this.#cookie(req, '', 0)
  }

  /** Takes one attempt from a bucket of `capacity` refilled over the configured window; 429 when empty. */
  async #limit(key: string, capacity: number): Promise<void> {
    const decision = await this.#deps.store.takeToken(key, capacity, capacity / this.#deps.sessions().signInLimit.windowSeconds)
    if (!decision.allowed) {
      const retry = Math.max(1, Math.ceil(decision.retryAfterSeconds))
      throw new GatewayError(429, 'sign_in_rate_limited', `too many password attempts; retry in ${retry} s`, { headers: { 'retry-after': String(retry) } })
    }
  }

  #cookie(req: IncomingMessage, value: string, maxAge: number): string {
    const secure = this.#deps.sessions().secureCookie || (req.socket as TLSSocket).encrypted === true
    return `${SESSION_COOKIE}=${value}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${maxAge}${secure ? '; Secure' : ''}`
  }

  #sessionPrincipal(user: UserRecord, session: SessionRecord, token: string): Extract<AdminPrincipal, { kind: 'session' }> {
    const idleMs = this.#deps.sessions().idleTimeoutSeconds * 1000
    return {
      kind: 'session',
      role: user.role,
      actor: user.email,
      user: userView(user),
      session: {
        id: session.id,
        csrfToken: csrfFor(token),
        createdAt: session.createdAt,
        expiresAt: session.expiresAt,
        idleExpiresAt: Math.min(session.expiresAt, session.lastSeenAt + idleMs),
      },
    }
  }
}
