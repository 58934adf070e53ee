/**
 * The refused-traffic exports of a project page: answers per hour by status and refusal code
 * (`traffic.csv` / `traffic.ndjson`: hour, status, code, refusal, count) and each key's tally
 * (`keys.csv` / `keys.ndjson`: label, requests, refusals, lastUsed), read from the dashboard's
 * traffic tally. The admin API's `GET /admin/projects/:id/usage?by=answer|key` (core/admin/traffic-admin.ts)
 * gives the same rows from the same functions. Values are ours (statuses, stable codes, key labels of
 * the API's alphabet), but CSV cells are still quoted when they hold a quote, comma or newline, and
 * a leading = + - @ is neutralised so a spreadsheet never evaluates one.
 */
import type { Project } from '../projects/projects.ts'
import { isRefusal, type TrafficTally } from './traffic.ts'

function cell(value: unknown): string {
  let text = String(value ?? '')
  if (/^[=+\-@]/.test(text)) text = `'${text}`
  return /[",\n\r]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text
}

/** A header line, then one line per row (cells quoted and neutralised as above); the API ends lines with CRLF. */
export function csv(columns: readonly string[], rows: readonly Record<string, unknown>[], eol = '\n'): string {
  return [columns.join(','), ...rows.map((row) => columns.map((c) => cell(row[c])).join(','))].join(eol) + eol
}

/** One JSON object per line. */
export function ndjson(rows: readonly Record<string, unknown>[]): string {
  return rows.map((row) => JSON.stringify(row)).join('\n') + (rows.length ? '\n' : '')
}

export interface AnswerRow {
  /** ISO start of the hour (or of the day, with `day` buckets). */
  hour: string
  status: number
  /** The refusal code or the error's stable code ('' for a plain status). */
  code: string
  refusal: boolean
  count: number
}

/**
 * Answers per bucket by status and code, oldest first. `from`/`to` (epoch ms) keep the hours that
 * start in [from, to); `day` sums the hours of each UTC day.
 */
export function answerRows(tally: TrafficTally, options: { from?: number; to?: number; granularity?: 'hour' | 'day' } = {}): AnswerRow[] {
  const buckets = new Map<string, Map<string, number>>()
  for (const [hour, answers] of Object.entries(tally.hours)) {
    const at = Date.parse(hour)
    if ((options.from !== undefined && at < options.from) || (options.to !== undefined && at >= options.to)) continue
    const bucket = options.granularity === 'day' ? `${hour.slice(0, 10)}T00:00:00.000Z` : hour
    let into = buckets.get(bucket)
    if (!into) buckets.set(bucket, (into = new Map()))
    for (const [answer, n] of Object.entries(answers)) into.set(answer, (into.get(answer) ?? 0) + n)
  }
  return [...buckets]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .flatMap(([hour, answers]) =>
      [...answers]
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([answer, count]) => {
          const [status, code] = answer.split(' ')
          return { hour, status: Number(status), code: code ?? '', refusal: isRefusal(answer), count }
        }),
    )
}

export interface KeyRow {
  label: string
  requests: number
  refusals: number
  /** ISO time of the last answer to the key ('' when never used). */
  lastUsed: string
}

/** Each key's requests, refusals and last use, by label. */
export function keyRows(tally: TrafficTally): KeyRow[] {
  return Object.entries(tally.keys)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([label, key]) => ({ label, requests: key.requests, refusals: key.refusals, lastUsed: key.lastUsed ? new Date(key.lastUsed).toISOString() : '' }))
}

export const ANSWER_COLUMNS = ['hour', 'status', 'code', 'refusal', 'count'] as const
export const KEY_COLUMNS = ['label', 'requests', 'refusals', 'lastUsed'] as const

/** The file named `name` (`traffic.csv`, `keys.ndjson`...) of a project's tally; undefined for another name. */
export function trafficExport(project: Project, tally: TrafficTally, name: string): { name: string; type: string; body: string } | undefined {
  const match = /^(traffic|keys)\.(csv|ndjson)$/.exec(name)
  if (!match) return undefined
  const [, what, format] = match as unknown as [string, 'traffic' | 'keys', 'csv' | 'ndjson']
  const rows = (what === 'traffic' ? answerRows(tally) : keyRows(tally)) as unknown as Record<string, unknown>[]
  const columns = what === 'traffic' ? ANSWER_COLUMNS : KEY_COLUMNS
  const file = `${project.id}-${what}.${format}`
  if (format === 'csv') return { name: file, type: 'text/csv; charset=utf-8', body: csv(columns, rows) }
  return { name: file, type: 'application/x-ndjson; charset=utf-8', body: ndjson(rows) }
}
