/**
 * The fixed-rate phase: what a proxy adds to the latency of a moderate load, against the upstream
 * answering directly.
 *
 * autocannon `overallRate` makes each connection send its share of the second back to back when
 * the second starts, so each second is a burst of ~100–250 ms followed by silence. Two targets can
 * therefore be loaded *at the same time*, half a second out of phase, without their bursts
 * meeting: each round pairs `direct` with one proxy, both measured in the same seconds. On a shared
 * VM the machine's speed drifts by up to 2× from one second to the next (measured: a spin loop's
 * rate per 200 ms on one vCPU moved between 37 and 66 units), and measuring the two one after the
 * other put that drift into their difference; paired rounds cancel it. Which of the pair starts
 * first alternates by round.
 *
 * The evenly paced generator (bench/lib/paced.ts) is open-loop and never silent, so it cannot share
 * the seconds: its targets are measured one after the other, as before.
 */
import { cpuMicros } from './processes.ts'
import { runAutocannon, type LoadResult } from './load.ts'
import { runPaced } from './paced.ts'
import type { Target, TargetName } from './targets.ts'

/** One round of a proxy paired with `direct` (autocannon) or measured after it (paced). */
export interface PairedRound {
  direct: LoadResult
  proxy: LoadResult
  /** CPU µs per request of the proxy process during the round: doubles when the host slows its vCPU. */
  proxyCpuUs: number
}

export interface PairedRun {
  name: TargetName
  generator: 'autocannon' | 'paced'
  rounds: PairedRound[]
}

export interface FixedRateOptions {
  rate: number
  seconds: number
  connections: number
  rounds: number
  /** Seconds of one unrecorded pair per proxy first: the generators' own code is cold until then. */
  warmupSeconds: number
  log(line: string): void
}

/** Offset between the two targets of a pair: half of autocannon's one-second pacing period. */
const PHASE_MS = 500

async function phasedPair(direct: Target, proxy: Target, options: FixedRateOptions, proxyFirst: boolean): Promise<[LoadResult, LoadResult]> {
  const run = (target: Target) => runAutocannon(target.url, options.seconds, options.connections, options.rate)
  const [first, second] = proxyFirst ? [proxy, direct] : [direct, proxy]
  const firstRun = run(first)
  await new Promise((resolve) => setTimeout(resolve, PHASE_MS))
  const [a, b] = await Promise.all([firstRun, run(second)])
  return proxyFirst ? [b, a] : [a, b]
}

/**
 * Runs `options.rounds` rounds; in each, every proxy in `proxies` is paired with `direct`: with
 * autocannon in the same seconds, with the paced generator right after it.
 */
export async function runFixedRate(direct: Target, proxies: Target[], options: FixedRateOptions): Promise<PairedRun[]> {
  const runs: PairedRun[] = []
  for (const generator of ['autocannon', 'paced'] as const) for (const proxy of proxies) runs.push({ name: proxy.name, generator, rounds: [] })
  for (const proxy of proxies) {
    options.log(`fixed rate: warm-up pair direct + ${proxy.name}, ${options.warmupSeconds}s`)
    await phasedPair(direct, proxy, { ...options, seconds: options.warmupSeconds }, false)
  }
  for (let r = 0; r < options.rounds; r++) {
    for (const run of runs) {
      const proxy = proxies.find((p) => p.name === run.name)!
      // The direct run of the pair does not touch the proxy: its CPU over the round is its own load's.
      const cpuBefore = cpuMicros(proxy.proc.pid)
      const [directResult, proxyResult] = run.generator === 'autocannon'
        ? await phasedPair(direct, proxy, options, r % 2 === 1)
        : [await runPaced(direct.url, options.seconds, options.rate, options.connections), await runPaced(proxy.url, options.seconds, options.rate, options.connections)]
      run.rounds.push({ direct: directResult, proxy: proxyResult, proxyCpuUs: (cpuMicros(proxy.proc.pid) - cpuBefore) / Math.max(proxyResult.requests, 1) })
      options.log(roundLine(run, r, options))
    }
  }
  return runs
}

function roundLine(run: PairedRun, r: number, options: FixedRateOptions): string {
  const round = run.rounds[r]
  const diff = round.proxy.p99Ms - round.direct.p99Ms
  return `fixed rate ${options.rate} req/s (${run.generator}) round ${r + 1}/${options.rounds}: direct p99 ${round.direct.p99Ms.toFixed(2)} ms, ${run.name} p99 ${round.proxy.p99Ms.toFixed(2)} ms (${diff >= 0 ? '+' : ''}${diff.toFixed(2)}), p50 ${round.direct.p50Ms.toFixed(2)} / ${round.proxy.p50Ms.toFixed(2)} ms, proxy ${round.proxyCpuUs.toFixed(0)} µs/req, failed ${round.direct.failures + round.proxy.failures}`
}
