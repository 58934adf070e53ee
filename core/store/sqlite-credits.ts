/**
 * Credit ledger of the SQLite engine: reservations in memory, settlements on disk.
 *
 * The durability the gateway needs is that a charge a client was answered for is on disk before the
 * answer. A reservation that never got committed is released by recovery anyway, so writing it
 * buys nothing: a crash loses exactly the reservations recovery would have released. Hence:
 *
 * - `reserve` is an in-memory check-and-add against a per-(project, period) balance whose `used` is
 *   loaded once from SQLite (committed charges) and then kept in memory (committed + pending). It is
 *   synchronous, so nothing can interleave between the check and the add: no overspend.
 * - `commit` writes the reservation row (state committed) and adds its charge to the on-disk `used`,
 *   through the group commit; its promise resolves after that COMMIT.
 * - `release` / `refundPart` of a pending reservation only touch memory; of a committed one they also
 *   write the refund to disk (queued after the commit, so always applied to a row that exists).
 * - `balance` answers from memory (committed + pending) when the period is loaded.
 *
 * Memory is always adjusted at call time, never inside a batched step (the batcher may run a step
 * twice), so the memory balance and the disk stay consistent: disk `used` + pending = memory `used`.
 * A period loaded from disk first drains the write queue, so it sees every queued settlement.
 *
 * This is single-process by construction: the store holds the database with an exclusive lock, so
 * no other writer can move `used` behind the cache's back. A shared engine (Redis) would keep the
 * reservations in Redis, next to the balance, with the same check-and-add as one script.
 *
 * A reservation row carries its period, so late commits and refunds touch that period's balance
 * whatever the clock says. Settled rows are swept after the retention (see sqlite.ts); balances of
 * periods nobody used since the last sweep tick are dropped from memory and reloaded on demand.
 */
import type Database from 'better-sqlite3'
import type { WriteBatcher } from './sqlite-batch.ts'
import { CreditDisk, type ReservationRecord, type ReservationState } from './sqlite-credit-disk.ts'
import type { CreditBalance, CreditReservation } from './types.ts'

export { CREDITS_SCHEMA, type ReservationRecord, type ReservationState } from './sqlite-credit-disk.ts'

/** One (project, period) balance held in memory. */
interface PeriodBalance {
  /** Committed charges (as on disk, after the queued writes) plus pending reservations. */
  used: number
  /** Reservations in memory that point at this balance; it is never dropped while any does. */
  held: number
  /** Touched since the last eviction pass. */
  touched: boolean
}

/** A reservation this process holds: pending, or committed until its disk write has resolved. */
interface HeldReservation {
  readonly id: string
  readonly projectId: string
  readonly period: string
  readonly apiType: string
  readonly amount: number
  readonly createdAt: number
  charged: number
  state: ReservationState
  readonly balance: PeriodBalance
  /** The last disk write of this reservation (commit, then maybe a release), once one is queued. */
  written?: Promise<void>
}

const done = Promise.resolve()

/**
 * The credit operations of {@link SqliteStore}.
 *
 * @example
 * ```ts
 * const ledger = new SqliteCreditLedger(db, writes)
 * const { ok } = ledger.reserve({ id: 'r1', projectId: 'demo', period: '2026-11', allocation: 100, amount: 1, apiType: 'MIRROR' }, Date.now())
 * if (ok) await ledger.commit('r1') // on disk once resolved
 * ```
 */
export class SqliteCreditLedger {
  private readonly disk: CreditDisk
  private readonly balances = new Map<string, Map<string, PeriodBalance>>()
  private readonly held = new Map<string, HeldReservation>()
  private sweepCursor = ''

  constructor(
    db: Database.Database,
    private readonly writes: WriteBatcher,
  ) {
    this.disk = new CreditDisk(db)
  }

  /** Check-and-reserve in memory. Bad input and an id already held throw. */
  reserve(reservation: CreditReservation, now: number): { ok: boolean; balance: CreditBalance } {
    const { id, projectId, period, allocation, amount, apiType } = reservation
    if (typeof id !== 'string' || id === '') throw new TypeError('reservation id must be a non-empty string')
    checkAmount('amount', amount)
    if (!Number.isFinite(allocation)) throw new RangeError(`allocation must be a finite number, got ${allocation}`)
    if (this.held.has(id)) throw Object.assign(new Error(`reservation id ${id} is already in use`), { code: 'reservation_exists' })
    const balance = this.periodBalance(projectId, period)
    balance.touched = true
    const used = balance.used + amount
    if (used > allocation) return { ok: false, balance: toBalance(projectId, period, allocation, balance.used) }
    balance.used = used
    balance.held++
    this.held.set(id, { id, projectId, period, apiType, amount, createdAt: now, charged: amount, state: 'pending', balance })
    return { ok: true, balance: toBalance(projectId, period, allocation, used) }
  }

  /** Writes the charge to disk; resolves after its COMMIT. Unknown, released or repeated: no-op. */
  commit(id: string): Promise<void> {
    const held = this.held.get(id)
    if (held === undefined) return done
    if (held.state !== 'pending') return held.written ?? done
    held.state = 'committed'
    // Captured now: a later refund changes `charged` in memory and queues its own disk write.
    const row = { id, projectId: held.projectId, period: held.period, apiType: held.apiType, amount: held.amount, charged: held.charged, createdAt: held.createdAt }
    const written = this.writes.enqueue(() => this.disk.commitStep(row), true).then(
      () => this.forget(held),
      (error: unknown) => {
        // Not on disk: still pending in memory, so a release gives it back.
        if (held.state === 'committed') {
          held.state = 'pending'
          held.written = undefined
        } else this.forget(held)
        throw error
      },
    )
    held.written = written
    return written
  }

