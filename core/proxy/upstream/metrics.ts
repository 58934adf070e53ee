/**
 * Per-target metrics, read from the targets' plain counters when Prometheus scrapes (nothing is
 * done per request beyond the counters themselves). The `target` label is the configured name or
 * the index in `targets`, never the URL (which may carry credentials).
 */
import { Counter, Gauge, type Registry } from 'prom-client'
import type { UpstreamPool } from './pool.ts'
import type { TargetCounters } from './target.ts'

const LABELS = ['upstream', 'target', 'zone']

export function registerUpstreamMetrics(registry: Registry, upstreams: () => Iterable<UpstreamPool>): void {
  // `scale` turns a counter kept in ms into the seconds Prometheus names its unit in.
  const counter = (name: string, help: string, key: keyof TargetCounters, scale = 1) => {
    const metric: Counter = new Counter({
      name,
      help,
      labelNames: LABELS,
      registers: [registry],
      collect() {
        metric.reset()
        for (const upstream of upstreams()) {
          for (const t of upstream.targets) metric.inc({ upstream: upstream.name, target: t.name, zone: t.zone ?? '' }, t.counters[key] * scale)
        }
      },
    })
  }
  counter('tollgate_upstream_target_requests_total', 'Attempts sent to each upstream target (first tries, retries and hedges).', 'requests')
  counter('tollgate_upstream_target_errors_total', 'Attempts that failed at each target: transport errors and 5xx answers.', 'errors')
  counter('tollgate_upstream_target_ejections_total', 'Times each target was ejected by passive health (outlier detection).', 'ejections')
  counter('tollgate_upstream_target_retries_total', 'Retries sent to each target after a safe request failed elsewhere (or there).', 'retries')
  counter('tollgate_upstream_target_hedges_total', 'Hedged attempts sent to each target because the first was slow.', 'hedges')
  counter('tollgate_upstream_target_throttled_total', '429 answers from each target (each lowers the rate sent to it).', 'throttled')
  counter('tollgate_upstream_target_answer_seconds_total', 'Sum of the time to the answer head at each target, in seconds (divided by tollgate_upstream_target_answers_timed_total: the mean).', 'latencySum', 1 / 1000)
  counter('tollgate_upstream_target_answers_timed_total', 'Answer heads timed at each target.', 'latencyCount')
  const healthy: Gauge = new Gauge({
    name: 'tollgate_upstream_target_healthy',
    help: '1 when the target is in the choice (not ejected, not down by probe), else 0.',
    labelNames: LABELS,
    registers: [registry],
    collect() {
      healthy.reset()
      const now = Date.now()
      for (const upstream of upstreams()) {
        for (const t of upstream.targets) healthy.set({ upstream: upstream.name, target: t.name, zone: t.zone ?? '' }, !t.probeDown && now >= t.ejectedUntil ? 1 : 0)
      }
    },
  })
  const inFlight: Gauge = new Gauge({
    name: 'tollgate_upstream_target_in_flight',
    help: 'Attempts in flight at each target.',
    labelNames: LABELS,
    registers: [registry],
    collect() {
      inFlight.reset()
      for (const upstream of upstreams()) for (const t of upstream.targets) inFlight.set({ upstream: upstream.name, target: t.name, zone: t.zone ?? '' }, t.inFlight)
    },
  })
  const refused: Counter = new Counter({
    name: 'tollgate_upstream_retry_budget_exhausted_total',
    help: 'Retries or hedges not sent because the upstream retry budget was spent.',
    labelNames: ['upstream'],
    registers: [registry],
    collect() {
      refused.reset()
      for (const upstream of upstreams()) refused.inc({ upstream: upstream.name }, upstream.budget.refused)
    },
  })
  const coalesced: Counter = new Counter({
    name: 'tollgate_upstream_coalesced_total',
    help: 'Requests answered from an identical request already in flight to this upstream (they reach no target), by upstream.',
    labelNames: ['upstream'],
    registers: [registry],
    collect() {
      coalesced.reset()
      for (const upstream of upstreams()) coalesced.inc({ upstream: upstream.name }, upstream.coalesced)
    },
  })
}
