/**
 * PostgreSQL access of the shared engine: a `pg` pool bound to one schema, the mapping of
 * "cannot reach the database" errors to 503 `store_unavailable`, and the group commit.
 *
 * Group commit ({@link PgBatcher}): writes queued during one event-loop turn are sent together at the
 * next check phase (setImmediate) as ONE call of `tollgate_apply`, one transaction and one round
 * trip. Batches of lease ops (draw, lease, shrink) may be in flight side by side, up to
 * {@link DEFAULT_BATCHES_IN_FLIGHT} on connections of their own (a second one once at least
 * {@link SECOND_BATCH_MIN_OPS} are queued), so the WAL flush one waits for hides behind the others (core migration 6: draws append and share their lease row); any other batch is in
 * flight alone, in queue order. What is queued while no room is left leaves as the next batch as soon
 * as one returns, so batches grow with the load instead of the number of round trips. Every op's
 * promise settles after its batch's COMMIT returned. A batch that PostgreSQL rolled back for a
 * serialization failure or a deadlock (40001, 40P01) is sent again, at most {@link RETRY_JITTER_MS}
 * times after a random pause: nothing of it happened, so that is safe, and its requests do not see a
 * 503 for a conflict (counted in `tollgate_store_batch_retries_total`). A batch that fails otherwise
 * (connection lost, server down) rejects all its ops with `store_unavailable`; that is not retried
 * here, because an op whose COMMIT may or may not have happened must be resolved by the caller (the
 * credit ledger re-sends releases, which are idempotent).
 *
 * Credit commits ({@link CreditCommit}): a batch that charges waits for PostgreSQL's WAL flush by
 * default. With `async`, a batch of credit ops only (no grant, no document) commits with
 * `synchronous_commit = off`: answered once PostgreSQL has it in memory, on disk within
 * 3 × `wal_writer_delay` (0.6 s by default). A gateway's crash still loses nothing it answered;
 * a crash of PostgreSQL itself can lose that last fraction of a second of charges (those requests
 * stay served and uncharged; whole transactions go, so the ledger stays consistent).
 */
import pg from 'pg'
import { errors, GatewayError } from '../../proxy/errors.ts'
import { countStoreRetry } from '../../proxy/resilience.ts'
import { quoteIdent } from './migrations.ts'
import { ApplyQuery } from './apply-query.ts'

// numeric and bigint columns come back as JS numbers (credits and counters stay far below 2^53).
// Set on this pool only: pg's global parsers are shared with any other module that uses pg.
const NUMBER_TYPES = new Set<number>([pg.types.builtins.NUMERIC, pg.types.builtins.INT8])
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (NUMBER_TYPES.has(oid) && format !== 'binary') return (text: string) => Number(text)
    return pg.types.getTypeParser(oid, format as 'text')
  },
}

export interface PgPoolOptions {
  url: string
  schema: string
  /** Most connections (default 10). */
  max?: number
  /** Failures of idle connections, which the pool replaces on its own. */
  onError?: (error: Error) => void
}

/** Opens a pool whose connections use `schema` as their search path. */
export function openPgPool(options: PgPoolOptions): pg.Pool {
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.max ?? 10,
    options: `-c search_path=${quoteIdent(options.schema)}`,
    // An unreachable server must turn into a 503 quickly, not hold requests.
    connectionTimeoutMillis: 3000,
    query_timeout: 15_000,
    idleTimeoutMillis: 30_000,
    application_name: 'tollgate',
    types: types as pg.CustomTypesConfig,
  })
  pool.on('error', (error) => options.onError?.(error))
  return pool
}

/**
 * SQLSTATE classes that mean "the database is not serving us right now": connection exceptions
 * (08), insufficient resources (53), operator intervention such as a shutdown (57), and a
 * transaction aborted by a conflict (40). Anything without a SQLSTATE (refused, reset, timeout) too.
 */
const UNAVAILABLE_CLASSES = new Set(['08', '53', '57', '40'])

/** Whether an error of `pg` means the database cannot be reached (as opposed to a bad statement). */
export function isUnreachable(error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return true
  return UNAVAILABLE_CLASSES.has(code.slice(0, 2))
}

