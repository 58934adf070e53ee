/**
 * Active health: a GET to each target every `intervalMs`. `unhealthyAfter` failures in a row take
 * the target out of the choice; one success brings it back. Each pass runs through
 * core/proxy/resilience.ts, so a probe can fail any way it likes without touching the process; the timers
 * are unref'd and stopped when the upstream closes.
 */
import { runInBackground } from '../resilience.ts'
import type { HealthConfig } from './config.ts'
import type { Target } from './target.ts'

export function startProbes(upstream: string, targets: readonly Target[], probe: NonNullable<HealthConfig['probe']>): () => void {
  const timers = targets.map((target) => {
    let running = false
    const pass = async () => {
      const { statusCode, body } = await target.pool.request({
        path: target.basePath + probe.path,
        method: 'GET',
        headers: { 'user-agent': 'tollgate-health' },
        signal: AbortSignal.timeout(probe.timeoutMs),
      })
      await body.dump()
      if (statusCode < 200 || statusCode > 299) throw new Error(`probe answered HTTP ${statusCode}`)
    }
    const timer = setInterval(() => {
      if (running) return
      running = true
      void runInBackground(`upstream-probe:${upstream}/${target.name}`, async () => {
        try {
          await pass()
          target.probeFailures = 0
          target.probeDown = false
        } catch (error) {
          if (++target.probeFailures >= probe.unhealthyAfter) target.probeDown = true
          throw error
        } finally {
          running = false
        }
      })
    }, probe.intervalMs)
    timer.unref()
    return timer
  })
  return () => timers.forEach((timer) => clearInterval(timer))
}
