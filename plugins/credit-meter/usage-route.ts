/**
 * `GET /admin/projects/:id/usage?from=&to=&granularity=hour|day&by=apiType|route&format=json|csv|ndjson`
 * on the admin listener (the core checks the admin token): a project's usage rows from the store,
 * their totals, and the balance of its current billing period. Same data and defaults as
 * `tollgate usage` (last 30 days, by day). `by=route` gives rows per API type, route and status
 * class with latency; `csv` and `ndjson` export the rows alone (a header line for CSV).
 */
import { GatewayError } from '../../core/proxy/plugin-api.ts'
import type { AdminHandler, PluginInit } from '../../core/proxy/plugin-api.ts'
import type { Granularity, UsageDetailRow, UsageRow } from '../../core/store/types.ts'
import type { CreditLedger } from './ledger.ts'

export const USAGE_ADMIN_PATH = '/admin/projects/:id/usage'

const DAY_MS = 86_400_000
const DEFAULT_SPAN_MS = 30 * DAY_MS
/** Widest range per granularity, so one query stays a bounded number of rows. */
const MAX_SPAN_MS: Record<Granularity, number> = { hour: 93 * DAY_MS, day: 3660 * DAY_MS }
/** A date or date-time in ISO 8601 form; Date.parse alone would take many other shapes. */
const ISO_8601 = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})?)?$/

function invalid(message: string): GatewayError {
  return new GatewayError(400, 'invalid_query', message)
}

function parseTime(query: URLSearchParams, field: 'from' | 'to'): number | undefined {
  const raw = query.get(field)
  if (raw === null) return undefined
  const ms = ISO_8601.test(raw) ? Date.parse(raw) : NaN
  if (Number.isNaN(ms)) throw invalid(`${field} must be an ISO 8601 date or date-time, e.g. 2026-11-21T09:00:00Z`)
  return ms
}

export type UsageFormat = 'json' | 'csv' | 'ndjson'
export type UsageDimension = 'apiType' | 'route'

const FORMATS: readonly UsageFormat[] = ['json', 'csv', 'ndjson']
const DIMENSIONS: readonly UsageDimension[] = ['apiType', 'route']

const COLUMNS: Record<UsageDimension, string[]> = {
  apiType: ['bucket', 'apiType', 'requests', 'credits', 'errors'],
  route: ['bucket', 'apiType', 'route', 'statusClass', 'requests', 'credits', 'errors', 'latencyMsSum', 'latencyMsMax'],
}

/** One CSV field (RFC 4180): quoted when it holds a comma, quote or line break. */
function csvField(value: unknown): string {
  const text = String(value)
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text
}

/** Rows as CSV with a header line, or as NDJSON (one JSON object per line). */
export function exportRows(rows: readonly (UsageRow | UsageDetailRow)[], by: UsageDimension, format: 'csv' | 'ndjson'): string {
  if (format === 'ndjson') return rows.map((row) => JSON.stringify(row) + '\n').join('')
  const columns = COLUMNS[by]
  const lines = [columns.join(',')]
  for (const row of rows) lines.push(columns.map((column) => csvField((row as unknown as Record<string, unknown>)[column])).join(','))
  return lines.join('\r\n') + '\r\n'
}

/** Reads and checks the query; every refusal names the field. */
export function parseExportQuery(query: URLSearchParams): { format: UsageFormat; by: UsageDimension } {
  const format = (query.get('format') ?? 'json') as UsageFormat
  if (!FORMATS.includes(format)) throw invalid(`format must be one of ${FORMATS.join(', ')}`)
  const by = (query.get('by') ?? 'apiType') as UsageDimension
  if (!DIMENSIONS.includes(by)) throw invalid(`by must be one of ${DIMENSIONS.join(', ')}`)
  return { format, by }
}

/** Reads and checks the query; every refusal names the field. */
export function parseUsageQuery(query: URLSearchParams, now: number): { from: number; to: number; granularity: Granularity } {
  const granularity = query.get('granularity') ?? 'day'
  if (granularity !== 'hour' && granularity !== 'day') throw invalid('granularity must be hour or day')
  const to = parseTime(query, 'to') ?? now
  const from = parseTime(query, 'from') ?? to - DEFAULT_SPAN_MS
  if (from >= to) throw invalid('from must be earlier than to')
  if (to - from > MAX_SPAN_MS[granularity]) {
    throw invalid(`from..to spans more than ${MAX_SPAN_MS[granularity] / DAY_MS} days, the most for granularity ${granularity}`)
  }
  return { from, to, granularity }
}

/**
 * The admin handler. It reads projects from `init.projects` of the table it was built with, which
 * is the table whose admin routes are being served.
 *
 * @example
 * ```ts
 * init.adminRoute('GET', USAGE_ADMIN_PATH, usageHandler(init, ledger))
 * ```
 */
export function usageHandler(init: PluginInit, ledger: CreditLedger): AdminHandler {
  return async ({ params, query }) => {
    const project = init.projects.byId(params.id)
    if (!project) throw new GatewayError(404, 'project_not_found', `no project with id ${JSON.stringify(params.id.slice(0, 64))}`)
    const { from, to, granularity } = parseUsageQuery(query, ledger.clock())
    const { format, by } = parseExportQuery(query)
    const rows = by === 'route' ? await init.store.queryUsageDetail(project.id, from, to, granularity) : await init.store.queryUsage(project.id, from, to, granularity)
    if (format !== 'json') {
      const stamp = `${project.id}-${by}-${granularity}`
      return {
        body: exportRows(rows, by, format),
        headers: {
          'content-type': format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson; charset=utf-8',
          'content-disposition': `attachment; filename="usage-${stamp}.${format === 'csv' ? 'csv' : 'ndjson'}"`,
        },
      }
    }
    const totals = { requests: 0, credits: 0, errors: 0 }
    for (const row of rows) {
      totals.requests += row.requests
      totals.credits += row.credits
      totals.errors += row.errors
    }
    const period = ledger.currentPeriod(project)
    const { allocation } = project.credits
    const { granted, used, remaining } = await init.store.balance(project.id, period, allocation)
    return {
      body: {
        project: project.id,
        granularity,
        by,
        from: new Date(from).toISOString(),
        to: new Date(to).toISOString(),
        rows,
        totals,
        balance: { period, periodLength: project.credits.period, refill: project.credits.refill ?? null, allocation, granted, used, remaining },
      },
    }
  }
}