/** The error a caller sees: 503 `store_unavailable` when PostgreSQL is unreachable, else the error itself. */
export function pgFailure(error: unknown): Error {
  if (error instanceof GatewayError) return error
  if (isUnreachable(error)) return errors.storeUnavailable('the credit store (PostgreSQL) cannot be reached; retry shortly', { cause: error })
  return error as Error
}

/** One write of a batch, as `tollgate_apply` reads it. */
export type ApplyOp = Record<string, string | number> & { o: string }

/** One op of a batch: its text, and how its caller hears the outcome (called once, after the batch's COMMIT or failure). */
export interface BatchOp {
  /** The op's kind (`o`): which batches it may go in. */
  readonly kind: string
  /** The op as JSON text, one element of the batch's array. */
  readonly text: string
  resolve(result: unknown): void
  reject(error: unknown): void
}

/** Batch and transaction counters since open. */
export interface PgBatchStats {
  batches: number
  ops: number
  /** Batches sent again after a serialization failure or a deadlock. */
  retries: number
  /** Most batches that were in flight at once. */
  peakInFlight: number
}

/** SQLSTATEs after which the whole transaction rolled back and the batch is sent again. */
const RETRIED_CODES = new Set(['40001', '40P01'])
/** Pause before each re-send, a random time in [min, max) ms; its length is the most re-sends. */
export const RETRY_JITTER_MS: readonly (readonly [number, number])[] = [[2, 20], [10, 60]]

const pause = ([min, max]: readonly [number, number]) => new Promise<void>((resolve) => setTimeout(resolve, min + Math.random() * (max - min)))

/** Most writes sent in one batch. */
export const MAX_BATCH_OPS = 1000

// A named statement: each connection parses and plans it once, then sends only Bind/Execute.
const APPLY = { name: 'tollgate_apply', text: 'SELECT tollgate_apply($1::jsonb, $2) AS r' }
// The same call in a transaction that does not wait for the WAL flush: set_config(..., true) lasts
// until this statement's COMMIT, which is where PostgreSQL reads the setting.
const APPLY_ASYNC = { name: 'tollgate_apply_async', text: "SELECT tollgate_apply($1::jsonb, $2) AS r, set_config('synchronous_commit', 'off', true) AS c" }

/**
 * When a batch that charges is answered: `durable` after PostgreSQL's WAL flush (the default),
 * `async` before it (see the top of this file for what that risks).
 */
export type CreditCommit = 'durable' | 'async'

/** Ops a batch may commit asynchronously under `async`: the credit ledger's, not grants nor documents. */
const CREDIT_OPS = new Set(['reserve', 'commit', 'release', 'refund', 'lease', 'draw', 'shrink'])

/** The batch's ops as the JSON array `tollgate_apply` reads: their texts joined, without an intermediate array. */
function serialise(batch: BatchOp[]): string {
  let text = '['
  for (let i = 0; i < batch.length; i++) text += (i === 0 ? '' : ',') + batch[i]!.text
  return text + ']'
}

/**
 * Ops whose batches may be in flight side by side (core migration 6, append-draws-migration.ts): an
 * instance's lease ops. Draws of concurrent batches share their lease row and append; a top-up or a
 * shrink waits for the draws in flight on its lease (row lock), and its caller never depends on a
 * draw queued before it that is still in flight (credit-leases.ts ends a lease only once no request
 * holds part of it, and gives back only credits no request holds). Every other op (reserve, commit,
 * release, refund, grant, documents) goes in a batch that runs alone, in queue order, as before.
 */
const PARALLEL_OPS = new Set(['draw', 'lease', 'shrink'])

/**
 * Most batches of lease ops in flight at once, each on its own connection (default). Two, not more:
 * a batch costs PostgreSQL ~0.8 ms of CPU whatever its size plus ~45 µs per draw (slow host phase,
 * bench/apply-draws-cpu.ts), and PostgreSQL shares a core with the load in the bench. With fewer
 * batches in flight, what arrives meanwhile leaves in bigger batches: at saturation 95-102 µs of
 * PostgreSQL CPU per charged request with 2 against 122-125 with 4 (bench/RESULTS.md, session 12).
 */
