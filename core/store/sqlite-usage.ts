/**
 * Usage counters of the SQLite engine: requests, credits and errors per (project, apiType, UTC hour),
 * and the same per (project, apiType, route, status class, UTC hour) with the latency sum and maximum
 * (`usage_routes_hourly`, for the dashboard's error breakdown and busiest routes).
 *
 * Every request records usage, and most land in the same few hour rows, so events are summed in
 * memory and written as one upsert per row every `flushMs` (and before every query and on close).
 * That turns thousands of writes per second into a handful. The cost: a `kill -9` loses at most the
 * last `flushMs` of usage statistics; credit balances, which are what a project pays with, are
 * written through and never buffered. `flushMs: 0` writes every event through.
 */
import type Database from 'better-sqlite3'
import { bucketStart, PERIOD_MS } from './periods.ts'
import { statusClassOf, type Granularity, type UsageDetailRow, type UsageEvent, type UsageRow } from './types.ts'

export const USAGE_SCHEMA = `
CREATE TABLE IF NOT EXISTS usage_hourly (
  project_id TEXT NOT NULL,
  bucket_ms INTEGER NOT NULL,
  api_type TEXT NOT NULL,
  requests INTEGER NOT NULL,
  credits NUMERIC NOT NULL,
  errors INTEGER NOT NULL,
  PRIMARY KEY (project_id, bucket_ms, api_type)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS usage_routes_hourly (
  project_id TEXT NOT NULL,
  bucket_ms INTEGER NOT NULL,
  api_type TEXT NOT NULL,
  route TEXT NOT NULL,
  status_class TEXT NOT NULL,
  requests INTEGER NOT NULL,
  credits NUMERIC NOT NULL,
  errors INTEGER NOT NULL,
  latency_ms_sum REAL NOT NULL,
  latency_ms_max REAL NOT NULL,
  PRIMARY KEY (project_id, bucket_ms, api_type, route, status_class)
) WITHOUT ROWID;
`

export interface PendingUsage {
  projectId: string
  apiType: string
  bucketMs: number
  requests: number
  credits: number
  errors: number
}

/** A per-route sum waiting to be written. */
export interface PendingRouteUsage extends PendingUsage {
  route: string
  statusClass: string
  latencyMsSum: number
  latencyMsMax: number
}

/**
 * Adds an event to the per-route sums of `pending` (shared with the PostgreSQL engine). Events
 * without a route or status are not per-route usage and are left out.
 */
export function addRouteUsage(pending: Map<string, PendingRouteUsage>, event: UsageEvent, bucketMs: number): PendingRouteUsage | undefined {
  if (event.route === undefined || event.status === undefined) return undefined
  const statusClass = statusClassOf(event.status)
  const key = `${event.projectId}\u0000${event.apiType}\u0000${bucketMs}\u0000${event.route}\u0000${statusClass}`
  const sum = pending.get(key)
  if (sum !== undefined) {
    addToRouteSum(sum, event)
    return sum
  }
  const latency = latencyOf(event)
  const fresh: PendingRouteUsage = {
    projectId: event.projectId,
    apiType: event.apiType,
    bucketMs,
    route: event.route,
    statusClass,
    requests: event.requests,
    credits: event.credits,
    errors: event.errors,
    latencyMsSum: latency * event.requests,
    latencyMsMax: latency,
  }
  pending.set(key, fresh)
  return fresh
}

function addToSum(sum: PendingUsage, event: UsageEvent): void {
  sum.requests += event.requests
  sum.credits += event.credits
  sum.errors += event.errors
}

function latencyOf(event: UsageEvent): number {
  return event.latencyMs !== undefined && Number.isFinite(event.latencyMs) && event.latencyMs >= 0 ? event.latencyMs : 0
}

export function addToRouteSum(sum: PendingRouteUsage, event: UsageEvent): void {
  const latency = latencyOf(event)
  sum.requests += event.requests
  sum.credits += event.credits
  sum.errors += event.errors
  sum.latencyMsSum += latency * event.requests
  if (latency > sum.latencyMsMax) sum.latencyMsMax = latency
}

/**
 * The sums the previous event went to, and what it was: almost every event of a busy gateway lands
 * in the same rows as the one before, and then no key string is built (two per event otherwise).
 */
export interface LastRows {
  projectId: string
  apiType: string
  bucketMs: number
  route: string | undefined
  statusClass: string | undefined
  sum: PendingUsage
  routeSum: PendingRouteUsage | undefined
}

/**
 * Adds `event` to the rows the previous event went to when it lands in the same ones (same hour,
 * project, API type, route and status class); false when it does not, and nothing was added.
 */
