/**
 * The embedded store engine: SQLite (better-sqlite3, WAL) for what must survive a restart, and
 * in-process token buckets for rate limits. Single node: one process owns `<dataDir>/tollgate.db`.
 *
 * Durability. The database runs in WAL mode with `synchronous = NORMAL`. Each write transaction
 * ends with a write() of its pages into the WAL file before COMMIT returns; only checkpoints
 * fsync. Data written with write() sits in the OS page cache, which belongs to the kernel, not to
 * the process: a crash or `kill -9` of the gateway loses nothing that was committed, and the next
 * open replays the WAL. Only a power loss or kernel crash can drop the last commits before the next
 * checkpoint; `synchronous = FULL` would close that window with an fsync per commit, which costs
 * milliseconds on most disks and is far beyond the per-request budget.
 *
 * Credits: reservations in memory, charges on disk as per-period sums (sqlite-credits.ts). A
 * reservation is an in-memory check-and-add against the period's balance (committed charges loaded
 * once from SQLite, plus the pending reservations): no disk write, so no overspend and no wait. A
 * commit adds the charge to its period's on-disk sum; its promise resolves after the COMMIT, and the
 * meter commits before the answer's head is written, so every charge a client was answered for is on
 * disk before the answer. A crash loses only
 * pending reservations, which recovery would have released anyway. This needs the store to be the
 * only writer of the ledger, which the exclusive lock below guarantees; the shared engine
 * (shared/index.ts) keeps the reservations in PostgreSQL instead.
 *
 * Group commit. Credit settlements and document writes are queued, and everything queued during one
 * event-loop turn runs in queue order inside ONE transaction at the next check phase (setImmediate),
 * at most 1000 operations per transaction (`maxBatchOps`). An operation's promise resolves only after
 * its batch has committed, so a commit is on disk (in the crash-safe sense above) when its promise
 * resolves, exactly as with one transaction each; what batching adds is at most one event-loop turn
 * of delay. The credit charges of one turn are one operation (a sum per period). An operation that
 * fails is rejected alone; the others of its batch commit (see sqlite-batch.ts). Reads that go to disk (getReservation, a balance not held in
 * memory, document get/list) first run what is queued, so they see every write issued before them.
 * Usage counters are buffered separately (sqlite-usage.ts).
 *
 * Locking. By default the connection holds the database lock for its lifetime (`locking_mode =
 * EXCLUSIVE`, WAL index in process memory): no lock syscalls per transaction, and a second gateway
 * pointed at the same data dir fails at open instead of sharing (and double-recovering) the ledger.
 *
 * {@link SqliteStore.recoverPendingReservations} releases the pending rows that versions which wrote
 * reservations to disk may have left; this version leaves none. Call it once at start.
 */
import Database from 'better-sqlite3'
import { mkdirSync } from 'node:fs'
import path from 'node:path'
import { MAX_BATCH_OPS, WriteBatcher, type WriteBatchStats } from './sqlite-batch.ts'
import { SqliteCreditLedger, type ReservationRecord } from './sqlite-credits.ts'
import { prepareDocumentStatements, SqliteDocumentCollection } from './sqlite-documents.ts'
import { SqliteUsageLog } from './sqlite-usage.ts'
import { TokenBuckets } from './token-bucket.ts'
import { backgroundFailed, backgroundSucceeded, type BackgroundLog } from '../proxy/resilience.ts'
import { SqliteSettings } from './settings/sqlite.ts'
import { SqliteAccounts } from './accounts/sqlite.ts'
import type {
  CreditBalance,
  CreditCarried,
  CreditCarry,
  CreditGrant,
  CreditLedger,
  CreditReservation,
  DocumentCollection,
  Granularity,
  ImmediateStore,
  RateDecision,
  Store,
  StoreHealth,
  UsageEvent,
  UsageDetailRow,
  UsageRow,
} from './types.ts'

export type { WriteBatchStats } from './sqlite-batch.ts'
export type { ReservationRecord } from './sqlite-credits.ts'

export interface SqliteStoreOptions {
  /** Directory of `tollgate.db`; created if missing. */
  dataDir: string
  /** Epoch-ms clock for timestamps, retention and token buckets; injectable for tests. */
  clock?: () => number
  /** Usage sums are written every this many ms (default 1000; 0 writes every event through). */
  usageFlushMs?: number
  /** Settled reservations nobody closed are kept this long for late refunds, then dropped (default 10 minutes). */
  reservationRetentionMs?: number
  /**
   * Hold the database lock for the store's lifetime (default true). Saves the lock syscalls of every
   * transaction (about a third of the cost of a reserve + commit) and guarantees one process owns the
   * ledger, which recoverPendingReservations relies on. Other processes cannot read the file meanwhile;
   * set false to let tooling read it live.
   */
  exclusive?: boolean
  /** How long opening waits for another process to let go of the database (default 5000 ms). */
  lockTimeoutMs?: number
  /** Most queued writes committed in one transaction (default 1000; 1 = a transaction per write). */
  maxBatchOps?: number
  /** Most rate-limit buckets held in memory (default 100,000). */
  maxRateBuckets?: number
  /** Failures of background work (usage flush, sweep), once per outage of each (all counted in tollgate_background_errors_total). Default: a process warning. */
  onBackgroundError?: (error: unknown) => void
}

