/**
 * Prometheus metrics of the core, one Registry per gateway instance (tests run several).
 * Labels are bounded: route name and API type come from config, status is a class (2xx...).
 * Never a key, never a raw path.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

export class CoreMetrics {
  readonly registry = new Registry()
  readonly requests = new Counter({
    name: 'tollgate_http_requests_total',
    help: 'Requests answered, by route, API type and status class.',
    labelNames: ['route', 'api_type', 'status_class'] as const,
    registers: [this.registry],
  })
  readonly duration = new Histogram({
    name: 'tollgate_http_request_duration_seconds',
    help: 'Time from request start to the end of the answer, by route.',
    labelNames: ['route'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  })
  readonly upstreamDuration = new Histogram({
    name: 'tollgate_upstream_duration_seconds',
    help: 'Time spent waiting on the upstream, by route.',
    labelNames: ['route'] as const,
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

  configLoaded(hash: string): void {
    this.configInfo.reset()
    this.configInfo.set({ hash: hash.slice(0, 16) }, 1)
    this.lastReload.set(Date.now() / 1000)
  }
}

type CounterChild = ReturnType<Counter<'route' | 'api_type' | 'status_class'>['labels']>
type HistogramChild = ReturnType<Histogram<'route'>['labels']>

/** Label children of one route, cached so the hot path never builds label objects. */
export class RouteMetrics {
  readonly #metrics: CoreMetrics
  readonly #route: string
  readonly #counters = new Map<string, CounterChild>()
  readonly duration: HistogramChild
  readonly upstreamDuration: HistogramChild

  constructor(metrics: CoreMetrics, route: string) {
    this.#metrics = metrics
    this.#route = route
    this.duration = metrics.duration.labels(route)
    this.upstreamDuration = metrics.upstreamDuration.labels(route)
  }

  count(apiType: string | undefined, status: number): void {
    const statusClass = `${Math.floor(status / 100)}xx`
    const key = `${apiType ?? ''}|${statusClass}`
    let child = this.#counters.get(key)
    if (!child) {
      child = this.#metrics.requests.labels(this.#route, apiType ?? 'none', statusClass)
      this.#counters.set(key, child)
    }
    child.inc()
  }
}
