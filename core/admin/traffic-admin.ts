/**
 * The refused-traffic side of `GET /admin/projects/:id/usage` (on the admin listener; an owner's
 * session reaches its own projects):
 *
 *   ?by=answer   answers per bucket by status and refusal code (401, 402, 403, 429 with their reason)
 *   ?by=key      each key's requests, refusals and last use
 *
 * with the usage route's `from`, `to`, `granularity` and `format=json|csv|ndjson`. The rows are the
 * dashboard's exports (core/dashboard/export.ts) read from the same tally (core/dashboard/traffic.ts:
 * every answer, refusals of known keys included, the last 48 hours by hour). Served here, not by
 * credit-meter's usage route, because the tally is the core's and counts routes without a meter too;
 * `by=apiType|route` are passed on to credit-meter (this answers undefined for them).
 */
import type { IncomingMessage } from 'node:http'
import { GatewayError } from '../proxy/errors.ts'
import { Router } from '../proxy/router.ts'
import type { Accounts, AdminPrincipal } from '../accounts/authenticate.ts'
import type { ProjectDirectory } from '../projects/projects.ts'
import type { TrafficLog } from '../dashboard/traffic.ts'
import { ANSWER_COLUMNS, answerRows, csv, KEY_COLUMNS, keyRows, ndjson } from '../dashboard/export.ts'

const DAY_MS = 86_400_000
/** As the usage route: 30 days back by default, at most 93 days by hour and 3660 by day. */
const DEFAULT_SPAN_MS = 30 * DAY_MS
const MAX_SPAN_MS = { hour: 93 * DAY_MS, day: 3660 * DAY_MS }
const ISO_8601 = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})?)?$/
const FORMATS = ['json', 'csv', 'ndjson'] as const

const invalid = (message: string) => new GatewayError(400, 'invalid_query', message)

function time(query: URLSearchParams, field: 'from' | 'to'): number | undefined {
  const raw = query.get(field)
  if (raw === null) return undefined
  const ms = ISO_8601.test(raw) ? Date.parse(raw) : NaN
  if (Number.isNaN(ms)) throw invalid(`${field} must be an ISO 8601 date or date-time, e.g. 2026-11-21T09:00:00Z`)
  return ms
}

/** The usage route's query rules (plugins/credit-meter/usage-route.ts), with the same messages. */
export function parseTrafficQuery(query: URLSearchParams, now: number) {
  const granularity = query.get('granularity') ?? 'day'
  if (granularity !== 'hour' && granularity !== 'day') throw invalid('granularity must be hour or day')
  const format = query.get('format') ?? 'json'
  if (!(FORMATS as readonly string[]).includes(format)) throw invalid(`format must be one of ${FORMATS.join(', ')}`)
  const to = time(query, 'to') ?? now
  const from = time(query, 'from') ?? to - DEFAULT_SPAN_MS
  if (from >= to) throw invalid('from must be earlier than to')
  if (to - from > MAX_SPAN_MS[granularity]) throw invalid(`from..to spans more than ${MAX_SPAN_MS[granularity] / DAY_MS} days, the most for granularity ${granularity}`)
  return { from, to, granularity: granularity as 'hour' | 'day', format: format as (typeof FORMATS)[number] }
}

export interface TrafficAdminDeps {
  traffic: Pick<TrafficLog, 'read'>
  projects(): ProjectDirectory
  accounts: Pick<Accounts, 'canAccessProject'>
  clock?: () => number
}

type Answer = { status?: number; body: unknown; headers?: Record<string, string> }

export function trafficAdmin(deps: TrafficAdminDeps) {
  const clock = deps.clock ?? Date.now
  const router = new Router([{ methods: ['GET'], path: '/admin/projects/:id/usage', value: true }])
  return async (req: IncomingMessage, url: URL, principal: AdminPrincipal): Promise<Answer | undefined> => {
    const by = url.searchParams.get('by')
    if (by !== 'answer' && by !== 'key') return undefined
    const match = router.matchOrPass(req.method ?? 'GET', url.pathname)
    if (match === undefined) return undefined
    const project = deps.projects().byId(match.params.id!)
    // Another user's project answers exactly as a missing one.
    if (!project || !deps.accounts.canAccessProject(principal, project.id)) throw new GatewayError(404, 'project_not_found', `project ${match.params.id} does not exist`)
    const { from, to, granularity, format } = parseTrafficQuery(url.searchParams, clock())
    const tally = await deps.traffic.read(project.id)
    const rows: Record<string, unknown>[] = by === 'answer'
      ? answerRows(tally, { from, to, granularity }).map(({ hour, ...row }) => ({ bucket: hour, ...row }))
      : keyRows(tally).map((row) => ({ ...row, lastUsed: row.lastUsed || null }))
    if (format !== 'json') {
      const columns = by === 'answer' ? ['bucket', ...ANSWER_COLUMNS.slice(1)] : KEY_COLUMNS
      return {
        body: format === 'csv' ? csv(columns, rows, '\r\n') : ndjson(rows),
        headers: {
          'content-type': format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson; charset=utf-8',
          'content-disposition': `attachment; filename="usage-${project.id}-${by}-${granularity}.${format}"`,
        },
      }
    }
    const totals = by === 'answer'
      ? { answers: sum(rows, 'count'), refusals: sum(rows.filter((r) => r.refusal), 'count') }
      : { requests: sum(rows, 'requests'), refusals: sum(rows, 'refusals') }
    return { body: { project: project.id, by, granularity, from: new Date(from).toISOString(), to: new Date(to).toISOString(), rows, totals } }
  }
}

function sum(rows: readonly Record<string, unknown>[], field: string): number {
  return rows.reduce((total, row) => total + Number(row[field]), 0)
}
