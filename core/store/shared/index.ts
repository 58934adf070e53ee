/**
 * The shared store engine: PostgreSQL for money and records (credit ledger, usage, documents), Redis
 * for rate-limit buckets. Any number of gateway instances pointed at the same servers (and schema and
 * key prefix) share balances, holds, usage, documents and buckets. See ARCHITECTURE.md "The shared
 * engine" for the design and its failure behaviour.
 *
 * Each instance has a random id, heartbeats its row in `tollgate_instances` and runs the reaper
 * every tick: pending holds of instances silent for `instanceTimeoutMs` are released (a `kill -9`d
 * instance's reservations come back without it restarting). The same tick re-sends releases that
 * PostgreSQL did not confirm and flushes usage sums.
 */
import { hostname } from 'node:os'
import { randomBytes } from 'node:crypto'
import type pg from 'pg'
import type {
  CreditBalance,
  CreditCarried,
  CreditCarry,
  CreditGrant,
  CreditLedger,
  CreditReservation,
  DocumentCollection,
  Granularity,
  QuickStore,
  RateDecision,
  Store,
  StoreHealth,
  UsageEvent,
  UsageDetailRow,
  UsageRow,
} from '../types.ts'
import { SharedCreditLedger } from './credits.ts'
import { CreditLeases, IDLE_MS } from './credit-leases.ts'
import { carryInPostgres, recallLeases } from './credit-carries.ts'
import { checkCarry } from '../credit-balance.ts'
import { SharedDocumentCollection } from './documents.ts'
import type { MigrationSet } from './migrations.ts'
import { runMigrations } from './migrations.ts'
import { openPgPool, pgFailure, PgBatcher, type PgBatchStats } from './pg.ts'
import { RedisBuckets } from './redis-buckets.ts'
import { sharedQuickStore } from './quick-store.ts'
import { SharedUsageLog } from './usage.ts'
import { PostgresSettings } from '../settings/postgres.ts'
import { PostgresAccounts } from '../accounts/postgres.ts'
import { backgroundFailed, runInBackground, type BackgroundLog } from '../../proxy/resilience.ts'
import type { SharedStoreOptions } from './options.ts'
import { checkSchemaCurrent, engineMigrations, settingsChannel } from './migration-sets.ts'

export { coreMigrations } from './schema.ts'
export { documentRevisionMigrations } from './documents.ts'
export { usageMigrations } from './usage.ts'
export { carryMigrations } from './credit-carries.ts'
export { runMigrations, SchemaTooNewError, type Migration, type MigrationSet, type MigrationReport } from './migrations.ts'
export type { CreditCommit } from './pg.ts'
export type { SharedStoreOptions } from './options.ts'
export { migrateSharedStore, settingsMigrations, accountsMigrations, settingsChannel } from './migration-sets.ts'

/** Opens the shared store: connects, applies (or checks) migrations, registers this instance. */
export async function openSharedStore(options: SharedStoreOptions): Promise<SharedStore> {
  const store = new SharedStore(options)
  try {
    await store.start(options.migrate ?? true)
  } catch (error) {
    await store.close().catch(() => {})
    throw error
  }
  return store
}

export class SharedStore implements Store {
  readonly engine = 'shared'
  /** This process's id in `tollgate_instances` and owner of its holds. */
  readonly instanceId = `${hostname()}-${process.pid}-${randomBytes(4).toString('hex')}`
  readonly pool: pg.Pool
  readonly schema: string
  /** Run-time project settings, in this schema; changes reach every instance by LISTEN/NOTIFY. */
  readonly settings: PostgresSettings
  /** Users and admin sessions, shared by every instance. */
  readonly accounts: PostgresAccounts
  /** The per-request calls answered from memory when leases cover them (quick-store.ts). */
  readonly quick: QuickStore
  private readonly batch: PgBatcher
  private readonly ledger: SharedCreditLedger
  /** The credit operations: leases in front of the ledger, or the ledger itself when leases are off. */
  private readonly credits: SharedCreditLedger | CreditLeases
  private readonly leases: CreditLeases | undefined
  private readonly usage: SharedUsageLog
  private readonly buckets: RedisBuckets
  private readonly collections = new Map<string, DocumentCollection>()
  private readonly clock: () => number
  private readonly instanceTimeoutMs: number
  private readonly retentionMs: number
  private readonly onBackgroundError: (error: unknown) => void
  private readonly backgroundLog: BackgroundLog
  private readonly options: SharedStoreOptions
  private readonly timers: NodeJS.Timeout[] = []
  private ticking = false
  private beating = false
  private closed = false

