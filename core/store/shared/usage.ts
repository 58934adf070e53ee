/**
 * Usage counters of the shared engine: requests, credits and errors per (project, apiType, UTC hour)
 * in PostgreSQL, summed in memory and added to the rows every `flushMs` (and before every query and
 * at close) with one statement. Each instance adds its own sums, so the rows are the total of all
 * instances. As with the embedded engine, a crash loses at most the last `flushMs` of statistics,
 * never a balance; a flush that fails keeps its sums for the next one.
 */
import type pg from 'pg'
import { bucketStart, PERIOD_MS } from '../periods.ts'
import { statusClassOf, type Granularity, type UsageDetailRow, type UsageEvent, type UsageRow } from '../types.ts'
import { addRouteUsage, addToLastRows, routeRowOf, type LastRows, type PendingRouteUsage, type RouteRowRaw } from '../sqlite-usage.ts'
import type { MigrationSet } from './migrations.ts'
import { pgFailure } from './pg.ts'

/**
 * The per-route usage table, a module of its own (`usage`) so that its versions never collide with
 * the core module's: usage per (project, hour, API type, route, status class) with latency sum and max.
 */
export const usageMigrations: MigrationSet = {
  module: 'usage',
  migrations: [
    {
      version: 1,
      name: 'usage per route and status class',
      sql: `
CREATE TABLE usage_routes_hourly (
  project_id text NOT NULL,
  bucket_ms bigint NOT NULL,
  api_type text NOT NULL,
  route text NOT NULL,
  status_class text NOT NULL,
  requests bigint NOT NULL,
  credits numeric NOT NULL,
  errors bigint NOT NULL,
  latency_ms_sum double precision NOT NULL,
  latency_ms_max double precision NOT NULL,
  PRIMARY KEY (project_id, bucket_ms, api_type, route, status_class)
)`,
    },
  ],
}

const UPSERT_ROUTES = `
INSERT INTO usage_routes_hourly (project_id, bucket_ms, api_type, route, status_class, requests, credits, errors, latency_ms_sum, latency_ms_max)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::numeric[], $8::bigint[], $9::float8[], $10::float8[])
ORDER BY 1, 2, 3, 4, 5
ON CONFLICT (project_id, bucket_ms, api_type, route, status_class) DO UPDATE SET
  requests = usage_routes_hourly.requests + excluded.requests,
  credits = usage_routes_hourly.credits + excluded.credits,
  errors = usage_routes_hourly.errors + excluded.errors,
  latency_ms_sum = usage_routes_hourly.latency_ms_sum + excluded.latency_ms_sum,
  latency_ms_max = greatest(usage_routes_hourly.latency_ms_max, excluded.latency_ms_max)`

interface Sum {
  projectId: string
  apiType: string
  bucketMs: number
  requests: number
  credits: number
  errors: number
}

const UPSERT = `
INSERT INTO usage_hourly (project_id, bucket_ms, api_type, requests, credits, errors)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::numeric[], $6::bigint[])
ORDER BY 1, 2, 3
ON CONFLICT (project_id, bucket_ms, api_type) DO UPDATE SET
  requests = usage_hourly.requests + excluded.requests,
  credits = usage_hourly.credits + excluded.credits,
  errors = usage_hourly.errors + excluded.errors`

/**
 * Both upserts as one statement (the per-route one's parameters follow the hourly one's six). Each
 * upserts its rows in key order, so two instances flushing the same rows lock them in one order
 * (no deadlock between flushes).
 */
const FLUSH_BOTH = `WITH hourly AS (${UPSERT} RETURNING 1),
routes AS (${UPSERT_ROUTES.replace(/\$(\d+)/g, (_, n: string) => '$' + (Number(n) + 6))} RETURNING 1)
SELECT (SELECT count(*) FROM hourly) AS hourly, (SELECT count(*) FROM routes) AS routes`

export class SharedUsageLog {
  private pending = new Map<string, Sum>()
  private pendingRoutes = new Map<string, PendingRouteUsage>()
  private flushing: Promise<void> | undefined
  /**
   * The sums the previous event went to (as the embedded engine's usage log keeps them): nearly
   * every event of a busy gateway lands in the same rows as the one before, and then no key string
   * is built nor looked up (two per event otherwise; gateway CPU per request, issue 26).
   */
  private last: LastRows | undefined

  constructor(private readonly pool: pg.Pool) {}

  record(event: UsageEvent): void {
    // Four named reads per event; the loop over field names (keyed loads) only to name the bad one.
    if (!(Number.isFinite(event.at) && Number.isFinite(event.requests) && Number.isFinite(event.credits) && Number.isFinite(event.errors))) {
      for (const field of ['at', 'requests', 'credits', 'errors'] as const) {
        if (!Number.isFinite(event[field])) throw new RangeError(`usage ${field} must be a finite number, got ${event[field]}`)
      }
    }
    const bucketMs = bucketStart('hour', event.at)
    const statusClass = event.route === undefined || event.status === undefined ? undefined : statusClassOf(event.status)
    const last = this.last
    if (addToLastRows(last, event, bucketMs, statusClass)) return
    const routeSum = addRouteUsage(this.pendingRoutes, event, bucketMs)
    const key = `${event.projectId}\u0000${event.apiType}\u0000${bucketMs}`
    let sum = this.pending.get(key)
    if (sum === undefined) {
      const { projectId, apiType, requests, credits, errors } = event
      sum = { projectId, apiType, bucketMs, requests, credits, errors }
      this.pending.set(key, sum)
    } else addToSum(sum, event)
    this.last = { projectId: event.projectId, apiType: event.apiType, bucketMs, route: event.route, statusClass, sum, routeSum }
  }

