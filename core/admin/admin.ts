/**
 * The admin listener (loopback by default): /healthz, /readyz and /metrics for operators and
 * Prometheus, and the admin API (admin bearer token or a signed-in user's session, with CSRF on
 * changes; owners reach only their projects) to which plugins add routes (usage, ...).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { credentialMatches } from '../projects/projects.ts'
import { Router } from '../proxy/router.ts'
import { GatewayError, errors } from '../proxy/errors.ts'
import { normalisePath } from '../proxy/router.ts'
import { parseJson, readBody } from '../proxy/http/body.ts'
import type { AdminRoute, Table } from '../proxy/table.ts'
import type { StoreHealth } from '../store/types.ts'
import type { Accounts, AdminPrincipal } from '../accounts/authenticate.ts'
import { sessionRoutes, signInRoute } from '../accounts/session-routes.ts'
import { adminOpenApi } from './admin-openapi.ts'
import { CONTENT_SECURITY_POLICY } from '../dashboard/index.ts'
import { errorPage } from '../dashboard/pages.ts'

export interface AdminDeps {
  table(): Table | undefined
  /** False while draining. */
  ready(): boolean
  /** Whether the store answers (a shared engine asks PostgreSQL and Redis). */
  storeHealth(): Promise<StoreHealth>
  metricsText(): Promise<{ contentType: string; body: string }>
  reload(): Promise<{ ok: boolean; issues: string[] }>
  tokenHash(): string | undefined
  protectMetrics(): boolean
  /** Who calls: the admin token or a signed-in user's session (core/accounts/authenticate.ts). */
  accounts: Accounts
  /** The run-time settings API (core/admin/settings-admin.ts); answers undefined for other paths. */
  settingsRoutes?(req: IncomingMessage, url: URL, principal: AdminPrincipal): Promise<{ status?: number; body: unknown } | undefined>
  /** The credit balance API (core/admin/credits-admin.ts), given the caller; answers undefined for other paths. */
  creditsRoutes?(req: IncomingMessage, url: URL, principal: AdminPrincipal): Promise<{ status?: number; body: unknown } | undefined>
  /** Pages that hold no data and need no credential (the workstation panel); undefined for other paths. */
  publicPages?(req: IncomingMessage, url: URL): Promise<{ status: number; body: unknown; contentType?: string } | undefined>
  /** More API routes (core/workstations), given the caller; undefined for other paths. */
  extraRoutes?(req: IncomingMessage, url: URL, principal: AdminPrincipal): Promise<{ status: number; body: unknown; headers?: Record<string, string> } | undefined>
  /** More core admin routes (low-balance alerts...), given the caller; tried in order after the settings routes. */
  coreRoutes?: ((req: IncomingMessage, url: URL, principal: AdminPrincipal) => Promise<{ status?: number; body: unknown; headers?: Record<string, string> } | undefined>)[]
  /** The dashboard (core/dashboard): pages and assets under /dashboard, with their own sign-in; true when it answered. */
  dashboard?(req: IncomingMessage, res: ServerResponse, url: URL): Promise<boolean>
}

const routers = new WeakMap<Table, Router<AdminRoute>>()

