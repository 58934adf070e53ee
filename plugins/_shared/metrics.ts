/**
 * Metrics shared by several plugin instances. A route's plugins are built once per route and per
 * config build, and every build registers on the same gateway Registry, so a metric is created on
 * first use and found again afterwards (prom-client refuses a second metric of the same name).
 *
 * This folder has no index.ts: the plugin registry skips it; it only holds helpers for plugins.
 */
import { Counter, type Registry } from 'prom-client'

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
