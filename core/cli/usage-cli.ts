/** `tollgate usage`: per-project usage from the store, as a table. */
import { loadConfig } from '../config/load.ts'
import { formatIssue } from '../config/source.ts'
import { openStore } from '../store/open.ts'
import { mergeProjects } from '../projects/project-settings.ts'
import { toProjects } from '../proxy/table.ts'
import type { Granularity, Store, UsageRow } from '../store/types.ts'
import { UsageError, type Parsed } from './cli-args.ts'

const DAY = 86_400_000

function table(rows: (string | number)[][]): string {
  const widths = rows[0].map((_, col) => Math.max(...rows.map((row) => String(row[col]).length)))
  return rows.map((row) => row.map((cell, col) => (typeof cell === 'number' ? String(cell).padStart(widths[col]) : String(cell).padEnd(widths[col]))).join('  ')).join('\n')
}

export async function usageCommand(file: string, values: Parsed['values']): Promise<number> {
  const flags = values as Partial<Record<'project' | 'from' | 'to' | 'granularity' | 'admin' | 'token', string>>
  const granularity = (flags.granularity ?? 'day') as Granularity
  if (granularity !== 'hour' && granularity !== 'day') throw new UsageError('tollgate usage: --granularity must be hour or day')
  const to = flags.to !== undefined ? Date.parse(flags.to) : Date.now()
  const from = flags.from !== undefined ? Date.parse(flags.from) : to - 30 * DAY
  if (Number.isNaN(from) || Number.isNaN(to)) throw new UsageError('tollgate usage: --from and --to must be ISO 8601 dates')
  const loaded = await loadConfig(file)
  if (!loaded.config) {
    for (const issue of loaded.issues) console.error(formatIssue(issue))
    return 1
  }
  const wanted = flags.project
  const rows: (string | number)[][] = [['project', 'bucket', 'api_type', 'requests', 'credits', 'errors']]
  const range = { from, to, granularity }
  // A running gateway holds the database; ask it through the admin API, else read the store.
  const base = adminBase(loaded.config.admin, flags.admin)
  const token = flags.token ?? process.env.TOLLGATE_ADMIN_TOKEN
  let fetchUsage = await viaAdmin(base, token)
  let store: Store | undefined
  // Projects of gateway.yaml and those created at run time (store settings).
  let projectIds: string[]
  if (fetchUsage) projectIds = await projectsViaAdmin(base!, token!)
  else {
    try {
      store = await openStore(loaded.config.store, { dir: loaded.config.dir })
    } catch (error) {
      console.error(`cannot read usage: ${(error as Error).message}. If the gateway is running, pass its admin token with --token or TOLLGATE_ADMIN_TOKEN.`)
      return 1
    }
    const opened = store
    fetchUsage = (id) => opened.queryUsage(id, range.from, range.to, range.granularity)
    projectIds = mergeProjects(toProjects(loaded.config), (await opened.settings.read()).projects).map((p) => p.id)
  }
  const projects = projectIds.filter((id) => !wanted || id === wanted).map((id) => ({ id }))
  if (wanted && projects.length === 0) {
    await store?.close()
    console.error(`unknown project "${wanted}"`)
    return 1
  }
  try {
    for (const project of projects) {
      const usage: UsageRow[] = await fetchUsage(project.id, range)
      for (const row of usage) rows.push([project.id, row.bucket, row.apiType, row.requests, row.credits, row.errors])
    }
    console.log(rows.length === 1 ? 'no usage recorded in this range' : table(rows))
    return 0
  } finally {
    await store?.close()
  }
}

type UsageFetcher = (projectId: string, range: { from: number; to: number; granularity: Granularity }) => Promise<UsageRow[]>

/** The admin listener's URL: `--admin URL`, else the configured address (unknown for port 0). */
function adminBase(admin: { listen: { host: string; port: number } }, flag: string | undefined): string | undefined {
  if (flag) return flag.replace(/\/+$/, '')
  if (admin.listen.port === 0) return undefined
  return `http://${admin.listen.host.includes(':') ? `[${admin.listen.host}]` : admin.listen.host}:${admin.listen.port}`
}

/** Ids of the projects in force in the running gateway. */
async function projectsViaAdmin(base: string, token: string): Promise<string[]> {
  const res = await fetch(`${base}/admin/projects`, { headers: { authorization: `Bearer ${token}` } })
  const body = (await res.json()) as { projects?: { id: string }[]; error?: { message: string } }
  if (!res.ok) throw new Error(`admin API answered ${res.status}: ${body.error?.message ?? ''}`)
  return (body.projects ?? []).map((p) => p.id)
}

/** A fetcher over the admin API when a gateway answers there. */
async function viaAdmin(base: string | undefined, token: string | undefined): Promise<UsageFetcher | undefined> {
  if (!token || !base) return undefined
  try {
    await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(1000) })
  } catch {
    return undefined
  }
  return async (projectId, range) => {
    const query = new URLSearchParams({ from: new Date(range.from).toISOString(), to: new Date(range.to).toISOString(), granularity: range.granularity })
    const res = await fetch(`${base}/admin/projects/${encodeURIComponent(projectId)}/usage?${query}`, { headers: { authorization: `Bearer ${token}` } })
    const body = (await res.json()) as { rows?: UsageRow[]; error?: { message: string } }
    if (!res.ok) throw new Error(`admin API answered ${res.status}: ${body.error?.message ?? ''}`)
    return body.rows ?? []
  }
}
