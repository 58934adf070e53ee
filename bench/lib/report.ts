/**
 * Turns per-round measurements into the printed table, the ratios against their targets and the
 * fixed-rate comparison (markdown, so it can be pasted into RESULTS.md as is).
 */
import type { LoadResult } from './load.ts'
import type { PairedRound, PairedRun } from './fixed-rate.ts'
import { LABELS, type TargetName } from './targets.ts'

export interface Round {
  load: LoadResult
  /** CPU µs per request of the measured proxy (undefined for `direct`). */
  proxyCpuUs?: number
  upstreamCpuUs: number
  /** Share of each core that was busy during the round, all processes of the machine counted. */
  loadCoreBusy: number
  proxyCoreBusy: number
}

export interface Summary {
  name: TargetName
  rounds: Round[]
  rps: number
  p50Ms: number
  p99Ms: number
  proxyCpuUs?: number
  upstreamCpuUs: number
  loadCoreBusy: number
  proxyCoreBusy: number
  failures: number
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

export function summarise(name: TargetName, rounds: Round[]): Summary {
  const cpu = rounds.map((r) => r.proxyCpuUs).filter((v): v is number => v !== undefined)
  return {
    name,
    rounds,
    rps: median(rounds.map((r) => r.load.rps)),
    p50Ms: median(rounds.map((r) => r.load.p50Ms)),
    p99Ms: median(rounds.map((r) => r.load.p99Ms)),
    proxyCpuUs: cpu.length ? median(cpu) : undefined,
    upstreamCpuUs: median(rounds.map((r) => r.upstreamCpuUs)),
    loadCoreBusy: median(rounds.map((r) => r.loadCoreBusy)),
    proxyCoreBusy: median(rounds.map((r) => r.proxyCoreBusy)),
    failures: rounds.reduce((sum, r) => sum + r.load.failures, 0),
  }
}

const fmt = (n: number | undefined, digits = 0) => (n === undefined || Number.isNaN(n) ? '—' : n.toFixed(digits))

export function throughputTable(summaries: Summary[]): string {
  const lines = [
    '| target | req/s (median) | p50 ms | p99 ms | proxy CPU µs/req | proxy core: proxy / all busy | load core busy | upstream CPU µs/req | req/s per round | failed |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---|---:|',
  ]
  const pct = (share: number | undefined) => (share === undefined ? '—' : `${fmt(100 * share)}%`)
  for (const s of summaries) {
    const perRound = s.rounds.map((r) => fmt(r.load.rps)).join(' / ')
    // Proxy well below 100% with the core near 100%: other processes took the core. Both low:
    // the proxy was not the bottleneck (core 0, wrk + upstream, was).
    const proxyShare = s.proxyCpuUs === undefined ? undefined : (s.proxyCpuUs * s.rps) / 1e6
    const cores = s.proxyCpuUs === undefined ? `— / ${pct(s.proxyCoreBusy)}` : `${pct(proxyShare)} / ${pct(s.proxyCoreBusy)}`
    lines.push(`| ${LABELS[s.name]} | ${fmt(s.rps)} | ${fmt(s.p50Ms, 2)} | ${fmt(s.p99Ms, 2)} | ${fmt(s.proxyCpuUs)} | ${cores} | ${pct(s.loadCoreBusy)} | ${fmt(s.upstreamCpuUs)} | ${perRound} | ${s.failures} |`)
  }
  return lines.join('\n')
}

interface RatioSpec {
  numerator: TargetName
  denominator: TargetName
  label: string
  /** Minimum req/s ratio asked for, if any. */
  target?: number
}

const RATIOS: RatioSpec[] = [
  { numerator: 'tollgate-empty', denominator: 'bare-undici', label: 'tollgate(empty) / bare undici', target: 0.95 },
  { numerator: 'tollgate-empty', denominator: 'fastify-proxy', label: 'tollgate(empty) / @fastify/http-proxy', target: 1.3 },
  { numerator: 'tollgate-empty', denominator: 'nginx', label: 'tollgate(empty) / nginx' },
  { numerator: 'tollgate-typical', denominator: 'nginx', label: 'tollgate(typical) / nginx' },
  { numerator: 'tollgate-typical', denominator: 'tollgate-empty', label: 'tollgate(typical) / tollgate(empty)', target: 0.95 },
  // Issue 31: the typical chain itself past bare undici by a quarter, and twice @fastify/http-proxy.
  { numerator: 'tollgate-typical', denominator: 'bare-undici', label: 'tollgate(typical) / bare undici', target: 1.25 },
  { numerator: 'tollgate-typical', denominator: 'fastify-proxy', label: 'tollgate(typical) / @fastify/http-proxy', target: 2.0 },
]

/** req/s ratios and, since the proxy core is the bottleneck, the inverse CPU-per-request ratios. */
export function ratioTable(summaries: Summary[]): string {
  const by = new Map(summaries.map((s) => [s.name, s]))
  // The verdict uses the ratio of the medians. The median of the per-round ratios (round i of one
  // target against round i of the other, measured back to back) is shown beside it: it cancels drift
  // of the machine between rounds, which the ratio of medians does not.
  const lines = ['| ratio | req/s ratio | per-round req/s ratios (median) | CPU/req ratio (den/num) | target (req/s) | verdict |', '|---|---:|---:|---:|---:|---|']
  for (const spec of RATIOS) {
    const num = by.get(spec.numerator)
    const den = by.get(spec.denominator)
    if (!num || !den) {
      lines.push(`| ${spec.label} | — | — | — | ${spec.target ? `≥ ${spec.target}` : '—'} | not measured |`)
      continue
    }
    const ratio = num.rps / den.rps
    const cpuRatio = num.proxyCpuUs && den.proxyCpuUs ? den.proxyCpuUs / num.proxyCpuUs : undefined
    const paired = num.rounds.length === den.rounds.length ? median(num.rounds.map((r, i) => r.load.rps / den.rounds[i].load.rps)) : undefined
    const verdict = spec.target === undefined ? 'info' : ratio >= spec.target ? 'met' : 'MISSED'
    lines.push(`| ${spec.label} | ${fmt(ratio, 3)} | ${fmt(paired, 3)} | ${fmt(cpuRatio, 3)} | ${spec.target ? `≥ ${spec.target}` : '—'} | ${verdict} |`)
  }
  return lines.join('\n')
}

const GENERATORS = { autocannon: 'autocannon overallRate, paired in the same seconds', paced: 'evenly paced (bench/lib/paced.ts), after direct' }

/** The asked-for bound on tollgate's added p99 at the fixed rate, in ms. */
const P99_BUDGET_MS = 1

/**
 * One row per proxy and generator. The verdict is on the median of the per-round differences
 * (each round's proxy p99 minus the p99 of `direct` measured with it), the estimator for paired
 * measurements; the difference of the two medians is shown beside it.
 */
/** Proxy p99 minus the p99 of the `direct` run paired with it, per round. */
const addedP99 = (run: PairedRun) => run.rounds.map((r) => r.proxy.p99Ms - r.direct.p99Ms)

export function fixedRateTable(runs: PairedRun[], rate: number): string {
  const lines = [
    '| generator | proxy | req/s direct / proxy | p50 ms direct / proxy (median) | p99 ms direct / proxy (median) | p99 − direct per round, ms | median of per-round differences | difference of medians | proxy CPU µs/req (median; per round) | failed |',
    '|---|---|---:|---:|---:|---|---:|---:|---|---:|',
  ]
  for (const run of runs) {
    const of = (pick: (round: PairedRound) => number) => median(run.rounds.map(pick))
    const diffs = addedP99(run)
    const failed = run.rounds.reduce((sum, r) => sum + r.direct.failures + r.proxy.failures, 0)
    lines.push(
      `| ${GENERATORS[run.generator]} | ${LABELS[run.name]} | ${fmt(of((r) => r.direct.rps))} / ${fmt(of((r) => r.proxy.rps))} | ${fmt(of((r) => r.direct.p50Ms), 3)} / ${fmt(of((r) => r.proxy.p50Ms), 3)} | ${fmt(of((r) => r.direct.p99Ms), 3)} / ${fmt(of((r) => r.proxy.p99Ms), 3)} | ${diffs.map((d) => fmt(d, 2)).join(' / ')} | ${fmt(median(diffs), 3)} | ${fmt(of((r) => r.proxy.p99Ms) - of((r) => r.direct.p99Ms), 3)} | ${fmt(of((r) => r.proxyCpuUs))}; ${run.rounds.map((r) => fmt(r.proxyCpuUs)).join(' / ')} | ${failed} |`,
    )
  }
  lines.push('')
  for (const run of runs) {
    if (run.name !== 'tollgate-empty') continue
    const added = median(addedP99(run))
    const verdict = run.generator === 'autocannon' ? (added <= P99_BUDGET_MS ? 'met' : 'MISSED') : 'info: the target names autocannon'
    lines.push(`- ${GENERATORS[run.generator]}: p99 tollgate(empty) − direct at ${rate} req/s = ${added.toFixed(3)} ms, median of ${run.rounds.length} paired rounds (target ≤ ${P99_BUDGET_MS} ms: ${verdict})`)
  }
  return lines.join('\n')
}