export function addToLastRows(last: LastRows | undefined, event: UsageEvent, bucketMs: number, statusClass: string | undefined): boolean {
  if (
    last === undefined ||
    last.bucketMs !== bucketMs ||
    last.projectId !== event.projectId ||
    last.apiType !== event.apiType ||
    last.route !== event.route ||
    last.statusClass !== statusClass
  ) return false
  addToSum(last.sum, event)
  if (last.routeSum !== undefined) addToRouteSum(last.routeSum, event)
  return true
}

/** Raw per-route rows as both engines select them. */
export interface RouteRowRaw {
  bucketMs: number | string
  apiType: string
  route: string
  statusClass: string
  requests: number | string
  credits: number | string
  errors: number | string
  latencyMsSum: number | string
  latencyMsMax: number | string
}

/** A selected row in the Store's form (PostgreSQL sums arrive as strings). */
export function routeRowOf(row: RouteRowRaw): UsageDetailRow {
  return {
    bucket: new Date(Number(row.bucketMs)).toISOString(),
    apiType: row.apiType,
    route: row.route,
    statusClass: row.statusClass,
    requests: Number(row.requests),
    credits: Number(row.credits),
    errors: Number(row.errors),
    latencyMsSum: Math.round(Number(row.latencyMsSum) * 1000) / 1000,
    latencyMsMax: Math.round(Number(row.latencyMsMax) * 1000) / 1000,
  }
}

export class SqliteUsageLog {
  private pending = new Map<string, PendingUsage>()
  private pendingRoutes = new Map<string, PendingRouteUsage>()
  /** Where the previous event went (cleared when the sums are written). */
  private last: LastRows | undefined
  private readonly writeTx: (rows: Iterable<PendingUsage>, routeRows: Iterable<PendingRouteUsage>) => void
  private readonly queryStmts: Record<Granularity, Database.Statement>
  private readonly routeStmts: Record<Granularity, Database.Statement>

  constructor(
    db: Database.Database,
    private readonly flushMs: number,
  ) {
    db.exec(USAGE_SCHEMA)
    const upsertStmt = db.prepare(`
      INSERT INTO usage_hourly (project_id, bucket_ms, api_type, requests, credits, errors)
      VALUES (@projectId, @bucketMs, @apiType, @requests, @credits, @errors)
      ON CONFLICT (project_id, bucket_ms, api_type) DO UPDATE SET
        requests = requests + excluded.requests,
        credits = credits + excluded.credits,
        errors = errors + excluded.errors`)
    const upsertRouteStmt = db.prepare(`
      INSERT INTO usage_routes_hourly (project_id, bucket_ms, api_type, route, status_class, requests, credits, errors, latency_ms_sum, latency_ms_max)
      VALUES (@projectId, @bucketMs, @apiType, @route, @statusClass, @requests, @credits, @errors, @latencyMsSum, @latencyMsMax)
      ON CONFLICT (project_id, bucket_ms, api_type, route, status_class) DO UPDATE SET
        requests = requests + excluded.requests,
        credits = credits + excluded.credits,
        errors = errors + excluded.errors,
        latency_ms_sum = latency_ms_sum + excluded.latency_ms_sum,
        latency_ms_max = max(latency_ms_max, excluded.latency_ms_max)`)
    this.writeTx = db.transaction((rows: Iterable<PendingUsage>, routeRows: Iterable<PendingRouteUsage>) => {
      for (const row of rows) upsertStmt.run(row)
      for (const row of routeRows) upsertRouteStmt.run(row)
    })
    // Buckets overlapping [from, to) are returned whole: the caller widens the range to bucket edges.
    const query = (bucketExpr: string) =>
      db.prepare(`
        SELECT ${bucketExpr} AS bucketMs, api_type AS apiType,
          sum(requests) AS requests, sum(credits) AS credits, sum(errors) AS errors
        FROM usage_hourly
        WHERE project_id = @projectId AND bucket_ms >= @fromMs AND bucket_ms < @toMs
        GROUP BY bucketMs, api_type
        ORDER BY bucketMs, api_type`)
    this.queryStmts = {
      hour: query('bucket_ms'),
      day: query(`bucket_ms - (bucket_ms % ${PERIOD_MS.day})`),
    }
    const routeQuery = (bucketExpr: string) =>
      db.prepare(`
        SELECT ${bucketExpr} AS bucketMs, api_type AS apiType, route, status_class AS statusClass,
          sum(requests) AS requests, sum(credits) AS credits, sum(errors) AS errors,
          sum(latency_ms_sum) AS latencyMsSum, max(latency_ms_max) AS latencyMsMax
        FROM usage_routes_hourly
        WHERE project_id = @projectId AND bucket_ms >= @fromMs AND bucket_ms < @toMs
        GROUP BY bucketMs, api_type, route, status_class
        ORDER BY bucketMs, api_type, route, status_class`)
    this.routeStmts = {
      hour: routeQuery('bucket_ms'),
      day: routeQuery(`bucket_ms - (bucket_ms % ${PERIOD_MS.day})`),
    }
  }

