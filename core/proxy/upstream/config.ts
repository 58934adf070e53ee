/**
 * An upstream's configuration after validation: its targets and the policies that pick among them
 * (health, retries, hedging, breakers). The single-URL form of gateway.yaml is normalised here into
 * a pool of one target, so every later stage sees one shape.
 */

export interface TargetConfig {
  /** Base URL: scheme, host, port and an optional path prefix. */
  url: string
  /** Label in metrics and logs: the configured name, else the target's index. Never the URL. */
  name: string
  /** Relative share of the traffic (default 1). */
  weight: number
  /** Placement label; targets in the upstream's `preferZone` are chosen first. */
  zone?: string
}

export interface HealthConfig {
  /** Consecutive failures (transport error or 5xx) that eject a target. */
  consecutiveFailures: number
  /** First ejection; each ejection in a row doubles it, up to maxEjectionMs. */
  baseEjectionMs: number
  maxEjectionMs: number
  /** Optional active probe: a GET to each target. */
  probe?: { path: string; intervalMs: number; timeoutMs: number; unhealthyAfter: number }
}

export interface RetryConfig {
  /** Extra attempts after the first (only for requests that are safe to send again). */
  maxRetries: number
  /** Retries and hedges may add at most this percentage over the requests of the last 10 s. */
  budgetPercent: number
  /** Extra attempts allowed per 10 s window whatever the base rate (so a quiet upstream still fails over). */
  minPerWindow: number
}

export interface HedgeConfig {
  /** Send a second attempt to another target after this many ms without an answer head (0 = off). */
  afterMs: number
  /** Or: after this percentile of recent head latency (0 = off); afterMs is then the floor. */
  percentile: number
}

export interface BreakerConfig {
  /** Requests in flight per target before the choice moves to another (0 = no limit). */
  maxConcurrent: number
  /** Requests the whole upstream may queue past every target's maxConcurrent before refusing with 503. */
  maxPending: number
  /** After a 429 with Retry-After, the time over which the rate sent to that target climbs back to full. */
  recoverMs: number
}

/** How a target is picked among the healthy ones. */
export type Balance = 'least-loaded' | 'round-robin'

export interface UpstreamConfig {
  /** The first target's URL (kept for plugins that read the base URL, e.g. response-cache). */
  url: string
  targets: TargetConfig[]
  /** least-loaded: best score (load per weight × latency); round-robin: weighted turns, blind to load. */
  balance: Balance
  /** Healthy targets of this zone take the traffic; others only when none of them can. */
  preferZone?: string
  /** Max sockets per target. */
  connections: number
  timeouts: { connectMs: number; headersMs: number; bodyMs: number }
  keepAliveTimeoutMs: number
  health: HealthConfig
  retry: RetryConfig
  hedge: HedgeConfig
  breaker: BreakerConfig
}

/** The YAML shape, as the schema validated it (defaults filled in except where they depend on the target count). */
export interface RawUpstream {
  url?: string
  targets?: { url: string; name?: string; weight?: number; zone?: string }[]
  balance?: Balance
  preferZone?: string
  connections: number
  timeouts: { connectMs: number; headersMs: number; bodyMs: number }
  keepAliveTimeoutMs: number
  health?: Partial<HealthConfig> & { probe?: Partial<NonNullable<HealthConfig['probe']>> & { path: string } }
  retry?: Partial<RetryConfig>
  hedge?: Partial<HedgeConfig>
  breaker?: Partial<BreakerConfig>
}

/**
 * Fills the pool-shaped config. Retries default to one for a pool of several targets (failing over
 * is the point of a pool) and to none for a single URL, which keeps today's behaviour: nothing retried.
 */
export function normaliseUpstream(raw: RawUpstream): UpstreamConfig {
  const list = raw.targets ?? (raw.url !== undefined ? [{ url: raw.url }] : [])
  const targets = list.map((t, i) => ({ url: t.url, name: t.name ?? String(i), weight: t.weight ?? 1, ...(t.zone ? { zone: t.zone } : {}) }))
  const probe = raw.health?.probe
  return {
    url: targets[0]?.url ?? '',
    targets,
    balance: raw.balance ?? 'least-loaded',
    ...(raw.preferZone ? { preferZone: raw.preferZone } : {}),
    connections: raw.connections,
    timeouts: raw.timeouts,
    keepAliveTimeoutMs: raw.keepAliveTimeoutMs,
    health: {
      consecutiveFailures: raw.health?.consecutiveFailures ?? 5,
      baseEjectionMs: raw.health?.baseEjectionMs ?? 1000,
      maxEjectionMs: raw.health?.maxEjectionMs ?? 30000,
      ...(probe ? { probe: { path: probe.path, intervalMs: probe.intervalMs ?? 5000, timeoutMs: probe.timeoutMs ?? 1000, unhealthyAfter: probe.unhealthyAfter ?? 2 } } : {}),
    },
    retry: {
      maxRetries: raw.retry?.maxRetries ?? (targets.length > 1 ? 1 : 0),
      budgetPercent: raw.retry?.budgetPercent ?? 20,
      minPerWindow: raw.retry?.minPerWindow ?? 10,
    },
    hedge: { afterMs: raw.hedge?.afterMs ?? 0, percentile: raw.hedge?.percentile ?? 0 },
    breaker: { maxConcurrent: raw.breaker?.maxConcurrent ?? 0, maxPending: raw.breaker?.maxPending ?? 1024, recoverMs: raw.breaker?.recoverMs ?? 10000 },
  }
}
