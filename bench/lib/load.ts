/**
 * Load generators: wrk (preferred, pinned to the load core) and autocannon (in-process fallback,
 * and the fixed-rate test). Both report the same shape.
 */
import { execFileSync } from 'node:child_process'
import autocannon from 'autocannon'
import { LOAD_CORE } from './targets.ts'
import { startPinned, stopProcess } from './processes.ts'

export interface LoadResult {
  requests: number
  seconds: number
  rps: number
  p50Ms: number
  p99Ms: number
  /** Non-2xx answers plus socket errors/timeouts: must be 0 for a valid run. */
  failures: number
  tool: 'wrk' | 'autocannon' | 'paced'
}

export function wrkVersion(): string | undefined {
  try {
    execFileSync('wrk', ['-v'], { stdio: 'pipe' })
  } catch (error) {
    // wrk -v prints its banner and exits 1.
    const out = String((error as { stdout?: Buffer }).stdout ?? '')
    const match = out.match(/wrk\s+(\S+)/)
    if (match) return match[1]
  }
  return undefined
}

const UNIT_MS: Record<string, number> = { us: 0.001, ms: 1, s: 1000, m: 60_000 }

function toMs(value: string, unit: string): number {
  return Number(value) * UNIT_MS[unit]
}

/** Parses `wrk --latency` output. */
export function parseWrk(out: string): LoadResult {
  const total = out.match(/(\d+) requests in ([\d.]+)(us|ms|s|m)/)
  const rps = out.match(/Requests\/sec:\s+([\d.]+)/)
  const p50 = out.match(/\s50%\s+([\d.]+)(us|ms|s|m)/)
  const p99 = out.match(/\s99%\s+([\d.]+)(us|ms|s|m)/)
  if (!total || !rps || !p50 || !p99) throw new Error(`cannot parse wrk output:\n${out}`)
  const non2xx = Number(out.match(/Non-2xx or 3xx responses:\s+(\d+)/)?.[1] ?? 0)
  const socket = out.match(/Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/)
  const socketErrors = socket ? socket.slice(1).reduce((sum, n) => sum + Number(n), 0) : 0
  return {
    requests: Number(total[1]),
    seconds: toMs(total[2], total[3]) / 1000,
    rps: Number(rps[1]),
    p50Ms: toMs(p50[1], p50[2]),
    p99Ms: toMs(p99[1], p99[2]),
    failures: non2xx + socketErrors,
    tool: 'wrk',
  }
}

/** One closed-loop wrk run: 1 thread on the load core, `connections` keep-alive connections. */
export async function runWrk(url: string, seconds: number, connections: number, headers: Record<string, string> = {}): Promise<LoadResult> {
  const headerArgs = Object.entries(headers).flatMap(([name, value]) => ['-H', `${name}: ${value}`])
  // Started through the process registry, so SIGINT stops a running wrk by its PID too.
  const proc = startPinned('wrk', LOAD_CORE, 'wrk', ['-t1', `-c${connections}`, `-d${seconds}s`, '--timeout', '5s', '--latency', ...headerArgs, url])
  const timer = setTimeout(() => void stopProcess(proc, 1000), (seconds + 30) * 1000)
  await proc.exited
  clearTimeout(timer)
  const out = proc.output.join('\n')
  if (proc.child.exitCode !== 0) throw new Error(`wrk failed (exit ${proc.child.exitCode ?? proc.child.signalCode}):\n${out}`)
  return parseWrk(out)
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]
}

/**
 * autocannon in this process (which runs pinned to the load core). Latencies are taken from each
 * response (µs resolution) rather than autocannon's histogram, which rounds to whole milliseconds.
 * With `overallRate`, autocannon paces per connection per second (see bench/README.md).
 */
export async function runAutocannon(url: string, seconds: number, connections: number, overallRate?: number): Promise<LoadResult> {
  const latencies: number[] = []
  const instance = autocannon({ url, connections, duration: seconds, overallRate, timeout: 5 })
  instance.on('response', (_client: unknown, statusCode: number, _bytes: number, responseTimeMs: number) => {
    if (statusCode >= 200 && statusCode < 300) latencies.push(responseTimeMs)
  })
  const result = await instance
  const sorted = Float64Array.from(latencies).sort()
  return {
    requests: result.requests.total,
    seconds: result.duration,
    rps: result.requests.total / result.duration,
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    failures: result.non2xx + result.errors + result.timeouts,
    tool: 'autocannon',
  }
}
