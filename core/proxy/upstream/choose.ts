/**
 * The choice of a target for one attempt, among targets that are healthy, under their concurrency
 * limit and not backing off after a 429; with a preferred zone, only the local ones of those while
 * any is left. `least-loaded` takes the best score (load per weight, scaled by latency);
 * `round-robin` takes weighted turns (nginx's smooth weighted round-robin), blind to load and latency.
 *
 * When no target qualifies, the request is not refused for health alone ("panic mode", as Envoy):
 * the least-loaded target that is not excluded takes it, so a pool of one behaves as a single URL
 * did. Two outcomes refuse instead: every target is backing off after a 429 that carried a
 * Retry-After (THROTTLED: the gateway answers 429 itself rather than send what the upstream asked
 * not to get; a bare 429 may concern one caller only, so it never stops a whole pool), and the
 * breaker's pending limit (undefined).
 */
import type { Balance } from './config.ts'
import type { Target } from './target.ts'

export const THROTTLED = 'throttled'
export type Choice = Target | typeof THROTTLED | undefined

export interface ChoicePolicy {
  maxConcurrent: number
  maxPending: number
  balance?: Balance
  preferZone?: string
}

export function chooseTarget(targets: readonly Target[], exclude: Target | undefined, now: number, policy: ChoicePolicy): Choice {
  const { maxConcurrent, preferZone } = policy
  if (targets.length === 1 && maxConcurrent === 0) return targets[0].admits(now) || !targets[0].askedToWait ? targets[0] : THROTTLED
  // Pass 1: which targets qualify (admits() is asked once: it spends the recovery ramp's credit).
  let local = false
  let qualified = 0
  let throttledOnly = true
  for (const target of targets) {
    target.eligible = false
    if (target === exclude) {
      if (!target.blocked(now) || !target.askedToWait) throttledOnly = false
      continue
    }
    if (!target.available(now) || (maxConcurrent > 0 && target.inFlight >= maxConcurrent)) {
      throttledOnly = false
      continue
    }
    if (!target.admits(now)) {
      if (!target.askedToWait) throttledOnly = false
      continue
    }
    target.eligible = true
    qualified++
    if (preferZone !== undefined && target.zone === preferZone) local = true
  }
  if (qualified > 0) return policy.balance === 'round-robin' ? roundRobin(targets, local ? preferZone : undefined) : byScore(targets, local ? preferZone : undefined)
  if (throttledOnly) return THROTTLED
  // Panic mode: every target is ejected, full or backing off.
  let best: Target | undefined
  let bestScore = Infinity
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
  if (maxConcurrent > 0 && pending >= policy.maxPending) return undefined
  return best
}

function byScore(targets: readonly Target[], zone: string | undefined): Target | undefined {
  let best: Target | undefined
  let bestScore = Infinity
  for (const target of targets) {
    if (!target.eligible || (zone !== undefined && target.zone !== zone)) continue
    const score = target.score()
    if (score < bestScore) {
      best = target
      bestScore = score
    }
  }
  return best
}

/** Smooth weighted round-robin: each turn every candidate gains its weight, the richest is picked and pays the total. */
function roundRobin(targets: readonly Target[], zone: string | undefined): Target | undefined {
  let best: Target | undefined
  let total = 0
  for (const target of targets) {
    if (!target.eligible || (zone !== undefined && target.zone !== zone)) continue
    target.turn += target.weight
    total += target.weight
    if (!best || target.turn > best.turn) best = target
  }
  if (best) best.turn -= total
  return best
}
