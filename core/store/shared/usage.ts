/**
 * Usage counters of the shared engine: requests, credits and errors per (project, apiType, UTC hour)
 * in PostgreSQL, summed in memory and added to the rows every `flushMs` (and before every query and
 * at close) with one statement. Each instance adds its own sums, so the rows are the total of all
 * instances. As with the embedded engine, a crash loses at most the last `flushMs` of statistics,
 * never a balance; a flush that fails keeps its sums for the next one.
 */
import type pg from 'pg'
import { bucketStart, PERIOD_MS } from '../periods.ts'
import type { Granularity, UsageEvent, UsageRow } from '../types.ts'
import { pgFailure } from './pg.ts'

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
ON CONFLICT (project_id, bucket_ms, api_type) DO UPDATE SET
  requests = usage_hourly.requests + excluded.requests,
  credits = usage_hourly.credits + excluded.credits,
  errors = usage_hourly.errors + excluded.errors`

export class SharedUsageLog {
  private pending = new Map<string, Sum>()
  private flushing: Promise<void> | undefined

  constructor(private readonly pool: pg.Pool) {}

  record(event: UsageEvent): void {
    for (const field of ['at', 'requests', 'credits', 'errors'] as const) {
      if (!Number.isFinite(event[field])) throw new RangeError(`usage ${field} must be a finite number, got ${event[field]}`)
    }
    const bucketMs = bucketStart('hour', event.at)
    const key = `${event.projectId}\u0000${event.apiType}\u0000${bucketMs}`
    const sum = this.pending.get(key)
    if (sum === undefined) {
      const { projectId, apiType, requests, credits, errors } = event
      this.pending.set(key, { projectId, apiType, bucketMs, requests, credits, errors })
    } else {
      sum.requests += event.requests
      sum.credits += event.credits
      sum.errors += event.errors
    }
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

  private settle(chained: Promise<void>): void {
    if (this.flushing === chained) this.flushing = undefined
  }

  private async write(): Promise<void> {
    if (this.pending.size === 0) return
    const sums = [...this.pending.values()]
    this.pending = new Map()
    try {
      await this.pool.query(UPSERT, [
        sums.map((s) => s.projectId),
        sums.map((s) => s.bucketMs),
        sums.map((s) => s.apiType),
        sums.map((s) => s.requests),
        sums.map((s) => s.credits),
        sums.map((s) => s.errors),
      ])
    } catch (error) {
      // Not written (or unknown, which a lost connection makes rare): keep them for the next flush.
      for (const sum of sums) this.record({ ...sum, at: sum.bucketMs })
      throw pgFailure(error)
    }
  }
}
