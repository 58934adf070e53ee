/**
 * An evenly paced open-loop load generator, next to autocannon's `overallRate` (which lets each
 * connection send its per-second share back to back at the start of every second, so its
 * "fixed rate" arrives in bursts). Here request i is due at start + i/rate; its latency is
 * measured from when it was due, not from when it was sent, so a stalled target cannot hide its
 * stall by delaying the requests that would have measured it (no coordinated omission).
 */
import { Pool } from 'undici'
import type { LoadResult } from './load.ts'

function percentile(sorted: Float64Array, p: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] : NaN
}

/** Sent at the same pace before measuring: opens the pool's connections, warms this code. */
const WARMUP_MS = 500

export async function runPaced(url: string, seconds: number, rate: number, connections: number): Promise<LoadResult> {
  const target = new URL(url)
  const pool = new Pool(target.origin, { connections, pipelining: 1, headersTimeout: 5000, bodyTimeout: 5000 })
  const total = Math.round(((seconds * 1000 + WARMUP_MS) / 1000) * rate)
  const intervalMs = 1000 / rate
  const latencies = new Float64Array(total)
  let measured = 0
  let failures = 0
  let sent = 0
  let finished = 0
  const start = performance.now()
  try {
    await new Promise<void>((resolve) => {
      const settle = () => {
        if (++finished === total) resolve()
      }
      const send = async (due: number) => {
        let ok = false
        try {
          const response = await pool.request({ path: target.pathname + target.search, method: 'GET' })
          await response.body.dump()
          ok = response.statusCode >= 200 && response.statusCode < 300
        } catch {
          ok = false
        }
        if (due - start >= WARMUP_MS) {
          if (ok) latencies[measured++] = performance.now() - due
          else failures++
        }
        settle()
      }
      // Timers fire at best every ~1 ms: each tick sends every request that has come due.
      const tick = () => {
        const now = performance.now()
        while (sent < total && start + sent * intervalMs <= now) void send(start + sent++ * intervalMs)
        if (sent < total) setTimeout(tick, 1)
      }
      tick()
    })
  } finally {
    await pool.close()
  }
  const elapsed = (performance.now() - start - WARMUP_MS) / 1000
  const sorted = latencies.subarray(0, measured).sort()
  return { requests: measured, seconds: elapsed, rps: measured / elapsed, p50Ms: percentile(sorted, 50), p99Ms: percentile(sorted, 99), failures, tool: 'paced' }
}
