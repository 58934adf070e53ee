/**
 * `upstreams.<name>` of gateway.yaml: one URL, or a pool of targets with health, retries, hedging,
 * breakers, the balance and a preferred zone (a part of coreSchema in schema.ts; the rules are in
 * core/proxy/upstream/README.md). Every sub-object is a closed `section`, written once.
 */
import type { JsonSchema } from '../proxy/plugin.ts'

/** A closed object of optional fields: the shape of every upstream sub-section. */
const section = (description: string, properties: Record<string, JsonSchema>, extra: JsonSchema = {}): JsonSchema => ({
  type: 'object',
  additionalProperties: false,
  description,
  properties,
  ...extra,
})
const int = (minimum: number, maximum: number | undefined, description: string, extra: JsonSchema = {}): JsonSchema => ({
  type: 'integer',
  minimum,
  ...(maximum === undefined ? {} : { maximum }),
  description,
  ...extra,
})

const upstreamTarget = section(
  'One server of an upstream pool.',
  {
    url: { type: 'string', pattern: '^https?://', description: 'Base URL; its path (if any) prefixes every forwarded path.' },
    name: {
      type: 'string',
      pattern: '^[A-Za-z0-9_.-]{1,64}$',
      description: 'Label of this target in metrics, logs and the dashboard (default: its index). Never the URL, which may hold credentials.',
    },
    weight: { type: 'number', exclusiveMinimum: 0, maximum: 1000, default: 1, description: 'Relative share of the traffic among healthy targets.' },
    zone: { type: 'string', maxLength: 64, description: "Placement label (e.g. a region), shown in metrics; targets in the upstream's preferZone are chosen first." },
  },
  { required: ['url'] },
)

const probe = section(
  'Active health check: a GET to each target; a 2xx is healthy.',
  {
    path: { type: 'string', pattern: '^/', description: 'Path probed, after the target URL path.' },
    intervalMs: int(100, 3600000, 'Time between probes of one target. Default 5000.'),
    timeoutMs: int(10, 60000, 'A probe slower than this fails. Default 1000.'),
    unhealthyAfter: int(1, 100, 'Failed probes in a row that take the target out (one success brings it back). Default 2.'),
  },
  { required: ['path'] },
)

export const upstreamSchema = section('A named upstream: one URL, or a pool of targets with health, retries, hedging and breakers (core/proxy/upstream/README.md).', {
  url: { type: 'string', pattern: '^https?://', description: 'Base URL of a single-target upstream; its path (if any) prefixes every forwarded path. Exclusive with targets.' },
  targets: { type: 'array', minItems: 1, maxItems: 64, items: upstreamTarget, description: 'The servers of a pool (see balance). Exclusive with url.' },
  balance: {
    type: 'string',
    enum: ['least-loaded', 'round-robin'],
    default: 'least-loaded',
    description:
      'How a healthy target is picked: least-loaded = lowest in-flight requests per weight, scaled by recent latency (slow targets get less); round-robin = weighted turns, blind to load and latency (what nginx does by default).',
  },
  preferZone: {
    type: 'string',
    maxLength: 64,
    description: "Healthy targets whose zone is this take the traffic; targets of other zones only when every local one is ejected, at breaker.maxConcurrent or backing off after a 429. Must be the zone of a target.",
  },
  connections: int(1, 1024, 'Max sockets per target.', { default: 64 }),
  keepAliveTimeoutMs: int(1, undefined, 'Idle time before a pooled socket closes.', { default: 4000 }),
  timeouts: section(
    'Upstream timeouts; a timeout answers 504 upstream_timeout.',
    {
      connectMs: int(1, undefined, 'TCP connect timeout.', { default: 5000 }),
      headersMs: int(1, undefined, 'Time to the response headers.', { default: 30000 }),
      bodyMs: int(1, undefined, 'Max idle time between body chunks.', { default: 30000 }),
    },
    { default: {} },
  ),
  health: section('Passive outlier ejection (always on) and an optional active probe per target.', {
    consecutiveFailures: int(1, 1000, 'Consecutive failures (transport error or 5xx) that eject a target. Default 5.'),
    baseEjectionMs: int(10, 600000, 'First ejection time; it doubles for each ejection in a row. After it one request probes the target (half-open). Default 1000.'),
    maxEjectionMs: int(10, 3600000, 'Longest ejection. Default 30000.'),
    probe,
  }),
  retry: section('Retries of requests that are safe to send again (GET/HEAD, routes marked idempotent, read-only calls of plugins); never of writes.', {
    maxRetries: int(0, 5, 'Extra attempts after the first. Default 1 for a pool of several targets, 0 for a single URL.'),
    budgetPercent: { type: 'number', minimum: 0, maximum: 100, description: 'Retries and hedges together may add at most this percentage over the requests of the last 10 s (Envoy-style retry budget). Default 20.' },
    minPerWindow: int(0, 100000, 'Extra attempts allowed per 10 s whatever the base rate, so a quiet upstream still fails over. Default 10.'),
  }),
  hedge: section(
    'Hedged reads: a safe request without an answer head after a threshold is also sent to another target; the first head wins, the other runs to its end unseen (its latency still counts against its target). Off by default; counts against the retry budget.',
    {
      afterMs: int(0, 600000, 'Fixed threshold in ms (0 = off unless percentile is set; with a percentile, the floor).'),
      percentile: { type: 'number', minimum: 0, maximum: 99.9, description: 'Threshold as this percentile of the upstream head latency of the last 1,000 attempts (0 = off).' },
    },
  ),
  breaker: section('Circuit breakers and back-off per target.', {
    maxConcurrent: int(0, 100000, 'Requests in flight per target before new ones go to another target (0 = no limit).'),
    maxPending: int(0, 1000000, 'Requests queued while every target is at maxConcurrent; past it the answer is 502 upstream_unavailable. Default 1024.'),
    recoverMs: int(
      0,
      3600000,
      'After a 429 (with Retry-After, for that long no request goes to the target), the time over which its share climbs back to full. While every target backs off, the gateway answers 429 upstream_throttled itself (not charged). Default 10000.',
    ),
  }),
})