  /** Gives back what the reservation still charges; on disk too once committed. Idempotent. */
  release(id: string): Promise<void> {
    const held = this.held.get(id)
    if (held === undefined) return this.releaseOnDisk(id)
    if (held.state === 'released') return held.written ?? done
    uncharge(held.balance, held.charged)
    held.charged = 0
    if (held.state === 'pending') {
      held.state = 'released'
      this.forget(held)
      return done
    }
    held.state = 'released'
    held.written = this.writes.enqueue(() => this.disk.releaseStep(id))
    return held.written
  }

  /** Gives back up to `amount` of what the reservation still charges. */
  refundPart(id: string, amount: number): Promise<void> {
    checkAmount('amount', amount)
    if (amount === 0) return done
    const held = this.held.get(id)
    if (held === undefined) return this.refundOnDisk(id, amount)
    if (held.state === 'released') return held.written ?? done
    const refund = Math.min(amount, held.charged)
    if (refund <= 0) return done
    held.charged -= refund
    uncharge(held.balance, refund)
    if (held.state === 'pending') return done
    return this.writes.enqueue(() => this.disk.refundStep(id, refund))
  }

  /** Committed + pending of a period; read from disk (without caching) when it is not in memory. */
  balance(projectId: string, period: string, allocation: number): CreditBalance {
    const cached = this.balances.get(projectId)?.get(period)
    if (cached !== undefined) return toBalance(projectId, period, allocation, cached.used)
    this.writes.drain()
    return toBalance(projectId, period, allocation, this.disk.used(projectId, period))
  }

  /** Releases pending rows left on disk by versions that wrote reservations; returns how many. */
  recoverPending(): number {
    this.writes.drain()
    let released = 0
    for (const group of this.disk.recoverTx()) {
      this.unchargeCached(group.projectId, group.period, group.amount)
      released += group.n
    }
    return released
  }

  /** A pending reservation from memory; any other from disk (after the queued writes). */
  get(id: string): ReservationRecord | undefined {
    const held = this.held.get(id)
    if (held !== undefined && held.state === 'pending') {
      const { projectId, period, apiType, amount, charged, state, createdAt } = held
      return { id, projectId, period, apiType, amount, charged, state, createdAt }
    }
    this.writes.drain()
    return this.disk.get(id)
  }

  /**
   * Deletes settled reservation rows created before `cutoff`, examining at most `maxRows` rows from
   * where the previous call stopped, and drops period balances idle since the previous call.
   * Returns how many rows were deleted and whether the walk wrapped around.
   */
  sweep(cutoff: number, maxRows: number): { deleted: number; wrapped: boolean } {
    this.evictIdleBalances()
    this.writes.drain()
    const { cursor, deleted } = this.disk.sweepTx(this.sweepCursor, maxRows, cutoff)
    this.sweepCursor = cursor
    return { deleted, wrapped: cursor === '' }
  }

  /** The in-memory balance of a period, loaded from disk (after the queued writes) on first use. */
  private periodBalance(projectId: string, period: string): PeriodBalance {
    let periods = this.balances.get(projectId)
    if (periods === undefined) {
      periods = new Map()
      this.balances.set(projectId, periods)
    }
    let balance = periods.get(period)
    if (balance === undefined) {
      this.writes.drain()
      balance = { used: this.disk.used(projectId, period), held: 0, touched: true }
      periods.set(period, balance)
    }
    return balance
  }

  private releaseOnDisk(id: string): Promise<void> {
    // Drained first, so the row read is the row the queued step will see (no double refund).
    this.writes.drain()
    const row = this.disk.get(id)
    if (row === undefined || row.state === 'released') return done
    this.unchargeCached(row.projectId, row.period, row.charged)
    return this.writes.enqueue(() => this.disk.releaseStep(id))
  }

  private refundOnDisk(id: string, amount: number): Promise<void> {
    this.writes.drain()
    const row = this.disk.get(id)
    if (row === undefined || row.state === 'released') return done
    const refund = Math.min(amount, row.charged)
    if (refund <= 0) return done
    this.unchargeCached(row.projectId, row.period, refund)
    return this.writes.enqueue(() => this.disk.refundStep(id, refund))
  }

  /** A period not in memory needs nothing: it is loaded from disk, after the queued refund. */
  private unchargeCached(projectId: string, period: string, amount: number): void {
    const balance = this.balances.get(projectId)?.get(period)
    if (balance !== undefined) uncharge(balance, amount)
  }

  private forget(held: HeldReservation): void {
    if (this.held.get(held.id) !== held) return
    this.held.delete(held.id)
    held.balance.held--
  }

  private evictIdleBalances(): void {
    for (const [projectId, periods] of this.balances) {
      for (const [period, balance] of periods) {
        if (balance.held === 0 && !balance.touched) periods.delete(period)
        else balance.touched = false
      }
      if (periods.size === 0) this.balances.delete(projectId)
    }
  }
}

function uncharge(balance: PeriodBalance, amount: number): void {
  balance.used = Math.max(0, balance.used - amount)
}

function toBalance(projectId: string, period: string, allocation: number, used: number): CreditBalance {
  return { projectId, period, allocation, used, remaining: Math.max(0, allocation - used) }
}

function checkAmount(name: string, value: number): void {
  if (!(value >= 0) || !Number.isFinite(value)) throw new RangeError(`${name} must be a non-negative number, got ${value}`)
}
