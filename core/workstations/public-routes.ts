/**
 * The workstation's face on the public listener, under `/workstations/`:
 *
 *   GET /workstations/_auth/login?project=ID   starts the OpenID Connect sign-in
 *   GET /workstations/_auth/callback           completes it, sets the session cookie, goes back
 *   *   /workstations/:id/...                  the project's workstation, HTTP and WebSocket
 *
 *   GET /workstations/_auth/linked             where a link sign-in ends when no dashboard page was named
 *   POST /workstations/_auth/logout            ends the session (Origin must be the public origin)
 *
 * Who passes: an identity session whose IdP account a tollgate user linked to their account (an
 * OIDC sign-in started from their admin session, `POST /admin/account/identity/link`) passes only
 * if that user may reach the project (its owner, or an operator). An identity no user linked falls
 * back to the operator-named `settings.workstationOwner` of the project, if any. So a link always
 * decides for the identity it covers: linked to a user without access means refused, even when the
 * same account is named as `workstationOwner`. The session cookie is removed before the request
 * reaches the workstation. Traffic counts as activity for the idle auto-stop.
 */
import { createHash, randomBytes } from 'node:crypto'
import { request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http'
import { connect } from 'node:net'
import type { Duplex } from 'node:stream'
import type { Logger } from 'pino'
import { IdentitySessions, SESSION_COOKIE, sameIdentity, type OwnerIdentities } from './access.ts'
import { IdentityTakenError, type IdentityLinks } from './identity-links.ts'
import { OidcClient, SignInError } from './oidc.ts'
import type { WorkstationService } from './service.ts'
import { IDE_PATH } from './ide.ts'
import { runInBackground } from '../proxy/resilience.ts'
import { HOP, ideTarget, socketOf, upstreamHeaders } from './proxy-target.ts'
import { bindingMatches, cookieOf, LINK_COOKIE, LINK_COOKIE_PATH, linkedPage, LOGIN_COOKIE, publicAsset, sendRefusal, SlidingCounter } from './sign-in-cookies.ts'

export { LINK_COOKIE, LINK_COOKIE_PATH, LOGIN_COOKIE } from './sign-in-cookies.ts'

export interface PublicRoutesOptions {
  service: WorkstationService
  oidc?: OidcClient
  sessions: IdentitySessions
  owners: OwnerIdentities
  /** IdP accounts linked to tollgate users. */
  links: IdentityLinks
  /** Whether a tollgate user may open the project's workstation (owner of the project, or operator). */
  userMayOpen(userId: string, projectId: string): Promise<boolean>
  log: Logger
  /** Base URL browsers reach the public listener at (for the OIDC redirect); default: from Host. */
  publicUrl?: string
}

const PREFIX = '/workstations/'

interface Refusal { status: number; code: string; message: string; location?: string }
/** Where a request goes: the socket, the path there, and whether it is the IDE. */
interface Routed { target: string; path: string; projectId: string; ide?: boolean }

/** A refusal: JSON for a client, a page with the next step for a browser tab (sign-in-cookies.ts). */
const sendJson = sendRefusal

/** An open proxied connection (a WebSocket or an HTTP exchange in flight) and how to cut it. */
interface OpenConnection {
  projectId: string
  req: IncomingMessage
  cut(): void
}

/** How often open connections are authorized again (revocation closes them within this + one check). */
const RECHECK_MS = 1_000
/** Sign-in starts allowed per client address, and overall, per minute (each writes a pending record). */
const LOGIN_PER_CLIENT_PER_MINUTE = 10
const LOGIN_PER_MINUTE = 120

export class WorkstationPublicRoutes {
  private readonly open = new Set<OpenConnection>()
  private readonly timer: NodeJS.Timeout
  private readonly sweeper: NodeJS.Timeout
  private checking = false
  private readonly logins = new SlidingCounter(60_000)

  constructor(private readonly options: PublicRoutesOptions) {
    this.timer = setInterval(() => void this.recheck(), RECHECK_MS)
    this.timer.unref()
    // The sweep deletes expired pending sign-ins from the store: a store outage is counted and logged once.
    this.sweeper = setInterval(() => void runInBackground('workstation-sign-in-sweep', () => this.options.oidc?.sweep(), this.options.log), 60_000)
    this.sweeper.unref()
  }

  /** Stops the checks and cuts every proxied connection (the gateway is stopping). */
  close(): void {
    clearInterval(this.timer)
    clearInterval(this.sweeper)
    for (const connection of this.open) connection.cut()
    this.open.clear()
  }

  /** Number of proxied connections open now (tests, metrics). */
  get openConnections(): number {
    return this.open.size
  }

  /**
   * Authorizes every open connection again: a revocation (feature off, identity unlinked, user
   * removed or no longer on the project, session ended or expired) cuts what is already open.
   */
  private async recheck(): Promise<void> {
    if (this.checking || this.open.size === 0) return
    this.checking = true
    try {
      for (const connection of [...this.open]) {
        const refused = await this.authorize(connection.req, connection.projectId).catch(() => undefined)
        if (refused) {
          this.options.log.info({ projectId: connection.projectId, code: refused.code }, 'workstation connection revoked')
          this.open.delete(connection)
          connection.cut()
        }
      }
    } finally {
      this.checking = false
    }
  }

  private track(connection: OpenConnection, closed: { once(event: 'close', listener: () => void): unknown }): void {
    this.open.add(connection)
    closed.once('close', () => this.open.delete(connection))
  }

  /** Whether `url` belongs here. */
  static owns(url: string | undefined): boolean {
    return url !== undefined && (url === '/workstations' || url.startsWith(PREFIX))
  }

  /** Answers a request under `/workstations/`. Never throws. */
  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      const url = new URL(req.url ?? '/', 'http://gateway')
      if (url.pathname === '/workstations/_auth/login') return await this.login(req, res, url)
      if (url.pathname === '/workstations/_auth/callback') return await this.callback(req, res, url)
      if (url.pathname === '/workstations/_auth/linked') return linkedPage(res)
      if ((req.method === 'GET' || req.method === 'HEAD') && publicAsset(res, url.pathname)) return
      if (url.pathname === '/workstations/_auth/logout') return await this.logout(req, res)
      const routed = await this.route(req, url)
      if ('status' in routed) {
        if (routed.location) return void res.writeHead(302, { location: routed.location, 'cache-control': 'no-store' }).end()
        return sendJson(res, routed.status, routed.code, routed.message)
      }
      this.forward(req, res, routed)
    } catch (error) {
      this.options.log.error({ err: error }, 'workstation route failed')
      if (!res.headersSent) sendJson(res, 500, 'internal_error', 'internal error')
      else res.destroy()
    }
  }

  /** A WebSocket (or other) upgrade under `/workstations/:id/`. */
  async upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    socket.on('error', () => socket.destroy())
    const refuse = (status: number, code: string, message: string) => {
      const body = JSON.stringify({ error: { code, message } })
      socket.end(`HTTP/1.1 ${status} ${code}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`)
    }
    try {
      // A page of another origin must not open a shell with the user's cookies (cross-site
      // WebSocket hijacking): browsers always send Origin on a WebSocket handshake.
      const expected = this.publicOrigin(req)
      if (req.headers.origin !== expected) return refuse(403, 'workstation_origin_refused', `the WebSocket must come from ${expected} (Origin ${JSON.stringify(req.headers.origin ?? null)})`)
      const routed = await this.route(req, new URL(req.url ?? '/', 'http://gateway'))
      if ('status' in routed) return refuse(routed.status === 302 ? 401 : routed.status, routed.code, routed.message)
      const upstream = connect(socketOf(routed.target))
      upstream.on('error', () => socket.destroy())
      socket.on('close', () => upstream.destroy())
      this.track({ projectId: routed.projectId, req, cut: () => { socket.destroy(); upstream.destroy() } }, socket)
      upstream.on('connect', () => {
        const headers = { ...upstreamHeaders(req), ...this.hostHeaders(req, routed.ide) }
        const lines = [`${req.method} ${routed.path} HTTP/1.1`, 'connection: Upgrade', `upgrade: ${req.headers.upgrade ?? 'websocket'}`]
        for (const [name, value] of Object.entries(headers)) for (const v of Array.isArray(value) ? value : [value]) lines.push(`${name}: ${v}`)
        upstream.write(`${lines.join('\r\n')}\r\n\r\n`)
        if (head.length) upstream.write(head)
        let lastTouch = 0
        socket.on('data', () => {
          if (Date.now() - lastTouch > 5_000) { lastTouch = Date.now(); void this.options.service.touch(routed.projectId).catch(() => {}) }
        })
        upstream.pipe(socket)
        socket.pipe(upstream)
      })
    } catch (error) {
      this.options.log.error({ err: error }, 'workstation upgrade failed')
      refuse(500, 'internal_error', 'internal error')
    }
  }

  /** Decides where a workstation request goes, or why not. */
  private async route(req: IncomingMessage, url: URL): Promise<Refusal | Routed> {
    const rest = url.pathname.slice(PREFIX.length)
    const slash = rest.indexOf('/')
    let projectId: string
    try {
      projectId = decodeURIComponent(slash < 0 ? rest : rest.slice(0, slash))
    } catch {
      return { status: 400, code: 'invalid_path', message: 'the project id in the path is not valid percent-encoding' }
    }
    if (!projectId) return { status: 404, code: 'route_not_found', message: 'name a project: /workstations/:projectId/' }
    if (slash < 0) return { status: 302, code: 'redirect', message: '', location: `${PREFIX}${encodeURIComponent(projectId)}/${url.search}` }
    const refused = await this.authorize(req, projectId)
    if (refused) return refused
    const target = await this.options.service.target(projectId)
    if (!target) {
      const view = await this.options.service.view(projectId)
      const state = (view.body as { state?: string }).state ?? 'absent'
      return { status: 409, code: 'workstation_not_ready', message: `the workstation is ${state}, not ready` }
    }
    void this.options.service.touch(projectId).catch(() => {})
    const path = url.pathname.slice(PREFIX.length + slash)
    if (path === IDE_PATH.slice(0, -1)) return { status: 302, code: 'redirect', message: '', location: `${PREFIX}${encodeURIComponent(projectId)}${IDE_PATH}${url.search}` }
    // The IDE (code-server, ide.ts) listens on its own socket next to the terminal's; its URLs are
    // relative, so it is served with the prefix removed.
    if (path.startsWith(IDE_PATH)) return { target: ideTarget(target), path: path.slice(IDE_PATH.length - 1) + url.search, projectId, ide: true }
    return { target, path: path + url.search, projectId }
  }

  /** Whether the request's session may use the project's workstation now; the refusal otherwise. */
  private async authorize(req: IncomingMessage, projectId: string): Promise<Refusal | undefined> {
    const view = await this.options.service.view(projectId)
    if (view.status !== 200) {
      const { error } = view.body as { error: { code: string; message: string } }
      return { status: view.status, code: error.code, message: error.message }
    }
    if (!this.options.service.enabled(projectId)) return { status: 403, code: 'workstation_not_enabled', message: `the workstation feature is not enabled for project ${projectId}` }
    const identity = await this.options.sessions.identityOf(req)
    if (!identity) {
      const login = `${PREFIX}_auth/login?project=${encodeURIComponent(projectId)}`
      const wantsPage = req.method === 'GET' && (req.headers.accept ?? '').includes('text/html')
      return wantsPage && this.options.oidc
        ? { status: 302, code: 'sign_in', message: '', location: login }
        : { status: 401, code: 'workstation_sign_in_required', message: `sign in with the identity provider first: ${login}` }
    }
    const linkedUser = await this.options.links.userOf(identity)
    if (linkedUser !== undefined) {
      if (!(await this.options.userMayOpen(linkedUser, projectId))) {
        return { status: 403, code: 'workstation_identity_not_permitted', message: `the tollgate user linked to this identity-provider account may not open project ${projectId}'s workstation` }
      }
    } else {
      const owner = await this.options.owners.ownerOf(projectId)
      if (!owner) return { status: 403, code: 'workstation_identity_not_linked', message: 'this identity-provider account is linked to no tollgate user: link it from the dashboard (POST /admin/account/identity/link)' }
      if (!sameIdentity(identity, owner)) return { status: 403, code: 'workstation_identity_mismatch', message: 'this workstation belongs to another identity-provider account' }
    }
    return undefined
  }

  /**
   * Host headers for the workstation. code-server refuses a WebSocket whose Origin is not its
   * (forwarded) host; the gateway has checked the Origin against the public origin already, so the
   * IDE is told that host, never one the client sent.
   */
  private hostHeaders(req: IncomingMessage, ide: boolean | undefined): Record<string, string> {
    if (!ide) return { host: 'workstation' }
    const origin = new URL(this.publicOrigin(req))
    return { host: 'workstation', 'x-forwarded-host': origin.host, 'x-forwarded-proto': origin.protocol.slice(0, -1) }
  }

  /** The origin browsers reach the public listener at: `publicUrl`'s, else the request's Host over this listener's scheme. */
  private publicOrigin(req: IncomingMessage): string {
    if (this.options.publicUrl) return new URL(this.options.publicUrl).origin
    const scheme = (req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http'
    return `${scheme}://${req.headers.host ?? ''}`
  }

  private forward(req: IncomingMessage, res: ServerResponse, { target, path, projectId, ide }: Routed): void {
    const upstream = httpRequest({ socketPath: socketOf(target), method: req.method, path, headers: { ...upstreamHeaders(req), ...this.hostHeaders(req, ide) } }, (answer) => {
      const headers: Record<string, string | string[]> = {}
      // The workstation is the tenant's: it sets no cookie on the gateway's origin (no cookie
      // tossing over the session cookies) and is never framed by another site.
      for (const [name, value] of Object.entries(answer.headers)) if (value !== undefined && !HOP.has(name) && name !== 'set-cookie') headers[name] = value
      headers['x-frame-options'] = 'SAMEORIGIN'
      headers['x-content-type-options'] = 'nosniff'
      res.writeHead(answer.statusCode ?? 502, headers)
      answer.pipe(res)
    })
    this.track({ projectId, req, cut: () => { upstream.destroy(); res.destroy() } }, res)
    upstream.on('error', () => {
      if (!res.headersSent) sendJson(res, 502, 'workstation_unavailable', `the workstation of ${projectId} did not answer`)
      else res.destroy()
    })
    res.on('close', () => upstream.destroy())
    req.pipe(upstream)
  }

  private redirectUri(req: IncomingMessage): string {
    return this.callbackUrl(this.options.publicUrl ?? `http://${req.headers.host ?? '127.0.0.1'}`)
  }

  private callbackUrl(base: string): string {
    return `${base.replace(/\/$/, '')}${PREFIX}_auth/callback`
  }

  /**
   * Starts linking an IdP account to tollgate user `userId` (the caller of the admin API, already
   * authenticated with its CSRF token checked): the provider's authorize URL. The callback lands on
   * the public listener at `publicBase` (or `publicUrl` when configured) and goes on to `returnTo`.
   */
  async beginLink(userId: string, publicBase: string, returnTo: string | undefined, bindingHash: string): Promise<string> {
    if (!this.options.oidc) throw new SignInError(400, 'oidc_not_configured', 'no identity provider is configured (workstations.oidc)')
    return this.options.oidc.begin(this.callbackUrl(this.options.publicUrl ?? publicBase), returnTo ?? `${PREFIX}_auth/linked`, userId, bindingHash)
  }

  /** POST: ends the session; its open workstation connections are cut at the next check (≤ 2 s). */
  private async logout(req: IncomingMessage, res: ServerResponse): Promise<void> {
    req.resume()
    if (req.method !== 'POST') return sendJson(res, 405, 'method_not_allowed', '/workstations/_auth/logout allows POST')
    if (req.headers.origin !== this.publicOrigin(req)) return sendJson(res, 403, 'workstation_origin_refused', `sign-out must come from ${this.publicOrigin(req)}`)
    const ended = await this.options.sessions.end(req)
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', 'set-cookie': `${SESSION_COOKIE}=; Path=/workstations/; Max-Age=0; HttpOnly; SameSite=Lax` })
    res.end(JSON.stringify({ signedOut: ended }))
  }

  private async login(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    if (!this.options.oidc) return sendJson(res, 404, 'oidc_not_configured', 'no identity provider is configured (workstations.oidc)')
    const projectId = url.searchParams.get('project') ?? ''
    if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/.test(projectId)) return sendJson(res, 400, 'invalid_project', 'query parameter project must name a project')
    // Anonymous, and each start stores a pending record: bounded per client and overall.
    const client = req.socket.remoteAddress ?? ''
    if (!this.logins.take(`ip:${client}`, LOGIN_PER_CLIENT_PER_MINUTE) || !this.logins.take('all', LOGIN_PER_MINUTE)) {
      return sendJson(res, 429, 'sign_in_rate_limited', 'too many sign-in starts; retry in a minute', { 'retry-after': '60' })
    }
    try {
      // The browser that starts the sign-in gets a secret cookie; the callback requires it (login CSRF).
      const binding = randomBytes(32).toString('base64url')
      const location = await this.options.oidc.begin(this.redirectUri(req), `${PREFIX}${encodeURIComponent(projectId)}/`, undefined, undefined, createHash('sha256').update(binding).digest('hex'))
      const secure = (req.socket as { encrypted?: boolean }).encrypted ? '; Secure' : ''
      res.writeHead(302, { location, 'cache-control': 'no-store', 'set-cookie': `${LOGIN_COOKIE}=${binding}; Path=${LINK_COOKIE_PATH}; Max-Age=600; HttpOnly; SameSite=Lax${secure}` }).end()
    } catch (error) {
      if (error instanceof SignInError) return sendJson(res, error.status, error.code, error.message)
      throw error
    }
  }

  private async callback(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    if (!this.options.oidc) return sendJson(res, 404, 'oidc_not_configured', 'no identity provider is configured (workstations.oidc)')
    try {
      const { identity, returnTo, linkUserId, linkBinding, loginBinding } = await this.options.oidc.complete(url.searchParams)
      if (linkUserId === undefined && (!loginBinding || !bindingMatches(cookieOf(req, LOGIN_COOKIE), loginBinding))) {
        // A sign-in someone else started (login CSRF: the victim's browser would end up in the attacker's session).
        return sendJson(res, 403, 'sign_in_not_started_here', 'finish signing in in the browser that started it; start again')
      }
      if (linkUserId !== undefined) {
        // Only the browser that started the link may finish it: else an attacker could start a link
        // for their own account and have a victim sign in, binding the victim's IdP account to them.
        if (!linkBinding || !bindingMatches(cookieOf(req, LINK_COOKIE), linkBinding)) {
          // The usual cause is not an attack but a host mismatch: the link cookie is set on the host
          // the admin page was opened on (localhost:8081), the callback lands on the public URL's host.
          const host = this.options.publicUrl ? new URL(this.options.publicUrl).hostname : req.headers.host?.split(':')[0]
          return sendJson(res, 403, 'link_not_started_here', `this browser did not send the tollgate_link cookie set when the link started: start the link from an admin page on the same host as the callback (${host ?? 'the public URL'}, not e.g. localhost for 127.0.0.1) in the same browser, then try again`)
        }
        try {
          await this.options.links.link(linkUserId, identity)
        } catch (error) {
          if (error instanceof IdentityTakenError) return sendJson(res, 409, error.code, error.message)
          throw error
        }
        this.options.log.info({ issuer: identity.issuer, userId: linkUserId }, 'identity-provider account linked')
      }
      const cookie = await this.options.sessions.create(identity)
      this.options.log.info({ issuer: identity.issuer }, 'workstation identity signed in')
      const cookies = [cookie, `${linkUserId !== undefined ? LINK_COOKIE : LOGIN_COOKIE}=; Path=${LINK_COOKIE_PATH}; Max-Age=0; HttpOnly; SameSite=Lax`]
      res.writeHead(302, { location: returnTo, 'set-cookie': cookies, 'cache-control': 'no-store' }).end()
    } catch (error) {
      if (error instanceof SignInError) return sendJson(res, error.status, error.code, error.message)
      throw error
    }
  }
}