  constructor(options: SharedStoreOptions) {
    this.options = options
    this.schema = options.schema ?? 'public'
    this.clock = options.clock ?? Date.now
    this.instanceTimeoutMs = options.instanceTimeoutMs ?? 10_000
    this.retentionMs = options.reservationRetentionMs ?? 600_000
    const onBackgroundError = options.onBackgroundError ?? ((error) => process.emitWarning(error as Error, 'TollgateStoreWarning'))
    this.backgroundLog = options.backgroundLog ?? { warn: (report) => onBackgroundError((report as { err?: unknown }).err), info: () => {} }
    // Every failure outside a request is counted and logged once per outage, never thrown.
    this.onBackgroundError = (error) => backgroundFailed('postgres-connection', error, this.backgroundLog)
    this.pool = openPgPool({ url: options.postgres, schema: this.schema, max: options.poolSize, onError: (error) => this.onBackgroundError(error) })
    const creditCommit = options.creditCommit ?? 'durable'
    if (creditCommit !== 'durable' && creditCommit !== 'async') throw new RangeError(`creditCommit must be durable or async, got ${String(creditCommit)}`)
    this.batch = new PgBatcher(this.pool, this.instanceId, creditCommit)
    this.ledger = new SharedCreditLedger(this.pool, this.batch, this.clock)
    const leaseCredits = options.leaseCredits ?? 100
    if (!(Number.isInteger(leaseCredits) && leaseCredits >= 0)) throw new RangeError(`leaseCredits must be a non-negative integer, got ${leaseCredits}`)
    this.leases = leaseCredits > 0 ? new CreditLeases(this.ledger, this.batch, leaseCredits, this.instanceId, this.clock, this.backgroundLog, options.chargeEarly ?? false) : undefined
    this.credits = this.leases ?? this.ledger
    this.usage = new SharedUsageLog(this.pool)
    this.buckets = new RedisBuckets({ url: options.redis, keyPrefix: options.keyPrefix ?? 'tollgate:', onError: (error) => backgroundFailed('redis-connection', error, this.backgroundLog), callTimeoutMs: options.redisTimeoutMs, leaseTokens: options.rateLeaseTokens })
    this.quick = sharedQuickStore(this.leases, this.credits, this.buckets, this.usage)
    this.accounts = new PostgresAccounts(this.pool, this.clock)
    this.settings = new PostgresSettings({
      pool: this.pool,
      channel: settingsChannel(this.schema),
      openListener: async () => {
        const { default: pgModule } = await import('pg')
        const client = new pgModule.Client({ connectionString: options.postgres, application_name: 'tollgate-settings-listen' })
        await client.connect()
        return client
      },
      onListenerError: (error) => backgroundFailed('settings-listen', error, this.backgroundLog),
    })
  }

  /** @internal Called once by {@link openSharedStore}. */
  async start(migrate: boolean): Promise<void> {
    const sets = [...engineMigrations(), ...(this.options.migrations ?? [])]
    if (migrate) await runMigrations(this.pool, this.schema, sets)
    else await checkSchemaCurrent(this.pool, this.schema, sets)
    await this.heartbeat()
    await this.buckets.connect()
    // Heartbeat well within the timeout, so a live instance is never taken for dead.
    const tickMs = Math.max(50, Math.min(1000, Math.floor(this.instanceTimeoutMs / 4)))
    // Separate timers: a slow reap or retry must never delay the heartbeat past the timeout.
    this.every('store-heartbeat', tickMs, () => this.beat())
    this.every('store-reaper', tickMs, () => this.tick())
    this.every('usage-flush', this.options.usageFlushMs ?? 1000, () => this.usage.flush())
    const leases = this.leases
    if (leases !== undefined) this.every('credit-lease-idle', IDLE_MS, async () => leases.idleCheck())
  }

  health(): Promise<StoreHealth> {
    return Promise.all([this.pingPostgres(1000), this.buckets.ping(1000)]).then(([postgres, redis]) => ({ ok: postgres === 'ok', components: { postgres, redis } }))
  }

