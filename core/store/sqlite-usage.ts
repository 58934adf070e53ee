/**
 * Usage counters of the SQLite engine: requests, credits and errors per (project, apiType, UTC hour).
 *
 * Every request records usage, and most land in the same few hour rows, so events are summed in
 * memory and written as one upsert per row every `flushMs` (and before every query and on close).
 * That turns thousands of writes per second into a handful. The cost: a `kill -9` loses at most the
 * last `flushMs` of usage statistics; credit balances, which are what a project pays with, are
 * written through and never buffered. `flushMs: 0` writes every event through.
 */
import type Database from 'better-sqlite3'
import { bucketStart, PERIOD_MS } from './periods.ts'
import type { Granularity, UsageEvent, UsageRow } from './types.ts'

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
`

interface PendingUsage {
  projectId: string
  apiType: string
  bucketMs: number
  requests: number
  credits: number
  errors: number
}

export class SqliteUsageLog {
  private pending = new Map<string, PendingUsage>()
  private readonly writeTx: (rows: Iterable<PendingUsage>) => void
  private readonly queryStmts: Record<Granularity, Database.Statement>

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
    this.writeTx = db.transaction((rows: Iterable<PendingUsage>) => {
      for (const row of rows) upsertStmt.run(row)
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
  }

  record(event: UsageEvent): void {
    // A NaN would make the buffered row unwritable forever, so bad input is refused here.
    for (const field of ['at', 'requests', 'credits', 'errors'] as const) {
      if (!Number.isFinite(event[field])) throw new RangeError(`usage ${field} must be a finite number, got ${event[field]}`)
    }
    const bucketMs = bucketStart('hour', event.at)
    if (this.flushMs === 0) {
      this.writeTx([{ ...pick(event), bucketMs }])
      return
    }
    const key = `${event.projectId}\u0000${event.apiType}\u0000${bucketMs}`
    const sum = this.pending.get(key)
    if (sum === undefined) {
      this.pending.set(key, { ...pick(event), bucketMs })
    } else {
      sum.requests += event.requests
      sum.credits += event.credits
      sum.errors += event.errors
    }
  }

  /** Writes the buffered sums. On failure the sums stay buffered for the next attempt. */
  flush(): void {
    if (this.pending.size === 0) return
    this.writeTx(this.pending.values())
    this.pending = new Map()
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
