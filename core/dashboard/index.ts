/**
 * The dashboard at /dashboard on the admin listener: server-rendered pages (pages.ts) with small
 * script islands (assets/app.js), uPlot served from the `uplot` package, no CDN and a strict
 * Content-Security-Policy (scripts and styles from this origin only: no inline script, no eval).
 *
 *   GET /dashboard                                    → the project list, or sign-in
 *   GET /dashboard/sign-in                            sign-in form (posts to the session endpoint)
 *   GET /dashboard/projects                           project cards: credits left, usage, features
 *   GET /dashboard/projects/:id                       one project: chart, errors, routes, keys, features, alerts
 *   GET /dashboard/operator                           every project at a glance, upstream targets (operators)
 *   GET /dashboard/alerts                             low-balance alerts of the projects one may see
 *   GET /dashboard/accounts                           users: list, create, change, delete (operators)
 *   GET /dashboard/fragments/...                      the live parts of those pages (HTML), and chart.json
 *   GET /dashboard/assets/:file                       app.js, app.css, uPlot.iife.min.js, uPlot.min.css
 *
 * Who may see what comes from the session (accounts): an operator sees every project, an owner the
 * projects they own. Changes (keys, features) are not made here: the islands call the admin API,
 * which checks the session, the CSRF token and, for features, the password.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { LowBalanceMonitor } from '../alerts/low-balance.ts'
import type { Project, ProjectDirectory } from '../projects/projects.ts'
import type { Store } from '../store/types.ts'
import { serveAsset } from './assets.ts'
import type { TrafficLog } from './traffic.ts'
import { trafficExport } from './export.ts'
import { accountRows, projectSummary } from './data.ts'
import { accountsFragment, accountsPage } from './accounts-page.ts'
import { upstreamsFragment, upstreamsSection, type UpstreamView } from './upstreams-panel.ts'
import type { DashboardViewer } from './layout.ts'
import {
  alertsFragment,
  alertsPage,
  keysFragment,
  messagePage,
  projectFragment,
  projectPage,
  projectsFragment,
  projectsPage,
  signInPage,
} from './pages.ts'
import { operatorFragment, operatorPage } from './operator-page.ts'
import { UNATTRIBUTED } from './traffic.ts'

export type { DashboardViewer } from './layout.ts'

/** A signed-in viewer and the projects they may see. */
export interface DashboardSession extends DashboardViewer {
  projects: 'all' | ReadonlySet<string>
}

/** The refusal of the users API (`requireOperator`), shown by the Accounts page to an owner. */
const OPERATOR_ONLY = { code: 'operator_only', message: 'only an operator may do this' }
const OPERATOR_ONLY_TEXT = `Only an operator may do this (403 ${OPERATOR_ONLY.code}). Ask an operator to change your account.`

/** Reads the session of a request (cookie); undefined when there is none or it expired. */
export type DashboardAuth = (req: IncomingMessage) => Promise<DashboardSession | undefined>

export interface DashboardDeps {
  store: Store
  alerts: LowBalanceMonitor
  /** Answers and refusals per project and key (the gateway's pipeline feeds it). */
  traffic?: TrafficLog
  projects(): ProjectDirectory
  auth: DashboardAuth
  /**
   * Where browsers open workstations (the public listener's base URL), when the gateway runs
   * workstations; the project page then shows the Workstation card for projects with the feature on.
   */
  workstationBase?(): string | undefined
  /** gateway.yaml's low-balance thresholds of a project and whether it has a webhook (operators edit them on its page). */
  alertConfig?(projectId: string): { thresholds: readonly { percent?: number; remaining?: number }[] } | undefined
  /** The gateway's upstream pools, for the operator page's Upstream targets panel (upstreams-panel.ts). */
  upstreams?(): Iterable<UpstreamView>
}

/** The page's policy: nothing but this origin, no inline script or style, no framing. */
export const CONTENT_SECURITY_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; " +
  "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

const SECURITY_HEADERS = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cache-control': 'no-store',
}

function sendHtml(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': 'text/html; charset=utf-8' })
  res.end(text)
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': 'application/json; charset=utf-8' })
  res.end(JSON.stringify(body))
}

/**
 * A person's browser opening the URL (not the island's fetch): errors then come as a page with a
 * next step rather than the JSON the island reads.
 */
function navigation(req: IncomingMessage): boolean {
  return req.headers['sec-fetch-mode'] === 'navigate' || (req.headers['sec-fetch-mode'] === undefined && /text\/html/.test(req.headers.accept ?? '') && !/json/.test(req.headers.accept ?? ''))
}

function redirect(res: ServerResponse, location: string): void {
  res.writeHead(303, { ...SECURITY_HEADERS, location })
  res.end()
}

function visible(session: DashboardSession, projects: ProjectDirectory): Project[] {
  const all = projects.all()
  return session.projects === 'all' ? [...all] : all.filter((p) => (session.projects as ReadonlySet<string>).has(p.id))
}

/**
 * Builds the /dashboard handler for core/admin/admin.ts. Answers true when the path was the dashboard's.
 */
