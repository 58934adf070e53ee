/**
 * Prometheus metrics of the core, one Registry per gateway instance (tests run several).
 * Labels are bounded: route name and API type come from config, status is a class (2xx...).
 * Never a key, never a raw path.
 */
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client'
import { backgroundErrorCounts, storeRetryCounts } from './resilience.ts'
import { SeriesCounter, SeriesHistogram, type CounterSeries, type HistogramSeries } from './series-metrics.ts'

/** One project's credits, as the gauges export them. */
export interface ProjectCredits {
  project: string
  allocation: number
  balance: number
}

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

export class CoreMetrics {
  readonly registry = new Registry()
  // The three metrics of every request are series of plain numbers (see series-metrics.ts).
  readonly requests = new SeriesCounter({
    name: 'tollgate_http_requests_total',
    help: 'Requests answered, by route, API type and status class.',
    labelNames: ['route', 'api_type', 'status_class'],
    registers: [this.registry],
  })
  readonly duration = new SeriesHistogram({
    name: 'tollgate_http_request_duration_seconds',
    help: 'Time from request start to the end of the answer, by route.',
    labelNames: ['route'],
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  })
  readonly upstreamDuration = new SeriesHistogram({
    name: 'tollgate_upstream_duration_seconds',
    help: 'Time spent waiting on the upstream, by route.',
    labelNames: ['route'],
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  })
  /** Counted by the pipeline as a plain number; the gauge reads it only when scraped. */
  readonly inFlightRequests = { count: 0 }
  readonly inFlight: Gauge = new Gauge({
    name: 'tollgate_http_requests_in_flight',
    help: 'Requests being handled right now.',
    registers: [this.registry],
    collect: (): void => this.inFlight.set(this.inFlightRequests.count),
  })
  readonly reloads = new Counter({
    name: 'tollgate_config_reloads_total',
    help: 'Config reloads by result (success, failure).',
    labelNames: ['result'] as const,
    registers: [this.registry],
  })
  readonly lastReload = new Gauge({
    name: 'tollgate_config_last_reload_success_timestamp_seconds',
    help: 'Unix time of the last successful config load.',
    registers: [this.registry],
  })
  readonly configInfo = new Gauge({
    name: 'tollgate_config_info',
    help: 'Always 1; the hash label identifies the config in service.',
    labelNames: ['hash'] as const,
    registers: [this.registry],
  })

  /** Read from core/proxy/resilience.ts when scraped (per process). */
  readonly backgroundErrors: Counter = new Counter({
    name: 'tollgate_background_errors_total',
    help: 'Failures of work done outside any request (store heartbeat, reaper, usage flush, settings sync, alerts, workstations...), by task; each is caught and the task keeps running.',
    labelNames: ['task'] as const,
    registers: [this.registry],
    collect: (): void => {
      this.backgroundErrors.reset()
      for (const [task, count] of Object.entries(backgroundErrorCounts())) this.backgroundErrors.inc({ task }, count)
    },
  })
  readonly storeRetries: Counter = new Counter({
    name: 'tollgate_store_batch_retries_total',
    help: 'Shared-engine write batches sent again after PostgreSQL rolled them back for a serialization failure (40001) or a deadlock (40P01), by SQLSTATE.',
    labelNames: ['code'] as const,
    registers: [this.registry],
    collect: (): void => {
      this.storeRetries.reset()
      for (const [code, count] of Object.entries(storeRetryCounts())) this.storeRetries.inc({ code }, count)
    },
  })

  /** Where the credit gauges read from; set once the store and projects exist (see trackCredits). */
  #creditSource: (() => Promise<ProjectCredits[]>) | undefined
  // Per project, read from the store when scraped, never on the request path. With --workers
  // every worker reads the same store: the primary keeps one value (max), not their sum.
  readonly creditAllocation: Gauge = new Gauge({
    name: 'tollgate_project_credit_allocation',
    help: "Credits a project is allocated for its current period (projects[].credits.allocation, or its run-time setting).",
    labelNames: ['project'] as const,
    aggregator: 'max',
    registers: [this.registry],
    collect: () => this.#collectCredits(),
  })
  readonly creditBalance: Gauge = new Gauge({
    name: 'tollgate_project_credit_balance',
    help: "Credits a project has left in its current period: allocation + granted - used, never below 0.",
    labelNames: ['project'] as const,
    aggregator: 'max',
    registers: [this.registry],
    collect: () => this.#collectCredits(),
  })

  constructor() {
    this.registry.setDefaultLabels({})
    collectDefaultMetrics({ register: this.registry, prefix: 'tollgate_' })
    // prom-client names these gauges `_total`, which promtool rejects for non-counters.
    for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) {
      this.registry.removeSingleMetric(`tollgate_${name}`)
    }
    this.reloads.inc({ result: 'success' }, 0)
    this.reloads.inc({ result: 'failure' }, 0)
  }

  /** Makes the credit gauges read `source` at each scrape (projects with an allocation of 0 are left out). */
  trackCredits(source: () => Promise<ProjectCredits[]>): void {
    this.#creditSource = source
  }

  /** One store read per scrape: the registry collects both gauges at once, and both await it. */
  #collecting: Promise<void> | undefined

  #collectCredits(): Promise<void> {
    this.#collecting ??= this.#readCredits().finally(() => {
      this.#collecting = undefined
    })
    return this.#collecting
  }

  async #readCredits(): Promise<void> {
    if (!this.#creditSource) return
    // A store that cannot answer now keeps the last values (its own health is /readyz's concern).
    const credits = await this.#creditSource().catch(() => undefined)
    if (!credits) return
    // Reset first: a project removed since the last scrape must disappear, not keep its last value.
    this.creditAllocation.reset()
    this.creditBalance.reset()
    for (const { project, allocation, balance } of credits) {
      this.creditAllocation.set({ project }, allocation)
      this.creditBalance.set({ project }, balance)
    }
  }

  configLoaded(hash: string): void {
    this.configInfo.reset()
    this.configInfo.set({ hash: hash.slice(0, 16) }, 1)
    this.lastReload.set(Date.now() / 1000)
  }
}

/** The series of one route, made once per table build so the hot path never looks up labels. */
export class RouteMetrics {
  readonly #metrics: CoreMetrics
  readonly #route: string
  /** Counter series by API type label, then by status class (index: status / 100). */
  readonly #counters = new Map<string, CounterSeries[]>()
  readonly duration: HistogramSeries
  readonly upstreamDuration: HistogramSeries

  constructor(metrics: CoreMetrics, route: string) {
    this.#metrics = metrics
    this.#route = route
    this.duration = metrics.duration.series([route])
    this.upstreamDuration = metrics.upstreamDuration.series([route])
  }

  count(apiType: string | undefined, status: number): void {
    const apiLabel = apiType ?? 'none'
    const hundreds = Math.floor(status / 100)
    let byClass = this.#counters.get(apiLabel)
    if (!byClass) this.#counters.set(apiLabel, (byClass = []))
    let series = byClass[hundreds]
    if (!series) series = byClass[hundreds] = this.#metrics.requests.series([this.#route, apiLabel, `${hundreds}xx`])
    series.inc()
  }
}
