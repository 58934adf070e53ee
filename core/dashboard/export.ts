/**
 * The refused-traffic exports of a project page: answers per hour by status and refusal code
 * (`traffic.csv` / `traffic.ndjson`: hour, status, code, refusal, count) and each key's tally
 * (`keys.csv` / `keys.ndjson`: label, requests, refusals, lastUsed), read from the dashboard's
 * traffic tally. Values are ours (statuses, stable codes, key labels of the API's alphabet), but CSV
 * cells are still quoted when they hold a quote, comma or newline, and a leading = + - @ is
 * neutralised so a spreadsheet never evaluates one.
 */
import type { Project } from '../projects/projects.ts'
import { isRefusal, type TrafficTally } from './traffic.ts'

function cell(value: unknown): string {
  let text = String(value ?? '')
  if (/^[=+\-@]/.test(text)) text = `'${text}`
  return /[",\n\r]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text
}

function csv(columns: readonly string[], rows: readonly Record<string, unknown>[]): string {
  return [columns.join(','), ...rows.map((row) => columns.map((c) => cell(row[c])).join(','))].join('\n') + '\n'
}

/** The file named `name` (`traffic.csv`, `keys.ndjson`...) of a project's tally; undefined for another name. */
export function trafficExport(project: Project, tally: TrafficTally, name: string): { name: string; type: string; body: string } | undefined {
  const match = /^(traffic|keys)\.(csv|ndjson)$/.exec(name)
  if (!match) return undefined
  const [, what, format] = match as unknown as [string, 'traffic' | 'keys', 'csv' | 'ndjson']
  const rows: Record<string, unknown>[] =
    what === 'traffic'
      ? Object.entries(tally.hours)
          .sort(([a], [b]) => (a < b ? -1 : 1))
          .flatMap(([hour, answers]) =>
            Object.entries(answers)
              .sort(([a], [b]) => (a < b ? -1 : 1))
              .map(([answer, count]) => {
                const [status, code] = answer.split(' ')
                return { hour, status: Number(status), code: code ?? '', refusal: isRefusal(answer), count }
              }),
          )
      : Object.entries(tally.keys)
          .sort(([a], [b]) => (a < b ? -1 : 1))
          .map(([label, key]) => ({ label, requests: key.requests, refusals: key.refusals, lastUsed: key.lastUsed ? new Date(key.lastUsed).toISOString() : '' }))
  const columns = what === 'traffic' ? ['hour', 'status', 'code', 'refusal', 'count'] : ['label', 'requests', 'refusals', 'lastUsed']
  const file = `${project.id}-${what}.${format}`
  if (format === 'csv') return { name: file, type: 'text/csv; charset=utf-8', body: csv(columns, rows) }
  return { name: file, type: 'application/x-ndjson; charset=utf-8', body: rows.map((row) => JSON.stringify(row)).join('\n') + (rows.length ? '\n' : '') }
}
