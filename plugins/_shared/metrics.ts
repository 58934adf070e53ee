/**
 * Metrics shared by several plugin instances. A route's plugins are built once per route and per
 * config build, and every build registers on the same gateway Registry, so a metric is created on
 * first use and found again afterwards (prom-client refuses a second metric of the same name).
 *
 * This folder has no index.ts: the plugin registry skips it; it only holds helpers for plugins.
 */
import { Counter, type Registry } from 'prom-client'
import { SeriesCounter } from '../../core/proxy/plugin-api.ts'

/**
 * The counter `name` of `registry`, created on first call.
 *
 * @example
 * ```ts
 * const limited = sharedCounter(init.metrics, 'tollgate_rate_limited_total', 'Requests refused with 429.', ['route'])
 * limited.labels(init.routeName).inc()
 * ```
 */
export function sharedCounter<L extends string>(registry: Registry, name: string, help: string, labelNames: readonly L[]): Counter<L> {
  const existing = registry.getSingleMetric(name)
  if (existing) {
    if (!(existing instanceof Counter)) throw new Error(`metric ${name} is already registered with another type`)
    return existing as Counter<L>
  }
  return new Counter({ name, help, labelNames, registers: [registry] })
}

/**
 * Like {@link sharedCounter}, for a counter bumped on every request: its series are plain numbers
 * (core/proxy/series-metrics.ts), kept by the caller per label set, where prom-client's `inc`
 * builds a label hash string and looks it up on every call.
 *
 * @example
 * ```ts
 * const consumed = sharedSeriesCounter(init.metrics, 'tollgate_credits_consumed_total', 'Credits charged.', ['project', 'api_type'])
 * consumed.series([projectId, apiType]).inc(credits)   // keep the series, not the label values
 * ```
 */
export function sharedSeriesCounter(registry: Registry, name: string, help: string, labelNames: readonly string[]): SeriesCounter {
  const existing = registry.getSingleMetric(name) as unknown
  if (existing) {
    if (!(existing instanceof SeriesCounter)) throw new Error(`metric ${name} is already registered with another type`)
    return existing
  }
  return new SeriesCounter({ name, help, labelNames, registers: [registry] })
}
