/**
 * Low-balance alerts: per project thresholds on the credits left in the current billing period
 * (`projects[].alerts` of gateway.yaml), each fired at most once per period as a signed webhook,
 * retried with a bounded exponential backoff, every attempt recorded.
 *
 * Off the request path: a timer (`alerts.checkIntervalMs`) reads the balance of each project that
 * has alerts (one store read per project per tick). "Once per period" is the store's, not this
 * process's: the first instance whose `insertIfAbsent` creates the alert document
 * `<project>|<period>|<threshold>` delivers it; any other instance (or worker, or a restart of this
 * one) finds it there and does nothing. A local set of fired keys spares the store a read per tick.
 */
import { runInBackground } from '../proxy/resilience.ts'
import type { Logger } from 'pino'
import type { ProjectConfig } from '../config/types.ts'
import type { ProjectDirectory } from '../projects/projects.ts'
import { currentSchedulePeriod } from '../store/periods.ts'
import type { DocumentCollection, Store } from '../store/types.ts'
import { SIGNATURE_HEADER, signWebhook, TIMESTAMP_HEADER } from './signature.ts'

/** Store collection of alert records; owner = project id. */
export const ALERTS_COLLECTION = 'low-balance-alerts'

export type AlertsConfig = NonNullable<ProjectConfig['alerts']>
export type Threshold = AlertsConfig['thresholds'][number]

export interface AlertAttempt {
  n: number
  /** ISO time the attempt was sent. */
  at: string
  /** HTTP status of the receiver's answer; absent when it never answered. */
  status?: number
  /** Why the attempt failed (connection refused, timeout, non-2xx). */
  error?: string
  durationMs: number
}

/** One alert as stored and listed by the admin API (never the webhook secret). */
export interface AlertRecord {
  id: string
  projectId: string
  period: string
  threshold: Threshold
  /** Credits left at or below which the threshold fires (percent thresholds resolved against the allocation). */
  level: number
  balance: { allocation: number; used: number; remaining: number }
  firedAt: string
  url: string
  state: 'delivering' | 'delivered' | 'failed'
  attempts: AlertAttempt[]
  /** When the next retry is due (state `delivering` after a failed attempt). */
  nextAttemptAt?: string
}

/** `percent:20` or `remaining:500`: the threshold's part of the alert id. */
export function thresholdId(threshold: Threshold): string {
  return threshold.percent !== undefined ? `percent:${threshold.percent}` : `remaining:${threshold.remaining}`
}

/** Credits left at or below which `threshold` fires, for `allocation`. */
export function thresholdLevel(threshold: Threshold, allocation: number): number {
  return threshold.percent !== undefined ? (allocation * threshold.percent) / 100 : (threshold.remaining ?? 0)
}

/** Delay before retry `n + 1` after attempt `n` failed: base × 2^(n-1), capped. */
export function backoffMs(attempt: number, baseMs: number, maxMs: number): number {
  return Math.min(maxMs, baseMs * 2 ** (attempt - 1))
}

export interface LowBalanceMonitorDeps {
  store: Store
  log: Logger
  /** The projects of gateway.yaml (for their `alerts`), as of the table in service. */
  projectConfigs(): readonly ProjectConfig[]
  /** The live project directory (allocation and period after run-time overrides). */
  projects(): ProjectDirectory
  checkIntervalMs(): number
  clock?: () => number
}

export class LowBalanceMonitor {
  readonly #deps: LowBalanceMonitorDeps
  readonly #records: DocumentCollection
  readonly #clock: () => number
  /** Alert ids this process knows exist (fired here or found in the store). */
  readonly #known = new Set<string>()
  readonly #timers = new Set<NodeJS.Timeout>()
  #tick: NodeJS.Timeout | undefined
  #checking = false
  #stopped = false

  constructor(deps: LowBalanceMonitorDeps) {
    this.#deps = deps
    this.#records = deps.store.documents(ALERTS_COLLECTION)
    this.#clock = deps.clock ?? Date.now
  }

