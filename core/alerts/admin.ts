/**
 * Admin API of the low-balance alerts (on the admin listener; an owner's session sees its own projects):
 *
 *   GET /admin/alerts?limit=N               alerts of every project the caller may see, newest first
 *   GET /admin/projects/:id/alerts?limit=N  alerts of one project, newest first
 *   GET /admin/projects/:id/alerts/thresholds   the thresholds in force, and whether gateway.yaml's or set at run time
 *   PUT /admin/projects/:id/alerts/thresholds   {thresholds: [{percent}|{remaining}, …] | null} (operators)
 *
 * Thresholds set at run time replace gateway.yaml's `projects[].alerts.thresholds` until they are
 * set to null or the project is reset; they are a run-time project setting (core/admin/settings-admin.ts),
 * so the change is audited (`project.update`, detail `alertThresholds`) and reaches every instance
 * the way a plan change does. The webhook URL and secret stay in gateway.yaml: a project without
 * `alerts` there has nowhere to deliver, and a PUT answers 409 alerts_not_configured.
 *
 * Each alert carries its threshold, the balance when it fired, its delivery state and every
 * attempt (time, status or error, duration). The webhook secret is never shown.
 */
import type { IncomingMessage } from 'node:http'
import { auditActor, type AdminPrincipal } from '../accounts/authenticate.ts'
import { requireOperator } from '../admin/admin.ts'
import type { ProjectConfig } from '../config/types.ts'
import { GatewayError } from '../proxy/errors.ts'
import { parseJson, readBody } from '../proxy/http/body.ts'
import type { ProjectSettingsSync } from '../projects/project-settings.ts'
import type { SettingsStore } from '../store/settings/types.ts'
import { parseThresholds } from './thresholds.ts'
import type { Project, ProjectDirectory } from '../projects/projects.ts'
import { Router } from '../proxy/router.ts'
import { limitOf } from '../admin/settings-admin-input.ts'
import type { AlertRecord, LowBalanceMonitor } from './low-balance.ts'

type Answer = { status?: number; body: unknown }

/** What editing thresholds needs: the settings store, the sync that applies a change here, gateway.yaml's projects. */
export interface ThresholdDeps {
  settings: Pick<SettingsStore, 'updateProject'>
  sync: Pick<ProjectSettingsSync, 'refresh'>
  projectConfigs(): readonly ProjectConfig[]
}

/** The thresholds of a project as the API shows them (the webhook secret never). */
function thresholdsView(project: Project, config: ProjectConfig | undefined): Record<string, unknown> {
  const alerts = config?.alerts
  return {
    project: project.id,
    configured: alerts !== undefined,
    url: alerts?.url ?? null,
    source: project.alertThresholds ? 'runtime' : 'config',
    thresholds: project.alertThresholds ?? alerts?.thresholds ?? [],
    configThresholds: alerts?.thresholds ?? [],
  }
}

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
export function alertsAdmin(
  monitor: LowBalanceMonitor,
  projects: () => ProjectDirectory,
  canAccess: (principal: AdminPrincipal, projectId: string) => boolean,
  thresholdDeps?: ThresholdDeps,
) {
  const visible = (principal: AdminPrincipal): Project[] => projects().all().filter((project) => canAccess(principal, project.id))
  const visibleProject = (id: string, principal: AdminPrincipal): Project => {
    const project = projects().byId(id)
    // Another user's project answers exactly as a missing one.
    if (!project || !canAccess(principal, id)) throw new GatewayError(404, 'project_not_found', `project ${id} does not exist`)
    return project
  }
  const configOf = (id: string) => thresholdDeps?.projectConfigs().find((c) => c.id === id)
  const router = new Router<(params: Record<string, string>, query: URLSearchParams, principal: AdminPrincipal, req: IncomingMessage) => Promise<Answer>>([
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
    ...(thresholdDeps
      ? [
          {
            methods: ['GET'],
            path: '/admin/projects/:id/alerts/thresholds',
            value: async (params: Record<string, string>, _query: URLSearchParams, principal: AdminPrincipal) => ({ body: thresholdsView(visibleProject(params.id, principal), configOf(params.id)) }),
          },
          {
            methods: ['PUT'],
            path: '/admin/projects/:id/alerts/thresholds',
            value: async (params: Record<string, string>, _query: URLSearchParams, principal: AdminPrincipal, req: IncomingMessage) => {
              visibleProject(params.id, principal)
              requireOperator(principal)
              const raw = await readBody(req, 1 << 16)
              const thresholds = parseThresholds(raw.length ? parseJson(raw) : undefined)
              if (!configOf(params.id)?.alerts) {
                throw new GatewayError(409, 'alerts_not_configured', `project ${params.id} has no alerts webhook in gateway.yaml (projects[].alerts.url and secret): thresholds would have nowhere to deliver`)
              }
              await thresholdDeps.settings.updateProject(params.id, { alertThresholds: thresholds }, auditActor(principal))
              await thresholdDeps.sync.refresh()
              return { body: thresholdsView(visibleProject(params.id, principal), configOf(params.id)) }
            },
          },
        ]
      : []),
  ])
  return async (req: IncomingMessage, url: URL, principal: AdminPrincipal): Promise<Answer | undefined> => {
    const match = router.matchOrPass(req.method ?? 'GET', url.pathname)
    if (match === undefined) return undefined
    return match.value(match.params, url.searchParams, principal, req)
  }
}