export const DEFAULT_BATCHES_IN_FLIGHT = 2

/**
 * Fewest lease ops queued for a batch to go out beside one already in flight; fewer wait for it to
 * return and leave together. A batch's fixed cost in PostgreSQL (~600k instructions: the call,
 * the lease lock, the unfolded sum, the commit) is about that of 7 draws (~87k each;
 * bench/apply-draws-instructions.ts), so a second batch smaller than that costs more than the wait
 * saves. At saturation the queue is longer and both batches go out as before; at moderate load
 * (4,000 req/s paced, bench/RESULTS.md session 14) PostgreSQL CPU per charged request fell 17% and
 * the answers' latency with it, since the backends share a busy core.
 */
export const SECOND_BATCH_MIN_OPS = 8

/** Group commit over `tollgate_apply` (see the top of this file). */
export class PgBatcher {
  private queue: BatchOp[] = []
  private scheduled = false
  /** Batches in flight; a batch that is not all lease ops runs alone (`alone`). */
  private readonly inFlight = new Set<Promise<void>>()
  private alone = false
  private readonly counters: PgBatchStats = { batches: 0, ops: 0, retries: 0, peakInFlight: 0 }
  private closed = false
  private lastBatchFailed = false
  /**
   * Connections batches go out on, kept between batches: a pool checkout and release per batch
   * cost more than the rest of its client-side work. One per batch in flight; a connection is
   * dropped (and destroyed) after any error, and the next batch checks out a fresh one.
   */
  private readonly clients: pg.PoolClient[] = []
  private readonly held = new Set<pg.PoolClient>()

  constructor(
    private readonly pool: pg.Pool,
    private readonly owner: string,
    private readonly creditCommit: CreditCommit = 'durable',
    batchesInFlight = DEFAULT_BATCHES_IN_FLIGHT,
  ) {
    // Two of the pool's connections stay for everything else (reads, heartbeat, reaper, usage).
    const poolMax = (pool as pg.Pool & { options?: { max?: number } }).options?.max ?? 10
    this.batchesInFlight = Math.max(1, Math.min(batchesInFlight, poolMax - 2))
  }

  private readonly batchesInFlight: number

  /** Queues `op`; resolves with its result once its batch has committed. */
  enqueue<T>(op: ApplyOp): Promise<T> {
    return this.enqueueText<T>(op.o, JSON.stringify(op))
  }

  /**
   * {@link enqueue} for an op its caller wrote as JSON text already (`text`, an object whose `o` is
   * `kind`): the per-request draw, whose op object JSON.stringify walked key by key, every string
   * escaped, for a text that is a fixed template around the request's id (gateway CPU, issue 26).
   */
  enqueueText<T>(kind: string, text: string): Promise<T> {
    if (this.closed) return Promise.reject(new Error('the store is closed'))
    return new Promise<T>((resolve, reject) => this.push({ kind, text, resolve: resolve as (result: unknown) => void, reject }))
  }

  /** Queues an op that hears its outcome itself (no promise made here); refused at once once closed. */
  push(op: BatchOp): void {
    if (this.closed) return op.reject(new Error('the store is closed'))
    this.queue.push(op)
    this.schedule()
  }

  /** Resolves once everything queued before the call has been applied (or has failed). */
  async idle(): Promise<void> {
    while (this.inFlight.size > 0 || this.queue.length > 0) {
      if (this.inFlight.size === 0) this.flush()
      await Promise.all([...this.inFlight].map((batch) => batch.catch(() => {})))
    }
  }

  /** Whether the last batch failed (PostgreSQL unreachable); cleared by the next one that commits. */
  get failing(): boolean {
    return this.lastBatchFailed
  }

  stats(): PgBatchStats {
    return { ...this.counters }
  }

  /** Applies what is queued, then refuses new writes. */
  async close(): Promise<void> {
    await this.idle()
    this.closed = true
    for (const client of [...this.held]) this.dropClient(client)
  }