  /** Adds the buffered sums to the database; one flush at a time. */
  flush(): Promise<void> {
    const next = (this.flushing ?? Promise.resolve()).then(() => this.write())
    // The chain itself never rejects (the caller gets the failure): an unhandled rejection kills the process.
    const chained: Promise<void> = next.then(
      () => this.settle(chained),
      () => this.settle(chained),
    )
    this.flushing = chained
    return next
  }

  async query(projectId: string, fromMs: number, toMs: number, granularity: Granularity): Promise<UsageRow[]> {
    if (granularity !== 'hour' && granularity !== 'day') throw new RangeError(`granularity must be 'hour' or 'day', got ${String(granularity)}`)
    if (!Number.isFinite(fromMs) || !Number.isFinite(toMs)) throw new RangeError('fromMs and toMs must be finite epoch ms')
    await this.flush()
    const size = PERIOD_MS[granularity]
    const bucket = granularity === 'hour' ? 'bucket_ms' : `bucket_ms - (bucket_ms % ${PERIOD_MS.day})`
    try {
      const { rows } = await this.pool.query<{ bucket_ms: number; api_type: string; requests: number; credits: number; errors: number }>(
        `SELECT ${bucket} AS bucket_ms, api_type, sum(requests) AS requests, sum(credits) AS credits, sum(errors) AS errors
         FROM usage_hourly WHERE project_id = $1 AND bucket_ms >= $2 AND bucket_ms < $3
         GROUP BY 1, api_type ORDER BY 1, api_type`,
        [projectId, bucketStart(granularity, fromMs), Math.ceil(toMs / size) * size],
      )
      return rows.map((row) => ({ bucket: new Date(Number(row.bucket_ms)).toISOString(), apiType: row.api_type, requests: row.requests, credits: row.credits, errors: row.errors }))
    } catch (error) {
      throw pgFailure(error)
    }
  }

  async queryDetail(projectId: string, fromMs: number, toMs: number, granularity: Granularity): Promise<UsageDetailRow[]> {
    if (granularity !== 'hour' && granularity !== 'day') throw new RangeError(`granularity must be 'hour' or 'day', got ${String(granularity)}`)
    if (!Number.isFinite(fromMs) || !Number.isFinite(toMs)) throw new RangeError('fromMs and toMs must be finite epoch ms')
    await this.flush()
    const size = PERIOD_MS[granularity]
    const bucket = granularity === 'hour' ? 'bucket_ms' : `bucket_ms - (bucket_ms % ${PERIOD_MS.day})`
    try {
      const { rows } = await this.pool.query<RouteRowRaw>(
        `SELECT ${bucket} AS "bucketMs", api_type AS "apiType", route, status_class AS "statusClass",
           sum(requests) AS requests, sum(credits) AS credits, sum(errors) AS errors,
           sum(latency_ms_sum) AS "latencyMsSum", max(latency_ms_max) AS "latencyMsMax"
         FROM usage_routes_hourly WHERE project_id = $1 AND bucket_ms >= $2 AND bucket_ms < $3
         GROUP BY 1, api_type, route, status_class ORDER BY 1, api_type, route, status_class`,
        [projectId, bucketStart(granularity, fromMs), Math.ceil(toMs / size) * size],
      )
      return rows.map(routeRowOf)
    } catch (error) {
      throw pgFailure(error)
    }
  }

  private settle(chained: Promise<void>): void {
    if (this.flushing === chained) this.flushing = undefined
  }

  private async write(): Promise<void> {
    if (this.pending.size === 0 && this.pendingRoutes.size === 0) return
    const sums = [...this.pending.values()]
    const routeSums = [...this.pendingRoutes.values()]
    this.pending = new Map()
    this.pendingRoutes = new Map()
    // The rows it points at are being written: the next event starts new ones.
    this.last = undefined
    try {
      // Both tables in one statement: two data-modifying CTEs commit together or not at all.
      await this.pool.query(FLUSH_BOTH, [
        sums.map((s) => s.projectId),
        sums.map((s) => s.bucketMs),
        sums.map((s) => s.apiType),
        sums.map((s) => s.requests),
        sums.map((s) => s.credits),
        sums.map((s) => s.errors),
        routeSums.map((s) => s.projectId),
        routeSums.map((s) => s.bucketMs),
        routeSums.map((s) => s.apiType),
        routeSums.map((s) => s.route),
        routeSums.map((s) => s.statusClass),
        routeSums.map((s) => s.requests),
        routeSums.map((s) => s.credits),
        routeSums.map((s) => s.errors),
        routeSums.map((s) => s.latencyMsSum),
        routeSums.map((s) => s.latencyMsMax),
      ])
    } catch (error) {
      // Not written (or unknown, which a lost connection makes rare): keep them for the next flush.
      for (const sum of sums) this.record({ ...sum, at: sum.bucketMs })
      for (const sum of routeSums) this.restoreRoute(sum)
      throw pgFailure(error)
    }
  }

  /** Puts an unwritten per-route sum back (merged with what arrived meanwhile). */
  private restoreRoute(sum: PendingRouteUsage): void {
    const key = `${sum.projectId}\u0000${sum.apiType}\u0000${sum.bucketMs}\u0000${sum.route}\u0000${sum.statusClass}`
    const current = this.pendingRoutes.get(key)
    if (current === undefined) return void this.pendingRoutes.set(key, sum)
    current.requests += sum.requests
    current.credits += sum.credits
    current.errors += sum.errors
    current.latencyMsSum += sum.latencyMsSum
    current.latencyMsMax = Math.max(current.latencyMsMax, sum.latencyMsMax)
  }
}

function addToSum(sum: Sum, event: UsageEvent): void {
  sum.requests += event.requests
  sum.credits += event.credits
  sum.errors += event.errors
}
