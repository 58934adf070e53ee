/**
 * The workstation's admin API (on the admin listener: the admin token, or a signed-in session of
 * an operator or of the project's owner) and its panel page:
 *
 *   GET    /admin/projects/:id/workstation              state, reason, history, open path
 *   POST   /admin/projects/:id/workstation/provision    (and /start, /stop): 202 when accepted
 *   DELETE /admin/projects/:id/workstation              202; the record is gone once deleted
 *   GET    /workstation-panel/:id                       the panel (static HTML, no data; not token-protected)
 *
 * 404 project_not_found, 403 workstation_not_enabled, 409 with the transition's code; an action
 * refused changes nothing. The panel fetches the API with the admin token the operator gives it
 * (kept in the tab's sessionStorage, never in a URL sent to the server), or with the browser's
 * cookies once the admin API accepts sessions.
 */
import type { IncomingMessage } from 'node:http'
import type { WorkstationAction } from './states.ts'
import type { WorkstationService } from './service.ts'
import { panelPage } from './panel.ts'

const API = /^\/admin\/projects\/([^/]+)\/workstation(?:\/(provision|start|stop))?\/?$/
const PANEL = /^\/workstation-panel\/([^/]+)\/?$/

export interface AdminAnswer {
  status: number
  body: unknown
  /** HTML pages set their own type; JSON otherwise. */
  contentType?: string
  headers?: Record<string, string>
}

/** The panel: answered before the admin token check (it is a static page that holds no data). */
export function workstationPanelRoute(req: IncomingMessage, url: URL, publicUrl: string | undefined): AdminAnswer | undefined {
  const panel = PANEL.exec(url.pathname)
  if (!panel || req.method !== 'GET') return undefined
  return { status: 200, body: panelPage(decodeURIComponent(panel[1]), publicUrl), contentType: 'text/html; charset=utf-8' }
}

/** The API; undefined for paths that are not the workstation's. */
export async function workstationAdminRoute(
  service: WorkstationService,
  req: IncomingMessage,
  url: URL,
  /** Whether the caller may reach the project (operators: all; owners: theirs). */
  canAccess: (projectId: string) => boolean = () => true,
): Promise<AdminAnswer | undefined> {
  const match = API.exec(url.pathname)
  if (!match) return undefined
  let projectId: string
  try {
    projectId = decodeURIComponent(match[1])
  } catch {
    return { status: 400, body: { error: { code: 'invalid_path', message: 'the project id in the path is not valid percent-encoding' } } }
  }
  // Another user's project answers exactly like one that does not exist (ACCOUNTS-API.md).
  if (!canAccess(projectId)) return { status: 404, body: { error: { code: 'project_not_found', message: `no project ${JSON.stringify(projectId)}` } } }
  const action = match[2] as WorkstationAction | undefined
  const method = req.method ?? 'GET'
  req.resume() // no body is read: actions take none
  if (action) {
    if (method !== 'POST') return methodNotAllowed(`/admin/projects/:id/workstation/${action}`, 'POST')
    return service.act(projectId, action)
  }
  if (method === 'GET') return service.view(projectId)
  if (method === 'DELETE') return service.act(projectId, 'delete')
  return methodNotAllowed('/admin/projects/:id/workstation', 'GET, DELETE')
}

function methodNotAllowed(path: string, allow: string): AdminAnswer {
  return { status: 405, body: { error: { code: 'method_not_allowed', message: `${path} allows ${allow}` } } }
}
