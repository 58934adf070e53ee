/**
 * The admin listener (loopback by default): /healthz, /readyz and /metrics for operators and
 * Prometheus, and a token-protected admin API to which plugins add routes (usage, ...).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { credentialMatches } from './projects.ts'
import { Router } from './router.ts'
import { GatewayError, errors } from './errors.ts'
import { normalisePath } from './router.ts'
import { parseJson, readBody } from './http/body.ts'
import type { AdminRoute, Table } from './table.ts'
import type { StoreHealth } from './store/types.ts'

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
  /** The run-time settings API (core/settings-admin.ts); answers undefined for other paths. */
  settingsRoutes?(req: IncomingMessage, url: URL): Promise<{ status?: number; body: unknown } | undefined>
  /** Pages that hold no data and need no token (the workstation panel); undefined for other paths. */
  publicPages?(req: IncomingMessage, url: URL): Promise<{ status: number; body: unknown; contentType?: string } | undefined>
  /** More token-protected API routes (core/workstations); undefined for other paths. */
  extraRoutes?(req: IncomingMessage, url: URL): Promise<{ status: number; body: unknown } | undefined>
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
  const text = typeof body === 'string' ? body : JSON.stringify(body, null, 2)
  res.writeHead(status, { 'content-type': typeof body === 'string' ? 'text/plain; charset=utf-8' : 'application/json; charset=utf-8', ...headers })
  res.end(text)
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
  const page = await deps.publicPages?.(req, url)
  if (page) {
    res.writeHead(page.status, { 'content-type': page.contentType ?? 'text/html; charset=utf-8', 'cache-control': 'no-store', 'content-security-policy': "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; frame-ancestors 'none'" })
    return void res.end(String(page.body))
  }
  if (!deps.tokenHash()) throw new GatewayError(403, 'admin_disabled', 'the admin API is closed: set admin.tokenHash in gateway.yaml')
  if (!authorised(req, deps.tokenHash())) throw new GatewayError(401, 'admin_unauthorized', 'a valid admin bearer token is required', { headers: { 'www-authenticate': 'Bearer' } })
  if (req.method === 'POST' && path === '/admin/reload') {
    const result = await deps.reload()
    return send(res, result.ok ? 200 : 422, result)
  }
  const settingsAnswer = await deps.settingsRoutes?.(req, url)
  if (settingsAnswer) return send(res, settingsAnswer.status ?? 200, settingsAnswer.body)
  const extraAnswer = await deps.extraRoutes?.(req, url)
  if (extraAnswer) return send(res, extraAnswer.status, extraAnswer.body)
  const table = deps.table()
  if (req.method === 'GET' && path === '/admin/config') {
    return send(res, 200, { hash: table?.config.hash, routes: table?.routes.map((r) => r.name) ?? [] })
  }
  if (!table) throw errors.notFound('no config loaded')
  const match = adminRouter(table).match(req.method ?? 'GET', normalisePath(path))
  const raw = req.method === 'POST' ? await readBody(req, 1 << 20) : undefined
  const result = await match.value.handler({ params: match.params, query: url.searchParams, body: raw?.length ? parseJson(raw) : undefined })
  send(res, result.status ?? 200, result.body)
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
