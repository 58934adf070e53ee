/**
 * One named upstream: its targets, the choice among them, its retry budget and hedge threshold, and
 * the client handler plugins use (`init.upstream(name).pool.request(...)`).
 */
import type { Dispatcher } from 'undici'
import type { UpstreamConfig } from './config.ts'
import { errors, type GatewayError } from '../errors.ts'
import { RetryBudget } from './budget.ts'
import { chooseTarget, type Choice, type ChoicePolicy } from './choose.ts'
import { LatencyWindow } from './latency-window.ts'
import { Target } from './target.ts'
import { PoolClient } from './pool-client.ts'
import { startProbes } from './probe.ts'

export class UpstreamPool {
  readonly targets: Target[]
  readonly budget: RetryBudget
  readonly latency: LatencyWindow | undefined
  /** What handler plugins call: `.request()` picks a target (and retries when told the call is safe). */
  readonly pool: PoolClient
  /** The first target's URL parts (kept for plugins that read them; every target should share the path). */
  readonly origin: string
  readonly basePath: string
  /** Whether anything beyond one plain attempt can happen (the forwarder's cheap path when not). */
  readonly plain: boolean
  /**
   * Requests answered by joining an identical exchange already in flight (jsonrpc's read-only
   * coalescing, response-cache's followers). They never reach a target, so they are counted on
   * the pool, by the plugins that coalesce; the operator page shows them beside the targets.
   */
  coalesced = 0
  readonly #policy: ChoicePolicy
  #stopProbes: (() => void) | undefined

  constructor(readonly name: string, readonly config: UpstreamConfig) {
    this.targets = config.targets.map((t) => new Target(t, config, config.health, config.breaker.recoverMs))
    this.budget = new RetryBudget(config.retry.budgetPercent, config.retry.minPerWindow)
    this.latency = config.hedge.percentile > 0 ? new LatencyWindow(config.hedge.percentile) : undefined
    this.origin = this.targets[0].origin
    this.basePath = this.targets[0].basePath
    this.plain = this.targets.length === 1 && config.retry.maxRetries === 0 && !this.hedges && config.breaker.maxConcurrent === 0
    const { maxConcurrent, maxPending } = config.breaker
    this.#policy = { maxConcurrent, maxPending, balance: config.balance, preferZone: config.preferZone }
    this.pool = new PoolClient(this)
    if (config.health.probe) this.#stopProbes = startProbes(this.name, this.targets, config.health.probe)
  }

  get hedges(): boolean {
    return this.config.hedge.afterMs > 0 || this.config.hedge.percentile > 0
  }

  /** Ms without an answer head after which a safe request is hedged; 0 = never. */
  hedgeAfterMs(): number {
    const floor = this.config.hedge.afterMs
    if (!this.latency) return floor
    return Math.max(floor, this.latency.value()) || 0
  }

  /** A target for the next attempt, never `exclude` when another can take it; undefined = breaker refuses; THROTTLED = every target backs off after a 429. */
  choose(exclude?: Target, now = Date.now()): Choice {
    return chooseTarget(this.targets, exclude, now, this.#policy)
  }

  /** The gateway's own 429 while every target backs off, with the Retry-After left. */
  throttledError(): GatewayError {
    const seconds = this.throttledForS()
    return errors.upstreamThrottled(`upstream ${this.name} asked for fewer requests (429); retry in ${seconds} s`, { headers: { 'retry-after': String(seconds) } })
  }

  /** Seconds until the first target's Retry-After ends (at least 1: during the ramp a retry soon may pass). */
  throttledForS(now = Date.now()): number {
    let soonest = Infinity
    for (const target of this.targets) soonest = Math.min(soonest, target.blockedUntil - now)
    return Math.max(1, Math.ceil(soonest / 1000))
  }

  /** The path a caller built from `basePath`, moved onto another target's prefix. */
  pathFor(target: Target, path: string): string {
    if (target.basePath === this.basePath || !path.startsWith(this.basePath)) return path
    // '/v2/key' moved onto a target without a prefix is '/', never '' (undici refuses an empty path).
    return target.basePath + path.slice(this.basePath.length) || '/'
  }

  async close(): Promise<void> {
    this.#stopProbes?.()
    await Promise.allSettled(this.targets.map((t) => t.pool.close()))
  }

  async destroy(): Promise<void> {
    this.#stopProbes?.()
    await Promise.allSettled(this.targets.map((t) => t.pool.destroy()))
  }
}

export type { Dispatcher }