  record(event: UsageEvent): void {
    // A NaN would make the buffered row unwritable forever, so bad input is refused here. Four
    // named reads on every request; the loop over field names (a keyed load) only to name the bad one.
    if (!(Number.isFinite(event.at) && Number.isFinite(event.requests) && Number.isFinite(event.credits) && Number.isFinite(event.errors))) {
      for (const field of ['at', 'requests', 'credits', 'errors'] as const) {
        if (!Number.isFinite(event[field])) throw new RangeError(`usage ${field} must be a finite number, got ${event[field]}`)
      }
    }
    const bucketMs = bucketStart('hour', event.at)
    if (this.flushMs === 0) {
      const routes = new Map<string, PendingRouteUsage>()
      addRouteUsage(routes, event, bucketMs)
      this.writeTx([{ ...pick(event), bucketMs }], routes.values())
      return
    }
    const statusClass = event.status === undefined ? undefined : statusClassOf(event.status)
    const last = this.last
    if (addToLastRows(last, event, bucketMs, event.route === undefined ? undefined : statusClass)) return
    const routeSum = addRouteUsage(this.pendingRoutes, event, bucketMs)
    const key = `${event.projectId}\u0000${event.apiType}\u0000${bucketMs}`
    let sum = this.pending.get(key)
    if (sum === undefined) {
      sum = { ...pick(event), bucketMs }
      this.pending.set(key, sum)
    } else addToSum(sum, event)
    this.last = {
      projectId: event.projectId,
      apiType: event.apiType,
      bucketMs,
      route: event.route,
      statusClass: routeSum === undefined ? undefined : statusClass,
      sum,
      routeSum,
    }
  }

  /** Writes the buffered sums. On failure the sums stay buffered for the next attempt. */
  flush(): void {
    if (this.pending.size === 0 && this.pendingRoutes.size === 0) return
    this.writeTx(this.pending.values(), this.pendingRoutes.values())
    this.pending = new Map()
    this.pendingRoutes = new Map()
    this.last = undefined
  }

  /** Per-route rows of a project (see `Store.queryUsageDetail`). */
  queryDetail(projectId: string, fromMs: number, toMs: number, granularity: Granularity): UsageDetailRow[] {
    const stmt = this.routeStmts[granularity]
    if (stmt === undefined) throw new RangeError(`granularity must be 'hour' or 'day', got ${String(granularity)}`)
    if (!Number.isFinite(fromMs) || !Number.isFinite(toMs)) throw new RangeError('fromMs and toMs must be finite epoch ms')
    this.flush()
    const size = PERIOD_MS[granularity]
    const rows = stmt.all({ projectId, fromMs: bucketStart(granularity, fromMs), toMs: Math.ceil(toMs / size) * size }) as RouteRowRaw[]
    return rows.map(routeRowOf)
  }

  query(projectId: string, fromMs: number, toMs: number, granularity: Granularity): UsageRow[] {
    const stmt = this.queryStmts[granularity]
    if (stmt === undefined) throw new RangeError(`granularity must be 'hour' or 'day', got ${String(granularity)}`)
    if (!Number.isFinite(fromMs) || !Number.isFinite(toMs)) throw new RangeError('fromMs and toMs must be finite epoch ms')
    this.flush()
    const size = PERIOD_MS[granularity]
    const range = { projectId, fromMs: bucketStart(granularity, fromMs), toMs: Math.ceil(toMs / size) * size }
    const rows = stmt.all(range) as (Omit<UsageRow, 'bucket'> & {
      bucketMs: number
    })[]
    return rows.map(({ bucketMs, apiType, requests, credits, errors }) => ({
      bucket: new Date(bucketMs).toISOString(),
      apiType,
      requests,
      credits,
      errors,
    }))
  }
}

function pick(event: UsageEvent): Omit<PendingUsage, 'bucketMs'> {
  return {
    projectId: event.projectId,
    apiType: event.apiType,
    requests: event.requests,
    credits: event.credits,
    errors: event.errors,
  }
}
