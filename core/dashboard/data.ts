/**
 * What the dashboard shows of a project, read from the store: the balance of the current period,
 * usage of the last 24 hours per API type (the chart), per status class (error breakdown) and per
 * route (busiest routes), and the latest low-balance alerts. One summary is a balance read, two
 * usage queries and one document list.
 */
import type { Project } from '../projects/projects.ts'
import { currentSchedulePeriod } from '../store/periods.ts'
import { statusClassOf, type CreditBalance, type CreditLedgerEntry, type Store, type UsageDetailRow, type UsageRow } from '../store/types.ts'
import type { Role, UserRecord } from '../store/accounts/types.ts'
import type { AlertRecord, LowBalanceMonitor } from '../alerts/low-balance.ts'
import { isRefusal, type KeyTally, type TrafficLog, type TrafficTally } from './traffic.ts'

const HOUR_MS = 3_600_000
/** The chart and the tables cover this many hours up to now. */
export const WINDOW_HOURS = 24

export interface RouteStat {
  route: string
  apiType: string
  requests: number
  errors: number
  credits: number
  meanLatencyMs: number
  maxLatencyMs: number
}

/**
 * The period's credits as the ledger computes them: `allocation + granted - used - pending = left`
 * (left never below 0). `pending` is known only when the ledger was read (the project page); the
 * cards read the balance alone, where `used` includes what is pending.
 */
export interface BalanceView {
  period: string
  allocation: number
  granted: number
  used: number
  pending?: number
  remaining: number
  /** allocation + granted: what `remaining` is a share of. */
  total: number
  percentLeft: number
}

/** The API type workstations book their minutes under (core/workstations): minutes, not requests. */
export const WORKSTATION_API_TYPE = 'workstation'

/** Answers of the window by status and refusal code, per hour and in total, and each key's tally. */
export interface TrafficView {
  /** Answer (`200`, `403 wrong_plan`) → count over the window, most first. */
  answers: { answer: string; count: number; refusal: boolean }[]
  /** Every answer of the window, refusals and unmetered routes included. */
  total: number
  /** Answers with a 4xx or 5xx status. */
  failed: number
  refusals: number
  keys: Record<string, KeyTally>
}

export interface ProjectSummary {
  project: Project
  traffic: TrafficView
  balance: BalanceView
  /** Requests (workstation minutes apart), credits (all), errors over the window. */
  window: { requests: number; credits: number; errors: number; workstationMinutes: number }
  /** Requests per status class over the window: `2xx` → n. */
  statusClasses: Record<string, number>
  routes: RouteStat[]
  chart: ChartData
  alerts: AlertRecord[]
}

/** uPlot's columnar form: x in unix seconds, one series of requests per API type, workstation minutes apart. */
export interface ChartData {
  x: number[]
  series: { apiType: string; requests: number[]; credits: number[] }[]
  /** Workstation minutes per hour (its own series: a minute is not a request). */
  workstationMinutes: number[]
  /** Refused answers per hour, one series per status and reason (`403 wrong_plan`). */
  refusals: { answer: string; counts: number[] }[]
}

/** Zero-filled hourly series per API type over the window ending at `now`. */
export function chartOf(rows: readonly UsageRow[], now: number): ChartData {
  const end = Math.floor(now / HOUR_MS) * HOUR_MS
  const x = Array.from({ length: WINDOW_HOURS }, (_, i) => (end - (WINDOW_HOURS - 1 - i) * HOUR_MS) / 1000)
  const index = new Map(x.map((seconds, i) => [seconds, i]))
  const byType = new Map<string, { apiType: string; requests: number[]; credits: number[] }>()
  const workstationMinutes: number[] = Array(WINDOW_HOURS).fill(0)
  for (const row of rows) {
    const at = index.get(Date.parse(row.bucket) / 1000)
    if (at === undefined) continue
    if (row.apiType === WORKSTATION_API_TYPE) {
      workstationMinutes[at]! += Number(row.requests)
      continue
    }
    let series = byType.get(row.apiType)
    if (!series) {
      series = { apiType: row.apiType, requests: Array(WINDOW_HOURS).fill(0), credits: Array(WINDOW_HOURS).fill(0) }
      byType.set(row.apiType, series)
    }
    series.requests[at]! += Number(row.requests)
    series.credits[at]! += Number(row.credits)
  }
  return { x, series: [...byType.values()].sort((a, b) => a.apiType.localeCompare(b.apiType)), workstationMinutes, refusals: [] }
}

/** The window's part of a tally: answers in total and refusals per hour (on the chart's hours). */
export function trafficOf(tally: TrafficTally, chart: ChartData): { view: TrafficView; refusals: ChartData['refusals'] } {
  const first = new Date(chart.x[0]! * 1000).toISOString()
  const index = new Map(chart.x.map((seconds, i) => [new Date(seconds * 1000).toISOString(), i]))
  const totals = new Map<string, number>()
  const perHour = new Map<string, number[]>()
  for (const [hour, answers] of Object.entries(tally.hours)) {
    if (hour < first) continue
    const at = index.get(hour)
    for (const [answer, n] of Object.entries(answers)) {
      totals.set(answer, (totals.get(answer) ?? 0) + n)
      if (at === undefined || !isRefusal(answer)) continue
      let counts = perHour.get(answer)
      if (!counts) perHour.set(answer, (counts = Array(chart.x.length).fill(0)))
      counts[at]! += n
    }
  }
  const answers = [...totals].map(([answer, count]) => ({ answer, count, refusal: isRefusal(answer) }))
    .sort((a, b) => b.count - a.count || (a.answer < b.answer ? -1 : 1))
  return {
    view: {
      answers,
      total: answers.reduce((sum, a) => sum + a.count, 0),
      failed: answers.filter((a) => Number(a.answer.split(' ')[0]) >= 400).reduce((sum, a) => sum + a.count, 0),
      refusals: answers.filter((a) => a.refusal).reduce((sum, a) => sum + a.count, 0),
      keys: tally.keys,
    },
    refusals: [...perHour].sort(([a], [b]) => (a < b ? -1 : 1)).map(([answer, counts]) => ({ answer, counts })),
  }
}

