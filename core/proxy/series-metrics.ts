/**
 * A counter and a histogram for the request path, whose series are plain numbers: an increment is
 * one addition, an observation a bound scan and three additions. prom-client's own `inc` and
 * `observe` validate and hash the label set on every call and key histogram buckets by the bound's
 * decimal string, about a microsecond per call here, and the gateway makes three such calls per
 * request. Both register in a prom-client {@link Registry} like any metric of it (prom-client reads
 * `name`, `help`, `type`, `aggregator`, `get()` and `reset()`), so /metrics shows them in the same
 * text format, next to the metrics kept with prom-client itself.
 *
 * Series are made once per label set and kept by the caller (the route's compiled metrics).
 *
 * @example
 * ```ts
 * const duration = new SeriesHistogram({ name: 'x_seconds', help: 'Time.', labelNames: ['route'], buckets: [0.1, 1], registers: [registry] })
 * const echo = duration.series(['echo'])
 * echo.observe(0.05)  // x_seconds_bucket{route="echo",le="0.1"} 1
 * ```
 */
import type { Registry } from 'prom-client'

interface MetricValue {
  labels: Record<string, string | number>
  value: number
  metricName?: string
}

interface Options {
  name: string
  help: string
  labelNames: readonly string[]
  registers: Registry[]
}

abstract class SeriesMetric<S> {
  readonly name: string
  readonly help: string
  readonly aggregator = 'sum'
  abstract readonly type: 'counter' | 'histogram'
  protected readonly labelNames: readonly string[]
  protected readonly all = new Map<string, { labels: Record<string, string>; series: S }>()

  constructor(options: Options) {
    this.name = options.name
    this.help = options.help
    this.labelNames = options.labelNames
    for (const registry of options.registers) registry.registerMetric(this as never)
  }

  /** The series of one label set (values in `labelNames` order), made on first use. */
  series(labelValues: readonly string[]): S {
    if (labelValues.length !== this.labelNames.length) throw new TypeError(`${this.name}: expected ${this.labelNames.length} label values, got ${labelValues.length}`)
    const key = labelValues.join('\u0000')
    let entry = this.all.get(key)
    if (entry === undefined) {
      const labels: Record<string, string> = {}
      this.labelNames.forEach((name, i) => (labels[name] = labelValues[i]))
      entry = { labels, series: this.create() }
      this.all.set(key, entry)
    }
    return entry.series
  }

  /** Zeroes every series (prom-client's `registry.resetMetrics()`). */
  reset(): void {
    for (const { series } of this.all.values()) this.zero(series)
  }

  get(): { name: string; help: string; type: string; aggregator: string; values: MetricValue[] } {
    const values: MetricValue[] = []
    for (const { labels, series } of this.all.values()) this.export(labels, series, values)
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values }
  }

  protected abstract create(): S
  protected abstract zero(series: S): void
  protected abstract export(labels: Record<string, string>, series: S, into: MetricValue[]): void
}

export class CounterSeries {
  value = 0

  inc(by = 1): void {
    this.value += by
  }
}

export class SeriesCounter extends SeriesMetric<CounterSeries> {
  readonly type = 'counter'

  protected create(): CounterSeries {
    return new CounterSeries()
  }

  protected zero(series: CounterSeries): void {
    series.value = 0
  }

  protected export(labels: Record<string, string>, series: CounterSeries, into: MetricValue[]): void {
    into.push({ labels, value: series.value })
  }
}

export class HistogramSeries {
  /** Observations per bucket (not cumulative); the last slot is above the highest bound. */
  readonly counts: Float64Array
  sum = 0
  count = 0

  constructor(readonly bounds: Float64Array) {
    this.counts = new Float64Array(bounds.length + 1)
  }

  observe(value: number): void {
    if (value !== value) return
    const bounds = this.bounds
    let i = 0
    while (i < bounds.length && value > bounds[i]) i++
    this.counts[i]++
    this.sum += value
    this.count++
  }
}

export class SeriesHistogram extends SeriesMetric<HistogramSeries> {
  readonly type = 'histogram'
  readonly #bounds: Float64Array

  constructor(options: Options & { buckets: readonly number[] }) {
    super(options)
    this.#bounds = Float64Array.from([...options.buckets].sort((a, b) => a - b))
  }

  protected create(): HistogramSeries {
    return new HistogramSeries(this.#bounds)
  }

  protected zero(series: HistogramSeries): void {
    series.counts.fill(0)
    series.sum = 0
    series.count = 0
  }

  protected export(labels: Record<string, string>, series: HistogramSeries, into: MetricValue[]): void {
    let cumulative = 0
    for (let i = 0; i <= this.#bounds.length; i++) {
      cumulative += series.counts[i]
      const le = i < this.#bounds.length ? this.#bounds[i] : '+Inf'
      into.push({ labels: { ...labels, le }, value: cumulative, metricName: `${this.name}_bucket` })
    }
    into.push({ labels, value: series.sum, metricName: `${this.name}_sum` })
    into.push({ labels, value: series.count, metricName: `${this.name}_count` })
  }
}