export function dashboard(deps: DashboardDeps) {
  const summary = (project: Project, options: { ledger?: boolean } = {}) => projectSummary({ store: deps.store, alerts: deps.alerts, traffic: deps.traffic }, project, options)
  const summaries = (projects: Project[]) => Promise.all(projects.map((p) => summary(p)))
  const alertsOf = async (projects: Project[]) => {
    const lists = await Promise.all(projects.map((p) => deps.alerts.list(p.id, 50)))
    return lists.flat().sort((a, b) => (a.firedAt < b.firedAt ? 1 : a.firedAt > b.firedAt ? -1 : 0)).slice(0, 100)
  }
  // Refusals of keys no project has (operators only: the operator view).
  const unattributed = () => deps.traffic?.read(UNATTRIBUTED)

  return async (req: IncomingMessage, res: ServerResponse, url: URL): Promise<boolean> => {
    const path = url.pathname.replace(/\/+$/, '') || '/'
    if (req.method !== 'GET' && req.method !== 'HEAD') return false
    if (path.startsWith('/dashboard/assets/')) return serveAsset(res, path.slice('/dashboard/assets/'.length), SECURITY_HEADERS)
    if (path === '/dashboard/sign-in') {
      sendHtml(res, 200, signInPage())
      return true
    }
    const session = await deps.auth(req)
    const fragment = path.startsWith('/dashboard/fragments/')
    if (!session) {
      // A page goes to the sign-in form; a fragment tells the island, which then does the same.
      if (fragment && !navigation(req)) sendJson(res, 401, { error: { code: 'session_required', message: 'sign in again' } })
      else redirect(res, '/dashboard/sign-in')
      return true
    }
    const projects = deps.projects()
    const mine = visible(session, projects)
    const project = (id: string) => mine.find((p) => p.id === id)
    const segments = path.split('/').slice(2).map((s) => decodeURIComponent(s))
    const [first, second, third, fourth] = segments

    if (path === '/dashboard' || path === '/dashboard/projects') {
      if (path === '/dashboard') redirect(res, '/dashboard/projects')
      else sendHtml(res, 200, projectsPage(session, await summaries(mine)))
      return true
    }
    if (first === 'projects' && second !== undefined && third === undefined) {
      const found = project(second)
      // Another user's project is answered as a missing one: nothing tells it exists.
      if (!found) sendHtml(res, 404, messagePage(session, 'Project not found', `There is no project ${second} you can see.`))
      else {
        const config = deps.alertConfig?.(found.id)
        const thresholds = deps.alertConfig
          ? { configured: config !== undefined, source: found.alertThresholds ? ('runtime' as const) : ('config' as const), thresholds: found.alertThresholds ?? config?.thresholds ?? [] }
          : undefined
        sendHtml(res, 200, projectPage(session, await summary(found, { ledger: true }), found.features.workstation ? deps.workstationBase?.() : undefined, thresholds))
      }
      return true
    }
    if (path === '/dashboard/operator') {
      if (!session.operator) sendHtml(res, 403, messagePage(session, 'Operators only', 'The operator view is for operator accounts.'))
      else sendHtml(res, 200, operatorPage(session, await summaries(mine), await alertsOf(mine), await unattributed(), deps.upstreams ? upstreamsSection(deps.upstreams()) : undefined))
      return true
    }
    if (path === '/dashboard/accounts') {
      // Same refusal as GET /admin/users gives an owner, rendered as a dashboard page.
      if (!session.operator) sendHtml(res, 403, messagePage(session, 'Operators only', OPERATOR_ONLY_TEXT))
      else sendHtml(res, 200, accountsPage(session, await accountRows(deps.store), projects.all().map((p) => p.id)))
      return true
    }
    if (path === '/dashboard/alerts') {
      sendHtml(res, 200, alertsPage(session, await alertsOf(mine)))
      return true
    }
    if (fragment) {
      if (second === 'projects' && third === undefined) return sendHtml(res, 200, projectsFragment(await summaries(mine)).text), true
      if (second === 'operator' && session.operator) return sendHtml(res, 200, operatorFragment(await summaries(mine), await alertsOf(mine), await unattributed()).text), true
      if (second === 'upstreams' && session.operator && deps.upstreams) return sendHtml(res, 200, upstreamsFragment(deps.upstreams()).text), true
      if (second === 'accounts' && third === undefined) {
        if (!session.operator) return navigation(req) ? sendHtml(res, 403, messagePage(session, 'Operators only', OPERATOR_ONLY_TEXT)) : sendJson(res, 403, { error: OPERATOR_ONLY }), true
        return sendHtml(res, 200, accountsFragment(session, await accountRows(deps.store)).text), true
      }
      if (second === 'alerts') return sendHtml(res, 200, alertsFragment(await alertsOf(mine)).text), true
      if (second === 'projects' && third !== undefined) {
        const found = project(third)
        if (!found) {
          if (navigation(req)) return sendHtml(res, 404, messagePage(session, 'Project not found', `There is no project ${third} you can see.`)), true
          return sendJson(res, 404, { error: { code: 'project_not_found', message: `project ${third} does not exist` } }), true
        }
        if (fourth === 'keys' && segments.length === 4) return sendHtml(res, 200, keysFragment(await summary(found)).text), true
        if ((fourth === 'traffic' || fourth === 'keys.csv' || fourth === 'keys.ndjson' || fourth === 'traffic.csv' || fourth === 'traffic.ndjson') && segments.length === 4) {
          const file = trafficExport(found, await (deps.traffic?.read(found.id) ?? Promise.resolve({ hours: {}, keys: {} })), fourth)
          if (file) {
            res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': file.type, 'content-disposition': `attachment; filename="${file.name}"` })
            res.end(file.body)
            return true
          }
        }
        const data = await summary(found, { ledger: fourth === undefined })
        if (fourth === 'chart.json') return sendJson(res, 200, data.chart), true
        if (fourth === undefined) return sendHtml(res, 200, projectFragment(data, session).text), true
      }
    }
    sendHtml(res, 404, messagePage(session, 'Not found', 'There is no such dashboard page.'))
    return true
  }
}