  start(): void {
    const loop = () => {
      if (this.#stopped) return
      this.#tick = setTimeout(() => void runInBackground('low-balance-alerts-loop', () => this.check(), this.#deps.log).finally(loop), this.#deps.checkIntervalMs())
      this.#tick.unref()
    }
    loop()
  }

  /** Stops checking and retrying. A delivery cut short stays `delivering` in the store with its attempts so far. */
  stop(): void {
    this.#stopped = true
    clearTimeout(this.#tick)
    for (const timer of this.#timers) clearTimeout(timer)
    this.#timers.clear()
  }

  /** One pass over every project with alerts; failures are logged, never thrown. */
  async check(): Promise<void> {
    if (this.#checking) return
    this.#checking = true
    try {
      for (const config of this.#deps.projectConfigs()) {
        if (!config.alerts || this.#stopped) continue
        await runInBackground('low-balance-alerts', () => this.#checkProject(config.id, config.alerts!), this.#deps.log)
      }
    } finally {
      this.#checking = false
    }
  }

  async #checkProject(projectId: string, alerts: AlertsConfig): Promise<void> {
    const project = this.#deps.projects().byId(projectId)
    if (!project || project.credits.allocation <= 0) return
    const now = this.#clock()
    const period = currentSchedulePeriod(project.credits, now)
    // Thresholds set at run time (PUT /admin/projects/:id/alerts/thresholds) replace the yaml's.
    const thresholds = project.alertThresholds ?? alerts.thresholds
    const due = thresholds.filter((threshold) => !this.#known.has(`${projectId}|${period}|${thresholdId(threshold)}`))
    if (due.length === 0) return
    const balance = await this.#deps.store.balance(projectId, period, project.credits.allocation)
    for (const threshold of due) {
      const level = thresholdLevel(threshold, balance.allocation)
      if (balance.remaining > level) continue
      const id = `${projectId}|${period}|${thresholdId(threshold)}`
      const record: AlertRecord = {
        id,
        projectId,
        period,
        threshold,
        level,
        balance: { allocation: balance.allocation, used: balance.used, remaining: balance.remaining },
        firedAt: new Date(now).toISOString(),
        url: alerts.url,
        state: 'delivering',
        attempts: [],
      }
      const { created } = await this.#records.insertIfAbsent(id, projectId, record)
      this.#known.add(id)
      if (created) {
        this.#deps.log.info({ project: projectId, period, threshold: thresholdId(threshold), remaining: balance.remaining }, 'low-balance alert fired')
        void runInBackground('alert-webhook-delivery', () => this.#deliver(record, alerts), this.#deps.log)
      }
    }
  }

  /** Sends the webhook, retrying after failures; each attempt is written to the record. */
  async #deliver(record: AlertRecord, alerts: AlertsConfig): Promise<void> {
    const body = JSON.stringify({
      type: 'credits.low_balance',
      id: record.id,
      project: record.projectId,
      period: record.period,
      threshold: record.threshold,
      level: record.level,
      balance: record.balance,
      firedAt: record.firedAt,
    })
    for (let n = record.attempts.length + 1; n <= alerts.maxAttempts && !this.#stopped; n++) {
      const attempt = await this.#attempt(n, alerts, body)
      record.attempts.push(attempt)
      const ok = attempt.error === undefined
      if (ok) record.state = 'delivered'
      else if (n >= alerts.maxAttempts) record.state = 'failed'
      const delay = backoffMs(n, alerts.retryBaseMs, alerts.retryMaxMs)
      if (record.state === 'delivering') record.nextAttemptAt = new Date(this.#clock() + delay).toISOString()
      else delete record.nextAttemptAt
      await runInBackground('alert-webhooks', () => this.#records.update(record.id, record), this.#deps.log)
      if (record.state !== 'delivering') {
        const line = ok ? this.#deps.log.info : this.#deps.log.warn
        line.call(this.#deps.log, { alert: record.id, attempts: n, state: record.state }, 'low-balance webhook finished')
        return
      }
      await new Promise<void>((resume) => {
        const timer = setTimeout(() => {
          this.#timers.delete(timer)
          resume()
        }, delay)
        timer.unref()
        this.#timers.add(timer)
      })
    }
  }

  async #attempt(n: number, alerts: AlertsConfig, body: string): Promise<AlertAttempt> {
    const startedMs = this.#clock()
    const timestamp = Math.floor(startedMs / 1000)
    const started = performance.now()
    const at = new Date(startedMs).toISOString()
    try {
      const res = await fetch(alerts.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'tollgate-alerts/1',
          [TIMESTAMP_HEADER]: String(timestamp),
          [SIGNATURE_HEADER]: signWebhook(alerts.secret, timestamp, body),
        },
        body,
        redirect: 'manual',
        signal: AbortSignal.timeout(alerts.timeoutMs),
      })
      await res.arrayBuffer().catch(() => undefined)
      const durationMs = Math.round(performance.now() - started)
      if (res.status >= 200 && res.status < 300) return { n, at, status: res.status, durationMs }
      return { n, at, status: res.status, error: `receiver answered ${res.status}`, durationMs }
    } catch (error) {
      const cause = (error as { cause?: { code?: string } }).cause?.code
      const name = (error as Error).name
      const why = name === 'TimeoutError' ? `no answer within ${alerts.timeoutMs} ms` : (cause ?? (error as Error).message)
      return { n, at, error: why, durationMs: Math.round(performance.now() - started) }
    }
  }

  /** Alerts of one project, newest first. */
  async list(projectId: string, limit = 100): Promise<AlertRecord[]> {
    const stored = await this.#records.listByOwner<AlertRecord>(projectId, 10_000)
    return stored.map((s) => s.doc).reverse().slice(0, limit)
  }
}
