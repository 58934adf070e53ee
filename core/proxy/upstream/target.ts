/**
 * One server of an upstream pool and what the gateway knows of it: its undici keep-alive pool,
 * requests in flight, recent latency, passive health (outlier ejection with a half-open probe back
 * in), active health (probe verdict), the back-off after a 429, and counters for metrics.
 *
 * Everything here is plain numbers updated on the hot path; metrics read them only when scraped.
 */
import { Pool } from 'undici'
import type { HealthConfig, TargetConfig, UpstreamConfig } from './config.ts'

/** Weight of the newest sample in the latency average. */
const EWMA = 0.2
/** Longest Retry-After honoured: an upstream cannot take a target out for longer. */
const MAX_RETRY_AFTER_MS = 60_000
/** Share of the traffic a target gets just after its Retry-After ended; it climbs to 1 over recoverMs. */
const FLOOR_SHARE = 0.1

export interface TargetCounters {
  requests: number
  errors: number
  ejections: number
  retries: number
  hedges: number
  throttled: number
  latencySum: number
  latencyCount: number
}

export class Target {
  readonly pool: Pool
  readonly origin: string
  /** Path prefix of the target URL, without a trailing slash ('' for none). */
  readonly basePath: string
  readonly name: string
  readonly weight: number
  readonly zone: string | undefined
  inFlight = 0
  /** Average time to the answer head, ms (0 until the first answer). */
  latencyMs = 0
  consecutiveFailures = 0
  /** Ejections in a row (reset by a success); the ejection time doubles with each. */
  ejectionsInRow = 0
  ejectedUntil = 0
  /** A half-open target lets one request through; the next ones wait for its verdict. */
  probing = false
  /** Set by the active probe. */
  probeDown = false
  probeFailures = 0
  /** 429 back-off: no traffic until `blockedUntil`, then a share climbing from FLOOR_SHARE to 1. */
  blockedUntil = 0
  recoverUntil = 0
  /** The last 429 carried a Retry-After: only then may the gateway refuse in the target's place (choose.ts). */
  askedToWait = false
  /** Scratch of the choice: this target qualified in the current pick (choose.ts). */
  eligible = false
  /** Smooth weighted round-robin's running credit (choose.ts). */
  turn = 0
  #credit = 0
  readonly counters: TargetCounters = { requests: 0, errors: 0, ejections: 0, retries: 0, hedges: 0, throttled: 0, latencySum: 0, latencyCount: 0 }

  constructor(config: TargetConfig, upstream: UpstreamConfig, readonly health: HealthConfig, readonly recoverMs: number) {
    const url = new URL(config.url)
    this.origin = url.origin
    this.basePath = url.pathname.replace(/\/+$/, '')
    this.name = config.name
    this.weight = config.weight
    this.zone = config.zone
    this.pool = new Pool(url.origin, {
      connections: upstream.connections,
      connect: { timeout: upstream.timeouts.connectMs },
      headersTimeout: upstream.timeouts.headersMs,
      bodyTimeout: upstream.timeouts.bodyMs,
      keepAliveTimeout: upstream.keepAliveTimeoutMs,
      pipelining: 1,
    })
  }

  /** Healthy: not ejected (or its ejection is over and no probe request is out), not down by probe. */
  available(now: number): boolean {
    if (this.probeDown) return false
    if (this.ejectedUntil === 0) return true
    return now >= this.ejectedUntil && !this.probing
  }

  /** Inside a 429's Retry-After: the target asked for no traffic at all. */
  blocked(now: number): boolean {
    return now < this.blockedUntil
  }

  /** Not backing off after a 429; during the recovery ramp only a growing share of picks pass. */
  admits(now: number): boolean {
    if (now < this.blockedUntil) return false
    if (now >= this.recoverUntil) return true
    const share = 1 - (1 - FLOOR_SHARE) * ((this.recoverUntil - now) / Math.max(1, this.recoverUntil - this.blockedUntil))
    this.#credit += share
    if (this.#credit < 1) return false
    this.#credit -= 1
    return true
  }

  /** An attempt leaves for this target. */
  started(): void {
    this.inFlight++
    this.counters.requests++
    // The first request after an ejection is the half-open probe (the clock is read only then).
    if (this.ejectedUntil !== 0 && Date.now() >= this.ejectedUntil) this.probing = true
  }

  /** The answer head arrived: records latency, and health by status. */
  answered(status: number, ms: number): void {
    this.latencyMs = this.latencyMs === 0 ? ms : this.latencyMs + EWMA * (ms - this.latencyMs)
    this.counters.latencySum += ms
    this.counters.latencyCount++
    if (status >= 500) this.failed(Date.now())
    else if (this.consecutiveFailures !== 0 || this.ejectedUntil !== 0 || this.probing) this.succeeded()
  }

  /** The attempt ended (whatever the outcome): frees its slot. */
  ended(): void {
    this.inFlight--
  }

  /** A transport failure or a 5xx. */
  failed(now: number): void {
    this.counters.errors++
    this.consecutiveFailures++
    const halfOpen = this.probing
    this.probing = false
    if (!halfOpen && this.consecutiveFailures < this.health.consecutiveFailures) return
    // A failed half-open probe ejects again, for longer.
    this.ejectionsInRow++
    this.counters.ejections++
    this.ejectedUntil = now + Math.min(this.health.maxEjectionMs, this.health.baseEjectionMs * 2 ** (this.ejectionsInRow - 1))
  }

  succeeded(): void {
    this.consecutiveFailures = 0
    if (this.ejectedUntil !== 0) {
      this.ejectedUntil = 0
      this.ejectionsInRow = 0
    }
    this.probing = false
  }

  /** The target answered 429: back off for its Retry-After (1 s when absent), then recover gradually. */
  throttle(retryAfterMs: number | undefined, now: number): void {
    this.counters.throttled++
    this.askedToWait = retryAfterMs !== undefined
    const wait = Math.min(MAX_RETRY_AFTER_MS, retryAfterMs ?? 1000)
    this.blockedUntil = now + wait
    this.recoverUntil = this.blockedUntil + this.recoverMs
    this.#credit = 0
  }

  /** Lower is better: load per unit of weight, scaled by latency so slow targets get less. */
  score(): number {
    return ((this.inFlight + 1) / this.weight) * (1 + this.latencyMs / 100)
  }
}

/** Retry-After as milliseconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3). */
export function retryAfterMs(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const text = Array.isArray(value) ? value[0] : value
  if (!text) return undefined
  if (/^\d+$/.test(text.trim())) return Number(text.trim()) * 1000
  const at = Date.parse(text)
  return Number.isNaN(at) ? undefined : Math.max(0, at - now)
}
