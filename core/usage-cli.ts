/** `tollgate usage`: per-project usage from the store, as a table. */
import { resolve } from 'node:path'
import { loadConfig } from './config/load.ts'
import { formatIssue } from './config/source.ts'
import { openSqliteStore } from './store/sqlite.ts'
import type { Granularity, UsageRow } from './store/types.ts'

const DAY = 86_400_000

function table(rows: (string | number)[][]): string {
  const widths = rows[0].map((_, col) => Math.max(...rows.map((row) => String(row[col]).length)))
  return rows.map((row) => row.map((cell, col) => (typeof cell === 'number' ? String(cell).padStart(widths[col]) : String(cell).padEnd(widths[col]))).join('  ')).join('\n')
}

export async function usageCommand(file: string, flags: Map<string, string>): Promise<number> {
  const loaded = await loadConfig(file)
  if (!loaded.config) {
    for (const issue of loaded.issues) console.error(formatIssue(issue))
    return 1
  }
  const granularity = (flags.get('granularity') ?? 'day') as Granularity
  if (granularity !== 'hour' && granularity !== 'day') {
    console.error('--granularity must be hour or day')
    return 2
  }
  const to = flags.has('to') ? Date.parse(flags.get('to')!) : Date.now()
  const from = flags.has('from') ? Date.parse(flags.get('from')!) : to - 30 * DAY
  if (Number.isNaN(from) || Number.isNaN(to)) {
    console.error('--from and --to must be ISO 8601 dates')
    return 2
  }
  const wanted = flags.get('project')
  const projects = loaded.config.projects.filter((p) => !wanted || p.id === wanted)
  if (wanted && projects.length === 0) {
    console.error(`unknown project "${wanted}"`)
    return 1
  }
  const store = openSqliteStore({ dataDir: resolve(loaded.config.dir, loaded.config.store.dataDir) })
  try {
    const rows: (string | number)[][] = [['project', 'bucket', 'api_type', 'requests', 'credits', 'errors']]
    for (const project of projects) {
      const usage: UsageRow[] = await store.queryUsage(project.id, from, to, granularity)
      for (const row of usage) rows.push([project.id, row.bucket, row.apiType, row.requests, row.credits, row.errors])
    }
    console.log(rows.length === 1 ? 'no usage recorded in this range' : table(rows))
    return 0
  } finally {
    await store.close()
  }
}