  private schedule(): void {
    if (this.scheduled) return
    this.scheduled = true
    setImmediate(() => {
      this.scheduled = false
      this.flush()
    })
  }

  /** Sends what the queue's head allows: lease-op batches while there is room, any other batch alone. */
  private flush(): void {
    while (this.queue.length > 0 && !this.alone && this.inFlight.size < this.batchesInFlight) {
      let count = 0
      while (count < this.queue.length && count < MAX_BATCH_OPS && PARALLEL_OPS.has(this.queue[count]!.kind)) count++
      let alone = false
      if (count > 0 && count < SECOND_BATCH_MIN_OPS && this.inFlight.size > 0) return
      if (count === 0) {
        // A batch that runs alone waits for every batch before it, and takes what follows it too.
        if (this.inFlight.size > 0) return
        count = Math.min(this.queue.length, MAX_BATCH_OPS)
        alone = true
      }
      const batch = count === this.queue.length ? this.queue : this.queue.slice(0, count)
      this.queue = count === this.queue.length ? [] : this.queue.slice(count)
      this.alone = alone
      const running: Promise<void> = this.run(batch).finally(() => {
        this.inFlight.delete(running)
        if (alone) this.alone = false
        if (this.queue.length > 0) this.schedule()
      })
      this.inFlight.add(running)
      if (this.inFlight.size > this.counters.peakInFlight) this.counters.peakInFlight = this.inFlight.size
    }
  }

  /** A fresh connection from the pool, held until an error (the kept ones are taken in {@link run} without a promise). */
  private async checkOut(): Promise<pg.PoolClient> {
    const client = await this.pool.connect()
    // Held between batches, the client is not the pool's idle one: its connection errors (server
    // gone while no batch runs) are ours to catch, else they would be an unhandled 'error' event.
    const onError = (error: Error) => this.dropClient(client, error)
    ;(client as pg.PoolClient & { tollgateOnError?: (error: Error) => void }).tollgateOnError = onError
    client.on('error', onError)
    this.held.add(client)
    return client
  }

  /** Gives a held client back to the pool: destroyed when `error` is given, else kept by the pool. */
  private dropClient(client: pg.PoolClient, error?: Error): void {
    if (!this.held.delete(client)) return
    const at = this.clients.indexOf(client)
    if (at >= 0) this.clients.splice(at, 1)
    const onError = (client as pg.PoolClient & { tollgateOnError?: (error: Error) => void }).tollgateOnError
    if (onError !== undefined) client.off('error', onError)
    client.release(error)
  }

  private async run(batch: BatchOp[]): Promise<void> {
    let results: unknown[]
    let client: pg.PoolClient | undefined
    try {
      const statement = this.creditCommit === 'async' && batch.every((queued) => CREDIT_OPS.has(queued.kind)) ? APPLY_ASYNC : APPLY
      const values = [serialise(batch), this.owner]
      // A kept connection without an await: an async checkout was a promise and a microtask per batch.
      client = this.clients.pop() ?? (await this.checkOut())
      for (let retry = 0; ; retry++) {
        try {
          // Bind/Execute/Sync only, its one jsonb value parsed directly (apply-query.ts).
          results = (await client.query(new ApplyQuery(statement, values)).promise) as unknown[]
          break
        } catch (error) {
          const code = (error as { code?: unknown }).code
          if (typeof code !== 'string' || !RETRIED_CODES.has(code) || retry >= RETRY_JITTER_MS.length) throw error
          // Rolled back whole, the connection still good: the same batch again, after a random pause.
          countStoreRetry(code)
          this.counters.retries++
          await pause(RETRY_JITTER_MS[retry]!)
        }
      }
      this.lastBatchFailed = false
      this.counters.batches++
      this.counters.ops += batch.length
      if (this.held.has(client)) this.clients.push(client)
    } catch (error) {
      if (client !== undefined) this.dropClient(client, error as Error)
      this.lastBatchFailed = true
      const failure = pgFailure(error)
      for (const queued of batch) queued.reject(failure)
      return
    }
    for (let i = 0; i < batch.length; i++) batch[i]!.resolve(results[i])
  }
}
