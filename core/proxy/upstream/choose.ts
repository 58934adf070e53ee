/**
 * The choice of a target for one attempt: the best-scored (least load per weight, scaled by
 * latency) among targets that are healthy, under their concurrency limit and not backing off after
 * a 429. When none is, the request is not refused for health alone ("panic mode", as Envoy): the
 * least-loaded target that is not excluded takes it, so a pool of one behaves as a single URL did.
 * Only the breaker's pending limit refuses (undefined).
 */
import type { Target } from './target.ts'

export function chooseTarget(targets: readonly Target[], exclude: Target | undefined, now: number, maxConcurrent: number, maxPending: number): Target | undefined {
  if (targets.length === 1 && maxConcurrent === 0) return targets[0]
  let best: Target | undefined
  let bestScore = Infinity
  for (const target of targets) {
    if (target === exclude || !target.available(now)) continue
    if (maxConcurrent > 0 && target.inFlight >= maxConcurrent) continue
    if (!target.admits(now)) continue
    const score = target.score()
    if (score < bestScore) {
      best = target
      bestScore = score
    }
  }
  if (best) return best
  // Panic mode: every target is ejected, full or backing off.
  let pending = 0
  for (const target of targets) {
    if (maxConcurrent > 0) pending += Math.max(0, target.inFlight - maxConcurrent)
    if (target === exclude && targets.length > 1) continue
    const score = target.score() * (target.available(now) ? 1 : 1000)
    if (score < bestScore) {
      best = target
      bestScore = score
    }
  }
  if (maxConcurrent > 0 && pending >= maxPending) return undefined
  return best
}
