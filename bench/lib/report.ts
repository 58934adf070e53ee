/**
 * Turns per-round measurements into the printed table, the ratios against their targets and the
 * fixed-rate comparison (markdown, so it can be pasted into RESULTS.md as is).
 */
import type { LoadResult } from './load.ts'
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
  { numerator: 'tollgate-typical', denominator: 'tollgate-empty', label: 'tollgate(typical) / tollgate(empty)', target: 0.85 },
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

export interface RateRun {
  name: TargetName
  generator: 'autocannon' | 'paced'
  /** One result per round. */
  loads: LoadResult[]
}

const GENERATORS = { autocannon: 'autocannon overallRate (bursts)', paced: 'evenly paced (bench/lib/paced.ts)' }

export function fixedRateTable(runs: RateRun[], rate: number): string {
  const lines = ['| generator | target | achieved req/s | p50 ms (median) | p99 ms (median) | p99 ms per round | failed |', '|---|---|---:|---:|---:|---|---:|']
  const p99 = (run: RateRun) => median(run.loads.map((l) => l.p99Ms))
  for (const run of runs) {
    const rps = median(run.loads.map((l) => l.rps))
    const p50 = median(run.loads.map((l) => l.p50Ms))
    const failed = run.loads.reduce((sum, l) => sum + l.failures, 0)
    lines.push(`| ${GENERATORS[run.generator]} | ${LABELS[run.name]} | ${fmt(rps)} | ${fmt(p50, 3)} | ${fmt(p99(run), 3)} | ${run.loads.map((l) => fmt(l.p99Ms, 2)).join(' / ')} | ${failed} |`)
  }
  lines.push('')
  for (const generator of ['autocannon', 'paced'] as const) {
    const of = (name: TargetName) => runs.find((r) => r.name === name && r.generator === generator)
    const [direct, bare, gateway] = [of('direct'), of('bare-undici'), of('tollgate-empty')]
    if (direct && gateway) {
      const diff = p99(gateway) - p99(direct)
      lines.push(`- ${GENERATORS[generator]}: p99 tollgate(empty) − direct at ${rate} req/s = ${diff.toFixed(3)} ms (target ≤ 1 ms: ${diff <= 1 ? 'met' : 'MISSED'})`)
    }
    if (direct && bare) lines.push(`- ${GENERATORS[generator]}: p99 bare undici − direct = ${(p99(bare) - p99(direct)).toFixed(3)} ms (any Node hop, for reference)`)
  }
  return lines.join('\n')
}