const DB_FILE = 'tollgate.db'
const SWEEP_INTERVAL_MS = 500
/** Rows of older versions the background sweep examines per tick. */
const SWEEP_MIN_ROWS = 2_000
const SWEEP_MAX_ROWS = 50_000

/**
 * Opens (or creates) the embedded store.
 *
 * @example
 * ```ts
 * const store = openSqliteStore({ dataDir: './data' })
 * await store.recoverPendingReservations()
 * const { ok } = await store.reserveCredits({ id, projectId: 'demo', period: periodKey('month', Date.now()), allocation: 1000, amount: 1, apiType: 'MIRROR' })
 * ```
 */
export function openSqliteStore(options: SqliteStoreOptions): SqliteStore {
  return new SqliteStore(options)
}

export class SqliteStore implements Store {
  readonly engine = 'sqlite'
  /** Absolute path of the database file. */
  readonly file: string
  private readonly db: Database.Database
  private readonly writes: WriteBatcher
  private readonly clock: () => number
  private readonly credits: SqliteCreditLedger
  private readonly usage: SqliteUsageLog
  private readonly buckets: TokenBuckets
  private readonly documentStmts: ReturnType<typeof prepareDocumentStatements>
  private readonly collections = new Map<string, DocumentCollection>()
  private readonly retentionMs: number
  private readonly onBackgroundError: (error: unknown) => void
  private readonly timers: NodeJS.Timeout[] = []
  private closed = false
  /** Project settings overrides, in this database; notifications are in-process (one process owns it). */
  readonly settings: SqliteSettings
  /** Users and admin sessions, in this database. */
  readonly accounts: SqliteAccounts
  /** Reservations, buckets and usage sums live in this process: their answers are ready at once. */
  readonly immediate: ImmediateStore = {
    reserveCredits: (reservation) => this.credits.reserveRemaining(reservation, this.clock()),
    takeToken: (key, capacity, refillPerSecond, cost) => this.buckets.take(key, capacity, refillPerSecond, cost),
    closeCredits: (reservationId) => {
      // A pending reservation's release writes nothing (it never reached the disk); a settled one's
      // last write is its turn's, awaited by whoever committed or refunded it and marked handled
      // where the turn is made (sqlite-credits.ts `currentTurn`).
      void this.credits.close(reservationId)
    },
    recordUsage: (event) => this.usage.record(event),
  }

  constructor(options: SqliteStoreOptions) {
    mkdirSync(options.dataDir, { recursive: true })
    this.file = path.resolve(options.dataDir, DB_FILE)
    this.clock = options.clock ?? Date.now
    this.retentionMs = options.reservationRetentionMs ?? 600_000
    this.onBackgroundError = options.onBackgroundError ?? ((error) => process.emitWarning(error as Error, 'TollgateStoreWarning'))

    this.db = new Database(this.file)
    // Another process may hold the lock briefly (a gateway still shutting down, tooling reading usage).
    this.db.pragma(`busy_timeout = ${Math.max(0, Math.trunc(options.lockTimeoutMs ?? 5000))}`)
    // Must precede the switch to WAL: then the WAL index lives in process memory, not in a shared file.
    if (options.exclusive ?? true) this.db.pragma('locking_mode = EXCLUSIVE')
    try {
      this.db.pragma('journal_mode = WAL')
    } catch (error) {
      this.db.close()
      if ((error as { code?: string }).code === 'SQLITE_BUSY') {
        throw new Error(`${this.file} is locked by another process (is another gateway running on this data dir?)`, { cause: error })
      }
      throw error
    }
    const usageFlushMs = options.usageFlushMs ?? 1000
    try {
      // See the top of this file: commits survive a process crash, only power loss can drop the last ones.
      this.db.pragma('synchronous = NORMAL')
      this.db.pragma('cache_size = -32768')
      // After a checkpoint resets the WAL, shrink the file back so it does not keep its peak size.
      this.db.pragma('journal_size_limit = 67108864')
      this.writes = new WriteBatcher(this.db, options.maxBatchOps ?? MAX_BATCH_OPS)
      this.credits = new SqliteCreditLedger(this.db, this.writes)
      this.usage = new SqliteUsageLog(this.db, usageFlushMs)
      this.documentStmts = prepareDocumentStatements(this.db)
      this.settings = new SqliteSettings(this.db, this.clock)
      this.accounts = new SqliteAccounts(this.db, this.clock)
    } catch (error) {
      this.db.close()
      throw error
    }
    this.buckets = new TokenBuckets({ maxBuckets: options.maxRateBuckets, clock: this.clock })

    if (usageFlushMs > 0) this.every('usage-flush', usageFlushMs, () => this.usage.flush())
    this.every('store-sweep', SWEEP_INTERVAL_MS, () => this.sweepTick())
  }