function adminRouter(table: Table): Router<AdminRoute> {
  let router = routers.get(table)
  if (!router) {
    router = new Router(table.adminRoutes.map((route) => ({ methods: [route.method], path: route.path, value: route })))
    routers.set(table, router)
  }
  return router
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  // A person's browser opening an API URL (a link, an expired session) gets a page with a next
  // step; scripts and clients keep the JSON.
  const error = (body as { error?: { code?: unknown; message?: unknown } } | undefined)?.error
  if (status >= 400 && error && browserTab(res.req)) {
    res.writeHead(status, { ...headers, 'content-type': 'text/html; charset=utf-8', 'content-security-policy': CONTENT_SECURITY_POLICY, 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' })
    res.end(errorPage(status, String(error.code ?? ''), String(error.message ?? '')))
    return
  }
  const text = typeof body === 'string' ? body : JSON.stringify(body, null, 2)
  res.writeHead(status, { 'content-type': typeof body === 'string' ? 'text/plain; charset=utf-8' : 'application/json; charset=utf-8', ...headers })
  res.end(text)
}

/** A person's browser opening the URL: navigation, or (a browser without Fetch Metadata) asking for HTML and not JSON. */
function browserTab(req: IncomingMessage | undefined): boolean {
  const mode = req?.headers['sec-fetch-mode']
  const accept = req?.headers.accept ?? ''
  return mode === 'navigate' || (mode === undefined && /text\/html/.test(accept) && !/json/.test(accept))
}

function authorised(req: IncomingMessage, tokenHash: string | undefined): boolean {
  if (!tokenHash) return false
  const header = req.headers.authorization ?? ''
  const token = header.startsWith('Bearer ') ? header.slice(7) : ''
  return token !== '' && credentialMatches(token, tokenHash)
}

async function handle(deps: AdminDeps, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://admin')
  const path = url.pathname
  if (req.method === 'GET' && path === '/healthz') return send(res, 200, { status: 'ok' })
  if (req.method === 'GET' && path === '/readyz') {
    if (!deps.ready()) return send(res, 503, { status: 'not_ready', reason: 'draining' })
    // Not ready while the store's source of truth is unreachable: metered routes would answer 503.
    const store = await deps.storeHealth().catch((error: Error): StoreHealth => ({ ok: false, components: { store: error.message } }))
    return send(res, store.ok ? 200 : 503, store.ok ? { status: 'ready', store: store.components } : { status: 'not_ready', reason: 'store_unavailable', store: store.components })
  }
  if (path === '/metrics' && (req.method === 'GET' || req.method === 'HEAD')) {
    if (deps.protectMetrics() && !authorised(req, deps.tokenHash())) throw new GatewayError(401, 'admin_unauthorized', 'a valid admin bearer token is required')
    const { contentType, body } = await deps.metricsText()
    res.writeHead(200, { 'content-type': contentType })
    return void res.end(body)
  }
  if ((path === '/dashboard' || path.startsWith('/dashboard/')) && deps.dashboard && (await deps.dashboard(req, res, url))) return
  const page = await deps.publicPages?.(req, url)
  if (page) {
    res.writeHead(page.status, { 'content-type': page.contentType ?? 'text/html; charset=utf-8', 'cache-control': 'no-store', 'content-security-policy': "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; frame-ancestors 'none'" })
    return void res.end(String(page.body))
  }
  if (req.method === 'GET' && path === '/admin/openapi.json') return send(res, 200, adminOpenApi())
  if (req.method === 'POST' && path === '/admin/session') {
    const answer = await signInRoute(deps.accounts, req)
    return send(res, answer.status ?? 200, answer.body, answer.headers)
  }
  // Everything else needs a caller: the bearer token (an operator) or a session (its user).
  const principal = await deps.accounts.authenticate(req)
  deps.accounts.requireCsrf(req, principal)
  const sessionAnswer = await sessionRoutes(deps.accounts, req, url, principal)
  if (sessionAnswer) return send(res, sessionAnswer.status ?? 200, sessionAnswer.body, sessionAnswer.headers)
  if (req.method === 'POST' && path === '/admin/reload') {
    requireOperator(principal)
    const result = await deps.reload()
    return send(res, result.ok ? 200 : 422, result)
  }
  const settingsAnswer = (await deps.settingsRoutes?.(req, url, principal)) ?? (await deps.creditsRoutes?.(req, url, principal))
  if (settingsAnswer) return send(res, settingsAnswer.status ?? 200, settingsAnswer.body)
  for (const routes of deps.coreRoutes ?? []) {
    const answer = await routes(req, url, principal)
    if (answer) return send(res, answer.status ?? 200, answer.body, answer.headers)
  }
  const extraAnswer = await deps.extraRoutes?.(req, url, principal)
  if (extraAnswer) return send(res, extraAnswer.status, extraAnswer.body, extraAnswer.headers)
  const table = deps.table()
  if (req.method === 'GET' && path === '/admin/config') {
    requireOperator(principal)
    return send(res, 200, { hash: table?.config.hash, routes: table?.routes.map((r) => r.name) ?? [] })
  }
  if (!table) throw errors.notFound('no config loaded')
  const match = adminRouter(table).match(req.method ?? 'GET', normalisePath(path))
  // Plugins' routes: an owner reaches those of a project of theirs (`:id`), nothing else.
  if (principal.role !== 'operator') {
    const projectId = match.params.id
    if (projectId === undefined) requireOperator(principal)
    else if (!deps.accounts.canAccessProject(principal, projectId)) throw new GatewayError(404, 'project_not_found', `project ${projectId} does not exist`)
  }
  const raw = req.method === 'POST' ? await readBody(req, 1 << 20) : undefined
  const result = await match.value.handler({ params: match.params, query: url.searchParams, body: raw?.length ? parseJson(raw) : undefined })
  send(res, result.status ?? 200, result.body, result.headers)
}

/** 403 operator_only for a project owner. */
export function requireOperator(principal: AdminPrincipal): void {
  if (principal.role !== 'operator') throw new GatewayError(403, 'operator_only', 'only an operator may do this')
}

export function createAdminServer(deps: AdminDeps): Server {
  return createServer((req, res) => {
    handle(deps, req, res).catch((thrown) => {
      const error = thrown instanceof GatewayError ? thrown : errors.internal('internal admin error')
      if (!res.headersSent) send(res, error.status, { error: { code: error.code, message: error.message } }, error.headers)
      else res.destroy()
    })
  })
}
