/**
 * The workstation's face on the public listener, under `/workstations/`:
 *
 *   GET /workstations/_auth/login?project=ID   starts the OpenID Connect sign-in
 *   GET /workstations/_auth/callback           completes it, sets the session cookie, goes back
 *   *   /workstations/:id/...                  the project's workstation, HTTP and WebSocket
 *
 *   GET /workstations/_auth/linked             where a link sign-in ends when no dashboard page was named
 *
 * Who passes: an identity session whose IdP account a tollgate user linked to their account (an
 * OIDC sign-in started from their admin session, `POST /admin/account/identity/link`) passes only
 * if that user may reach the project (its owner, or an operator). An identity no user linked falls
 * back to the operator-named `settings.workstationOwner` of the project, if any. So a link always
 * decides for the identity it covers: linked to a user without access means refused, even when the
 * same account is named as `workstationOwner`. The session cookie is removed before the request
 * reaches the workstation. Traffic counts as activity for the idle auto-stop.
 */
import { createHash, timingSafeEqual } from 'node:crypto'
import { request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http'
import { connect } from 'node:net'
import type { Duplex } from 'node:stream'
import type { Logger } from 'pino'
import { IdentitySessions, sameIdentity, SESSION_COOKIE, type OwnerIdentities } from './access.ts'
import { SESSION_COOKIE as ADMIN_SESSION_COOKIE } from '../accounts/authenticate.ts'
import { IdentityTakenError, type IdentityLinks } from './identity-links.ts'
import { OidcClient, SignInError } from './oidc.ts'
import type { WorkstationService } from './service.ts'

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
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'proxy-authorization', 'host'])

interface Refusal { status: number; code: string; message: string; location?: string }

function sendJson(res: ServerResponse, status: number, code: string, message: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', ...headers })
  res.end(JSON.stringify({ error: { code, message } }))
}

/** Request headers for the workstation: hop-by-hop and the gateway's session cookies removed. */
function upstreamHeaders(req: IncomingMessage): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {}
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || HOP.has(name)) continue
    if (name === 'cookie') {
      // Cookies ignore ports: on one host the admin listener's session cookie comes along too.
      const rest = String(value).split(';').map((p) => p.trim()).filter((p) => p && !p.startsWith(`${SESSION_COOKIE}=`) && !p.startsWith(`${ADMIN_SESSION_COOKIE}=`))
      if (rest.length) out.cookie = rest.join('; ')
      continue
    }
    out[name] = value
  }
  return out
}