  /**
   * A refusal reports the balance (the 402's "N credits left") read as every balance is read: the
   * reserve and lease ops' own `used + pending` count credits parked in leases as used.
   */
  reserveCredits(reservation: CreditReservation): Promise<{ ok: boolean; balance: CreditBalance }> {
    const leases = this.leases
    if (leases === undefined) return this.withRefusalBalance(this.credits.reserve(reservation), reservation)
    // Per metered request: a lease that covers it answers without an async frame (gateway CPU, issue 26).
    let now: { ok: true; balance: CreditBalance } | undefined
    try {
      now = leases.reserveNow(reservation)
    } catch (error) {
      return Promise.reject(error)
    }
    return now === undefined ? this.withRefusalBalance(leases.reserveLater(reservation), reservation) : Promise.resolve(now)
  }

  private async withRefusalBalance(decided: Promise<{ ok: boolean; balance: CreditBalance }>, reservation: CreditReservation): Promise<{ ok: boolean; balance: CreditBalance }> {
    const result = await decided
    if (result.ok) return result
    return { ok: false, balance: await this.balance(reservation.projectId, reservation.period, reservation.allocation) }
  }

  commitCredits(reservationId: string): Promise<void> {
    return rejectOnThrow(() => this.credits.commit(reservationId))
  }

  releaseCredits(reservationId: string): Promise<void> {
    return rejectOnThrow(() => this.credits.release(reservationId))
  }

  refundPart(reservationId: string, amount: number): Promise<void> {
    return rejectOnThrow(() => this.credits.refundPart(reservationId, amount))
  }

  closeCredits(reservationId: string): Promise<void> {
    return rejectOnThrow(() => this.credits.close(reservationId))
  }

  balance(projectId: string, period: string, allocation: number): Promise<CreditBalance> {
    return this.credits.balance(projectId, period, allocation)
  }

  /**
   * The grant's balance is read where every other balance answer reads it ({@link SharedStore.balance}):
   * the `grant` op's own figure counts the credits parked in leases as used (issue 25 finding 4: a
   * top-up answered `used: 105` while the balance said 6).
   */
  async grantCredits(grant: CreditGrant): Promise<{ created: boolean; balance: CreditBalance }> {
    const { created, projectId, period } = await this.ledger.grant(grant)
    return { created, balance: await this.balance(projectId, period, grant.allocation) }
  }

  /**
   * Carries a period's unspent granted credits into the new schedule's period (credit-carries.ts).
   * Credits parked in leases of the old period are part of what it has left: this instance gives its
   * lease back first, and the other instances' leases are recalled and waited for (they give back
   * their unheld credits within two idle checks); what a dead or busy instance still holds then
   * counts as used in the old period and stays there, in its balance.
   */
  async carryCredits(carry: CreditCarry): Promise<CreditCarried> {
    checkCarry(carry)
    if (this.leases !== undefined) {
      this.leases.returnLease(carry.projectId, carry.from)
      await this.batch.idle()
      await recallLeases(this.pool, carry.projectId, carry.from, this.instanceId)
    }
    await this.batch.idle()
    const { created, amount } = await carryInPostgres(this.pool, carry)
    const [from, to] = await Promise.all([this.balance(carry.projectId, carry.from, carry.fromAllocation), this.balance(carry.projectId, carry.to, carry.toAllocation)])
    return { created, amount, from, to }
  }

  creditLedger(projectId: string, period: string, allocation: number): Promise<CreditLedger> {
    return this.credits.ledger(projectId, period, allocation)
  }

  /** Releases now the pending holds of instances that stopped heartbeating; returns how many. */
  async recoverPendingReservations(): Promise<number> {
    try {
      const { rows } = await this.pool.query<{ n: number }>('SELECT tollgate_reap($1) AS n', [this.instanceTimeoutMs])
      return rows[0]!.n
    } catch (error) {
      throw pgFailure(error)
    }
  }

  async recordUsage(event: UsageEvent): Promise<void> {
    this.usage.record(event)
  }

  queryUsage(projectId: string, fromMs: number, toMs: number, granularity: Granularity): Promise<UsageRow[]> {
    return this.usage.query(projectId, fromMs, toMs, granularity)
  }

  queryUsageDetail(projectId: string, fromMs: number, toMs: number, granularity: Granularity): Promise<UsageDetailRow[]> {
    return this.usage.queryDetail(projectId, fromMs, toMs, granularity)
  }

  takeToken(key: string, capacity: number, refillPerSecond: number, cost?: number): Promise<RateDecision> {
    return this.buckets.take(key, capacity, refillPerSecond, cost)
  }

  documents(collection: string): DocumentCollection {
    let found = this.collections.get(collection)
    if (found === undefined) {
      found = new SharedDocumentCollection(collection, this.pool, this.batch, this.clock)
      this.collections.set(collection, found)
    }
    return found
  }

