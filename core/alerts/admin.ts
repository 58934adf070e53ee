/**
 * Admin API of the low-balance alerts (on the admin listener; an owner's session sees its own projects):
 *
 *   GET /admin/alerts?limit=N               alerts of every project the caller may see, newest first
 *   GET /admin/projects/:id/alerts?limit=N  alerts of one project, newest first
 *
 * Each alert carries its threshold, the balance when it fired, its delivery state and every
 * attempt (time, status or error, duration). The webhook secret is never shown.
 */
import type { IncomingMessage } from 'node:http'
import type { AdminPrincipal } from '../accounts/authenticate.ts'
import { GatewayError } from '../errors.ts'
import type { Project, ProjectDirectory } from '../projects.ts'
import { Router } from '../router.ts'
import { limitOf } from '../settings-admin-input.ts'
import type { AlertRecord, LowBalanceMonitor } from './low-balance.ts'

type Answer = { status?: number; body: unknown }

/** Most alerts one listing answers. */
const MAX_ALERTS = 1000

/** The alerts of these projects, newest first (by firing time). */
export async function allAlerts(monitor: LowBalanceMonitor, projects: readonly Project[], limit: number): Promise<AlertRecord[]> {
  const lists = await Promise.all(projects.map((project) => monitor.list(project.id, limit)))
  return lists
    .flat()
    .sort((a, b) => (a.firedAt < b.firedAt ? 1 : a.firedAt > b.firedAt ? -1 : 0))
    .slice(0, limit)
}

/** The handler of the alert routes; undefined for other paths (the caller tries the next routes). */
export function alertsAdmin(monitor: LowBalanceMonitor, projects: () => ProjectDirectory, canAccess: (principal: AdminPrincipal, projectId: string) => boolean) {
  const visible = (principal: AdminPrincipal): Project[] => projects().all().filter((project) => canAccess(principal, project.id))
  const router = new Router<(params: Record<string, string>, query: URLSearchParams, principal: AdminPrincipal) => Promise<Answer>>([
    {
      methods: ['GET'],
      path: '/admin/alerts',
      value: async (_params, query, principal) => ({ body: { alerts: await allAlerts(monitor, visible(principal), limitOf(query, MAX_ALERTS)) } }),
    },
    {
      methods: ['GET'],
      path: '/admin/projects/:id/alerts',
      value: async (params, query, principal) => {
        // Another user's project answers exactly as a missing one.
        if (!projects().byId(params.id) || !canAccess(principal, params.id)) throw new GatewayError(404, 'project_not_found', `project ${params.id} does not exist`)
        return { body: { project: params.id, alerts: await monitor.list(params.id, limitOf(query, MAX_ALERTS)) } }
      },
    },
  ])
  return async (req: IncomingMessage, url: URL, principal: AdminPrincipal): Promise<Answer | undefined> => {
    const match = router.matchOrPass(req.method ?? 'GET', url.pathname)
    if (match === undefined) return undefined
    return match.value(match.params, url.searchParams, principal)
  }
}