export class WorkstationPublicRoutes {
  constructor(private readonly options: PublicRoutesOptions) {}

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
      const routed = await this.route(req, url)
      if ('status' in routed) {
        if (routed.location) return void res.writeHead(302, { location: routed.location, 'cache-control': 'no-store' }).end()
        return sendJson(res, routed.status, routed.code, routed.message)
      }
      this.forward(req, res, routed.target, routed.path, routed.projectId)
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
      const routed = await this.route(req, new URL(req.url ?? '/', 'http://gateway'))
      if ('status' in routed) return refuse(routed.status === 302 ? 401 : routed.status, routed.code, routed.message)
      const upstream = connect(socketOf(routed.target))
      upstream.on('error', () => socket.destroy())
      socket.on('close', () => upstream.destroy())
      upstream.on('connect', () => {
        const headers = upstreamHeaders(req)
        const lines = [`${req.method} ${routed.path} HTTP/1.1`, 'host: workstation', 'connection: Upgrade', `upgrade: ${req.headers.upgrade ?? 'websocket'}`]
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
  private async route(req: IncomingMessage, url: URL): Promise<Refusal | { target: string; path: string; projectId: string }> {
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
    const view = await this.options.service.view(projectId)
    if (view.status !== 200) {
      const { error } = view.body as { error: { code: string; message: string } }
      return { status: view.status, code: error.code, message: error.message }
    }
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
    const target = await this.options.service.target(projectId)
    if (!target) {
      const state = (view.body as { state: string }).state
      return { status: 409, code: 'workstation_not_ready', message: `the workstation is ${state}, not ready` }
    }
    void this.options.service.touch(projectId).catch(() => {})
    return { target, path: url.pathname.slice(PREFIX.length + slash) + url.search, projectId }
  }

  private forward(req: IncomingMessage, res: ServerResponse, target: string, path: string, projectId: string): void {
    const upstream = httpRequest({ socketPath: socketOf(target), method: req.method, path, headers: { ...upstreamHeaders(req), host: 'workstation' } }, (answer) => {
      const headers: Record<string, string | string[]> = {}
      for (const [name, value] of Object.entries(answer.headers)) if (value !== undefined && !HOP.has(name)) headers[name] = value
      res.writeHead(answer.statusCode ?? 502, headers)
      answer.pipe(res)
    })
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

  private async login(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    if (!this.options.oidc) return sendJson(res, 404, 'oidc_not_configured', 'no identity provider is configured (workstations.oidc)')
    const projectId = url.searchParams.get('project') ?? ''
    if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/.test(projectId)) return sendJson(res, 400, 'invalid_project', 'query parameter project must name a project')
    try {
      const location = await this.options.oidc.begin(this.redirectUri(req), `${PREFIX}${encodeURIComponent(projectId)}/`)
      res.writeHead(302, { location, 'cache-control': 'no-store' }).end()
    } catch (error) {
      if (error instanceof SignInError) return sendJson(res, error.status, error.code, error.message)
      throw error
    }
  }

  private async callback(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    if (!this.options.oidc) return sendJson(res, 404, 'oidc_not_configured', 'no identity provider is configured (workstations.oidc)')
    try {
      const { identity, returnTo, linkUserId, linkBinding } = await this.options.oidc.complete(url.searchParams)
      if (linkUserId !== undefined) {
        // Only the browser that started the link may finish it: else an attacker could start a link
        // for their own account and have a victim sign in, binding the victim's IdP account to them.
        if (!linkBinding || !bindingMatches(cookieOf(req, LINK_COOKIE), linkBinding)) {
          return sendJson(res, 403, 'link_not_started_here', 'finish linking in the browser that started it (POST /admin/account/identity/link sets its tollgate_link cookie); start again')
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
      const cookies = linkUserId !== undefined ? [cookie, `${LINK_COOKIE}=; Path=${LINK_COOKIE_PATH}; Max-Age=0; HttpOnly; SameSite=Lax`] : cookie
      res.writeHead(302, { location: returnTo, 'set-cookie': cookies, 'cache-control': 'no-store' }).end()
    } catch (error) {
      if (error instanceof SignInError) return sendJson(res, error.status, error.code, error.message)
      throw error
    }
  }
}

/**
 * The unix socket of a workstation's server (`unix:/path`). Drivers give no other kind of target:
 * a TCP port on loopback would be open to every local process.
 */
function socketOf(target: string): string {
  if (!target.startsWith('unix:/')) throw new Error(`workstation target ${JSON.stringify(target)} is not a unix socket`)
  return target.slice('unix:'.length)
}

/** The cookie that binds a link sign-in to the browser that started it (set by the admin API's POST …/link). */
export const LINK_COOKIE = 'tollgate_link'
/** Sent only to the sign-in callback: cookies ignore ports, so one set by the admin listener reaches the public one on the same host. */
export const LINK_COOKIE_PATH = `${PREFIX}_auth/`

function cookieOf(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const at = part.indexOf('=')
    if (at > 0 && part.slice(0, at).trim() === name) return part.slice(at + 1).trim()
  }
  return undefined
}

function bindingMatches(presented: string | undefined, expectedHash: string): boolean {
  if (!presented) return false
  const actual = createHash('sha256').update(presented).digest()
  const expected = Buffer.from(expectedHash, 'hex')
  return expected.length === actual.length && timingSafeEqual(actual, expected)
}

/** The end of a link sign-in that named no dashboard page to go back to (no script, no style). */
function linkedPage(res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', 'content-security-policy': "default-src 'none'" })
  res.end('<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Identity linked</title></head><body><h1>Identity linked</h1><p>Your identity-provider account is linked to your tollgate account. You can close this tab.</p></body></html>')
}