  /** The database is a file this process holds open: healthy until closed. */
  async health(): Promise<StoreHealth> {
    return this.closed ? { ok: false, components: { sqlite: 'closed' } } : { ok: true, components: { sqlite: 'ok' } }
  }

  async reserveCredits(reservation: CreditReservation): Promise<{ ok: boolean; balance: CreditBalance }> {
    return this.credits.reserve(reservation, this.clock())
  }

  // The settling operations hand out the ledger's own promise: wrapped in an async function, each
  // would cost two more microtask turns per request (promise adoption). The try/catch is written out
  // in each rather than passed a closure: a closure is an allocation per request.
  commitCredits(reservationId: string): Promise<void> {
    try {
      return this.credits.commit(reservationId)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  releaseCredits(reservationId: string): Promise<void> {
    try {
      return this.credits.release(reservationId)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  refundPart(reservationId: string, amount: number): Promise<void> {
    try {
      return this.credits.refundPart(reservationId, amount)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  closeCredits(reservationId: string): Promise<void> {
    try {
      return this.credits.close(reservationId)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  async balance(projectId: string, period: string, allocation: number): Promise<CreditBalance> {
    return this.credits.balance(projectId, period, allocation)
  }

  grantCredits(grant: CreditGrant): Promise<{ created: boolean; balance: CreditBalance }> {
    return rejectOnThrow(() => this.credits.grant(grant, this.clock()))
  }

  carryCredits(carry: CreditCarry): Promise<CreditCarried> {
    return rejectOnThrow(() => this.credits.carry(carry, this.clock()))
  }

  async creditLedger(projectId: string, period: string, allocation: number): Promise<CreditLedger> {
    return this.credits.ledger(projectId, period, allocation)
  }

  async recoverPendingReservations(): Promise<number> {
    return this.credits.recoverPending()
  }

  /** A reservation held in memory (until closed), or a row an older version wrote (for tests and tooling). */
  async getReservation(reservationId: string): Promise<ReservationRecord | undefined> {
    return this.credits.get(reservationId)
  }

  /** Drops settled reservations older than the retention now; returns how many rows of older versions it deleted. */
  async sweepReservations(): Promise<number> {
    const cutoff = this.clock() - this.retentionMs
    let total = 0
    for (;;) {
      const { deleted, wrapped } = this.credits.sweep(cutoff, SWEEP_MAX_ROWS)
      total += deleted
      if (wrapped) return total
    }
  }

  async recordUsage(event: UsageEvent): Promise<void> {
    this.usage.record(event)
  }

  async queryUsage(projectId: string, fromMs: number, toMs: number, granularity: Granularity): Promise<UsageRow[]> {
    return this.usage.query(projectId, fromMs, toMs, granularity)
  }

  async queryUsageDetail(projectId: string, fromMs: number, toMs: number, granularity: Granularity): Promise<UsageDetailRow[]> {
    return this.usage.queryDetail(projectId, fromMs, toMs, granularity)
  }

  async takeToken(key: string, capacity: number, refillPerSecond: number, cost?: number): Promise<RateDecision> {
    return this.buckets.take(key, capacity, refillPerSecond, cost)
  }

  documents(collection: string): DocumentCollection {
    let found = this.collections.get(collection)
    if (found === undefined) {
      found = new SqliteDocumentCollection(collection, this.documentStmts, this.clock, this.writes)
      this.collections.set(collection, found)
    }
    return found
  }

  /** Group-commit counters since open: transactions committed and writes settled through them. */
  writeStats(): WriteBatchStats {
    return this.writes.stats()
  }

  /**
   * Commits the queued writes and buffered usage, checkpoints the WAL into the database file and
   * closes it. Writes issued afterwards reject. Idempotent.
   */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    for (const timer of this.timers) clearInterval(timer)
    try {
      this.writes.close()
      this.usage.flush()
      this.db.pragma('wal_checkpoint(TRUNCATE)')
    } finally {
      this.db.close()
    }
  }

  /**
   * Runs `task` every `ms` without keeping the process alive; a failure (a full disk...) is counted in
   * tollgate_background_errors_total and given to onBackgroundError once per outage (core/proxy/resilience.ts).
   */
  private every(name: string, ms: number, task: () => void): void {
    const log: BackgroundLog = { warn: (report) => this.onBackgroundError((report as { err?: unknown }).err), info: () => {} }
    const timer = setInterval(() => {
      try {
        task()
        backgroundSucceeded(name, log)
      } catch (error) {
        backgroundFailed(name, error, log)
      }
    }, ms)
    timer.unref()
    this.timers.push(timer)
  }

  /** One bounded step of the sweep (rows of older versions; this one writes none). */
  private sweepTick(): void {
    this.credits.sweep(this.clock() - this.retentionMs, SWEEP_MIN_ROWS)
  }
}

/** The promise `run` returns, or a rejected one when it throws before returning it. */
function rejectOnThrow<T>(run: () => Promise<T>): Promise<T> {
  try {
    return run()
  } catch (error) {
    return Promise.reject(error)
  }
}