  /** Resolves once every write queued before the call has been applied (or has failed). */
  idle(): Promise<void> {
    return this.batch.idle()
  }

  /** Group-commit counters since open: batches (transactions, round trips) and writes in them. */
  writeStats(): PgBatchStats {
    return this.batch.stats()
  }

  /** Rate-limit script calls to Redis and the decisions they carried since open (one call per turn). */
  rateStats(): { calls: number; takes: number; leased: number } {
    return this.buckets.stats()
  }

  /** Holds remembered and releases awaiting PostgreSQL (for tests). */
  creditCounts(): { held: number; unconfirmedReleases: number; leases: number; leasedHolds: number; endingLeases: number } {
    return { ...this.ledger.counts(), ...(this.leases?.counts() ?? { leases: 0, leasedHolds: 0, endingLeases: 0 }) }
  }

  /**
   * Applies queued writes, writes usage, releases this instance's pending holds, unregisters it and
   * disconnects. Idempotent; best effort when the servers are gone (the reaper of another instance,
   * or of the next start, releases what is left).
   */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    for (const timer of this.timers) clearInterval(timer)
    try {
      await this.batch.close()
      await this.usage.flush().catch((error) => backgroundFailed('usage-flush', error, this.backgroundLog))
      await this.ledger.retryReleases().catch(() => {})
      // Unregistered first, so the reap releases this instance's pending holds (and any dead one's).
      await this.pool
        .query(
          `WITH mine AS (DELETE FROM tollgate_instances WHERE id = $1 RETURNING id) SELECT tollgate_reap($2) FROM mine`,
          [this.instanceId, this.instanceTimeoutMs],
        )
        .catch(() => {})
    } finally {
      // The LISTEN connection first: the pool is ours and ends last.
      await this.settings.close().catch(() => {})
      await this.buckets.close().catch(() => {})
      await this.pool.end().catch(() => {})
    }
  }

  /**
   * Stops this instance the way a `kill -9` right after its last answer would, for tests of what the
   * other instances do about it: timers stop (no heartbeat), connections drop, and nothing is
   * released or unregistered. Its pending holds and leases stay until the reaper of a live instance
   * releases them; the writes already queued are applied first (they were answered or are about to be).
   */
  async abandon(): Promise<void> {
    if (this.closed) return
    this.closed = true
    for (const timer of this.timers) clearInterval(timer)
    await this.batch.close().catch(() => {})
    await this.settings.close().catch(() => {})
    await this.buckets.close().catch(() => {})
    await this.pool.end().catch(() => {})
  }

  /** One heartbeat at a time. */
  private async beat(): Promise<void> {
    if (this.beating || this.closed) return
    this.beating = true
    try {
      await this.heartbeat()
    } finally {
      this.beating = false
    }
  }

  /** Reaper, re-sent releases and the sweep of forgotten holds; one tick at a time. */
  private async tick(): Promise<void> {
    if (this.ticking || this.closed) return
    this.ticking = true
    try {
      await this.recoverPendingReservations()
      await this.ledger.retryReleases()
      this.ledger.sweep(this.clock() - this.retentionMs)
      this.leases?.sweep(this.clock() - this.retentionMs)
    } finally {
      this.ticking = false
    }
  }

  private async heartbeat(): Promise<void> {
    try {
      await this.pool.query('INSERT INTO tollgate_instances (id) VALUES ($1) ON CONFLICT (id) DO UPDATE SET seen_at = now()', [this.instanceId])
    } catch (error) {
      throw pgFailure(error)
    }
  }

  private async pingPostgres(timeoutMs: number): Promise<string> {
    let timer: NodeJS.Timeout | undefined
    try {
      return await Promise.race([
        this.pool.query('SELECT 1').then(() => 'ok'),
        new Promise<string>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs))),
      ])
    } catch (error) {
      return (error as Error).message || (error as { code?: string }).code || 'unreachable'
    } finally {
      clearTimeout(timer)
    }
  }

  /** Runs `task` every `ms` without keeping the process alive; its failures are counted and logged once per outage. */
  private every(name: string, ms: number, task: () => Promise<unknown>): void {
    const timer = setInterval(() => {
      void runInBackground(name, task, this.backgroundLog)
    }, ms)
    timer.unref()
    this.timers.push(timer)
  }
}

/** The promise `run` returns, or a rejected one when it throws before returning it (bad input). */
function rejectOnThrow<T>(run: () => Promise<T>): Promise<T> {
  try {
    return run()
  } catch (error) {
    return Promise.reject(error)
  }
}