/** Routes by requests, busiest first, from per-route rows. */
export function routeStats(rows: readonly UsageDetailRow[]): RouteStat[] {
  const byRoute = new Map<string, RouteStat & { latencySum: number }>()
  for (const row of rows) {
    const key = `${row.apiType}\u0000${row.route}`
    let stat = byRoute.get(key)
    if (!stat) {
      stat = { route: row.route, apiType: row.apiType, requests: 0, errors: 0, credits: 0, meanLatencyMs: 0, maxLatencyMs: 0, latencySum: 0 }
      byRoute.set(key, stat)
    }
    stat.requests += row.requests
    stat.errors += row.errors
    stat.credits += row.credits
    stat.latencySum += row.latencyMsSum
    stat.maxLatencyMs = Math.max(stat.maxLatencyMs, row.latencyMsMax)
  }
  return [...byRoute.values()]
    .map(({ latencySum, ...stat }) => ({ ...stat, meanLatencyMs: stat.requests ? latencySum / stat.requests : 0 }))
    .sort((a, b) => b.requests - a.requests || a.route.localeCompare(b.route))
}

export interface SummaryDeps {
  store: Store
  alerts: LowBalanceMonitor
  /** Answers and refusals per project and key (absent: the tables show none). */
  traffic?: Pick<TrafficLog, 'read'>
  clock?: () => number
}

/** The balance as shown; with the ledger's entries, what is pending is told apart from what is used. */
export function balanceView(balance: CreditBalance, entries?: readonly CreditLedgerEntry[]): BalanceView {
  const total = balance.allocation + balance.granted
  const pending = entries ? 0 - entries.filter((e) => e.kind === 'pending').reduce((sum, e) => sum + e.amount, 0) : undefined
  const percentLeft = total > 0 ? Math.max(0, Math.min(100, (balance.remaining / total) * 100)) : 0
  return {
    period: balance.period,
    allocation: balance.allocation,
    granted: balance.granted,
    used: balance.used - (pending ?? 0),
    ...(pending !== undefined ? { pending } : {}),
    remaining: balance.remaining,
    total,
    percentLeft,
  }
}

/**
 * Reads one project's summary. `ledger` (the project page) reads the period's ledger instead of
 * the bare balance, to tell pending credits apart; the cards of every project skip it.
 */
export async function projectSummary(deps: SummaryDeps, project: Project, options: { ledger?: boolean } = {}): Promise<ProjectSummary> {
  const now = (deps.clock ?? Date.now)()
  const from = now - (WINDOW_HOURS - 1) * HOUR_MS
  const period = currentSchedulePeriod(project.credits, now)
  const [credits, rows, detail, alerts] = await Promise.all([
    options.ledger
      ? deps.store.creditLedger(project.id, period, project.credits.allocation)
      : deps.store.balance(project.id, period, project.credits.allocation).then((balance) => ({ balance, entries: undefined })),
    deps.store.queryUsage(project.id, from, now, 'hour'),
    deps.store.queryUsageDetail(project.id, from, now, 'hour'),
    deps.alerts.list(project.id, 10),
  ])
  const tally = deps.traffic ? await deps.traffic.read(project.id) : { hours: {}, keys: {} }
  const window = { requests: 0, credits: 0, errors: 0, workstationMinutes: 0 }
  for (const row of rows) {
    window.credits += Number(row.credits)
    if (row.apiType === WORKSTATION_API_TYPE) {
      window.workstationMinutes += Number(row.requests)
      continue
    }
    window.requests += Number(row.requests)
    window.errors += Number(row.errors)
  }
  // Status classes from the answers tally when it has the window (refusals and unmetered routes
  // included); else from the metered usage alone.
  const statusClasses: Record<string, number> = {}
  const chart = chartOf(rows, now)
  const traffic = trafficOf(tally, chart)
  chart.refusals = traffic.refusals
  if (traffic.view.total > 0) {
    for (const a of traffic.view.answers) {
      const cls = statusClassOf(Number(a.answer.split(' ')[0]))
      statusClasses[cls] = (statusClasses[cls] ?? 0) + a.count
    }
  } else for (const row of detail) statusClasses[row.statusClass] = (statusClasses[row.statusClass] ?? 0) + row.requests
  return {
    project,
    balance: balanceView(credits.balance, credits.entries),
    window,
    statusClasses,
    routes: routeStats(detail),
    chart,
    traffic: traffic.view,
    alerts,
  }
}

/** What the Accounts page shows of a user: no password hash ever leaves {@link accountRow}. */
export interface AccountRow {
  id: string
  email: string
  role: Role
  projects: string[]
  createdAt: number
}

export function accountRow(user: UserRecord): AccountRow {
  return { id: user.id, email: user.email, role: user.role, projects: [...user.projects], createdAt: user.createdAt }
}

/** Every account, operators first, then by email. */
export async function accountRows(store: Pick<Store, 'accounts'>): Promise<AccountRow[]> {
  const users = await store.accounts.listUsers()
  return users.map(accountRow).sort((a, b) => (a.role === b.role ? a.email.localeCompare(b.email) : a.role === 'operator' ? -1 : 1))
}
