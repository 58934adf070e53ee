/**
 * Credit ledger of the SQLite engine: reservations in memory, charges on disk as per-period sums.
 *
 * The durability the gateway needs is that a charge a client was answered for is on disk before the
 * answer. A reservation that never got committed is released by recovery anyway, so writing it buys
 * nothing: a crash loses exactly the reservations recovery would have released. Hence:
 *
 * - `reserve` is an in-memory check-and-add against a per-(project, period) balance whose `used` is
 *   loaded once from SQLite (committed charges) and then kept in memory (committed + pending). It is
 *   synchronous, so nothing can interleave between the check and the add: no overspend.
 * - `commit` adds the charge to the period's on-disk `used`. Every charge and refund issued during
 *   one event-loop turn is summed per charge line (project, period, API type, hour) and written as
 *   ONE upsert per line (a trigger moves the period's `used` with it) in the group commit of that
 *   turn: one statement when the turn has one line, else one transaction. Every commit of the turn
 *   resolves after that write committed. The disk
 *   holds sums, not a row per request: a row per request (with its random key) cost more than the
 *   rest of the chain, and the sums are all a balance needs. Per-request history is the usage log's.
 * - `release` / `refundPart` of a pending reservation only touch memory; of a committed one they also
 *   subtract from the on-disk sum, the same way.
 * - A reservation stays in memory, whatever its state, until `close` (the meter's done phase), so a
 *   committed charge can still be refunded while its request runs. Settled reservations nobody
 *   closed are dropped after the retention by the sweep.
 *
 * Memory is always adjusted at call time, never inside a batched step (the batcher may run a step
 * twice), so memory and disk stay consistent: disk `used` + pending (+ queued sums) = memory `used`.
 * A period loaded from disk first drains the write queue, so it sees every queued sum.
 *
 * This is single-process by construction: the store holds the database with an exclusive lock, so
 * no other writer can move `used` behind the cache's back. The shared engine (shared/credits.ts)
 * keeps the reservations in PostgreSQL, next to the balance, with the same check-and-add.
 *
 * A reservation carries its period, so late commits and refunds touch that period's balance
 * whatever the clock says. Balances of periods nobody used since the last sweep tick are dropped
 * from memory and reloaded on demand. Databases written by versions before 2026-11 also hold one row
 * per reservation (`credit_reservations`); those rows are still read, released and swept.
 */
import type Database from 'better-sqlite3'
import type { WriteBatcher } from './sqlite-batch.ts'
import { toBalance } from './credit-balance.ts'
import { SqliteCreditMoves } from './sqlite-credit-moves.ts'
import { CreditDisk, type ReservationRecord } from './sqlite-credit-disk.ts'
import { TurnSums, uncharge, type HeldReservation, type PeriodBalance } from './sqlite-credit-memory.ts'
import { ledgerEntries } from './sqlite-credit-listing.ts'
import type { CreditBalance, CreditCarried, CreditCarry, CreditGrant, CreditLedger, CreditReservation } from './types.ts'

export { CREDITS_SCHEMA, type ReservationRecord, type ReservationState } from './sqlite-credit-disk.ts'

const done = Promise.resolve()

/**
 * The credit operations of {@link SqliteStore}.
 *
 * @example
 * ```ts
 * const ledger = new SqliteCreditLedger(db, writes)
 * const { ok } = ledger.reserve({ id: 'r1', projectId: 'demo', period: '2026-11', allocation: 100, amount: 1, apiType: 'MIRROR' }, Date.now())
 * if (ok) await ledger.commit('r1') // on disk once resolved
 * ledger.close('r1')                // the request is over
 * ```
 */
export class SqliteCreditLedger {
  private readonly disk: CreditDisk
  private readonly balances = new Map<string, Map<string, PeriodBalance>>()
  private readonly held = new Map<string, HeldReservation>()
  private turn: TurnSums | undefined
  private sweepCursor = ''
  private readonly moves: SqliteCreditMoves

  constructor(
    db: Database.Database,
    private readonly writes: WriteBatcher,
  ) {
    this.disk = new CreditDisk(db)
    this.moves = new SqliteCreditMoves(this.disk, writes, {
      periodBalance: (projectId, period) => this.periodBalance(projectId, period),
      cached: (projectId, period) => this.balances.get(projectId)?.get(period),
      balance: (projectId, period, allocation) => this.balance(projectId, period, allocation),
    })
  }

  /** Check-and-reserve in memory. Bad input and an id already held throw. */
  reserve(reservation: CreditReservation, now: number): { ok: boolean; balance: CreditBalance } {
    const balance = this.hold(reservation, now)
    const { projectId, period, allocation } = reservation
    const sums = balance ?? this.periodBalance(projectId, period)
    return { ok: balance !== undefined, balance: toBalance(projectId, period, allocation, sums.used, sums.granted) }
  }

  /**
   * {@link reserve} for the in-process meter (`ImmediateStore.reserveCredits`): an accepted
   * reservation answers with the credits left after it, a number, and only a refusal builds the
   * period's balance. `reserve`'s `{ ok, balance }` and its `CreditBalance` were two objects per
   * metered request for one figure the meter reads.
   */
  reserveRemaining(reservation: CreditReservation, now: number): number | CreditBalance {
    const balance = this.hold(reservation, now)
    // Held: used is at most allocation + granted, so this is toBalance's remaining without the clamp.
    if (balance !== undefined) return reservation.allocation + balance.granted - balance.used
    const { projectId, period, allocation } = reservation
    const refused = this.periodBalance(projectId, period)
    return toBalance(projectId, period, allocation, refused.used, refused.granted)
  }

  /** Holds the reservation if the period's balance covers it: that balance, or undefined when it does not. */
  private hold(reservation: CreditReservation, now: number): PeriodBalance | undefined {
    const { id, projectId, period, allocation, amount, apiType } = reservation
    if (typeof id !== 'string' || id === '') throw new TypeError('reservation id must be a non-empty string')
    checkAmount('amount', amount)
    if (!Number.isFinite(allocation)) throw new RangeError(`allocation must be a finite number, got ${allocation}`)
    if (this.held.has(id)) throw Object.assign(new Error(`reservation id ${id} is already in use`), { code: 'reservation_exists' })
    const balance = this.periodBalance(projectId, period)
    balance.touched = true
    const used = balance.used + amount
    if (used > allocation + balance.granted) return undefined
    balance.used = used
    balance.held++
    this.held.set(id, { id, projectId, period, apiType, amount, createdAt: now, charged: amount, state: 'pending', balance })
    return balance
  }

  /** Adds the charge to the on-disk sum; resolves after its COMMIT. Unknown, released or repeated: no-op. */
  commit(id: string): Promise<void> {
    const held = this.held.get(id)
    if (held === undefined) return done
    if (held.state !== 'pending') return held.written ?? done
    held.state = 'committed'
    const turn = this.currentTurn()
    if (held.charged > 0) turn.add(held, held.charged)
    // The estimate beside the actual (ledger `reserved`): only when part went back before the commit.
    if (held.amount > held.charged) turn.addReleased(held, held.amount - held.charged)
    turn.commits.push(held)
    held.written = turn.written
    return turn.written
  }

  /** Gives back what the reservation still charges; on disk too once committed. Idempotent. */
  release(id: string): Promise<void> {
    const held = this.held.get(id)
    if (held === undefined) return this.releaseOnDisk(id)
    if (held.state === 'released') return held.written ?? done
    const wasCommitted = held.state === 'committed'
    const refund = held.charged
    uncharge(held.balance, refund)
    held.charged = 0
    held.state = 'released'
    if (!wasCommitted || refund === 0) return held.written ?? done
    return this.subtractOnDisk(held, refund)
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
    return this.subtractOnDisk(held, refund)
  }

  /**
   * Ends a reservation: a pending one is released, a settled one can no longer be refunded. Frees
   * what the ledger holds for it. Resolves when its last disk write has.
   */
  close(id: string): Promise<void> {
    const held = this.held.get(id)
    if (held === undefined) return done
    const written = held.state === 'pending' ? this.release(id) : (held.written ?? done)
    this.forget(held)
    return written
  }

  /** Committed + pending of a period; read from disk (without caching) when it is not in memory. */
  balance(projectId: string, period: string, allocation: number): CreditBalance {
    const cached = this.balances.get(projectId)?.get(period)
    if (cached !== undefined) return toBalance(projectId, period, allocation, cached.used, cached.granted)
    this.writes.drain()
    return toBalance(projectId, period, allocation, this.disk.used(projectId, period), this.disk.granted(projectId, period))
  }

  /** Grants credits once per id (sqlite-credit-moves.ts). */
  grant(grant: CreditGrant, now: number): Promise<{ created: boolean; balance: CreditBalance }> {
    return this.moves.grant(grant, now)
  }

  /** Moves a period's unspent granted credits into another, once per id (sqlite-credit-moves.ts). */
  carry(carry: CreditCarry, now: number): Promise<CreditCarried> {
    return this.moves.carry(carry, now)
  }

  /** The entries of a period (sqlite-credit-listing.ts), with the pending reservations held in memory. */
  ledger(projectId: string, period: string, allocation: number): CreditLedger {
    this.writes.drain()
    let pending = 0
    for (const held of this.held.values()) {
      if (held.state === 'pending' && held.projectId === projectId && held.period === period) pending += held.charged
    }
    return { balance: this.balance(projectId, period, allocation), entries: ledgerEntries(this.disk, projectId, period, allocation, pending) }
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

  /** A reservation held in memory, else a row of an older version from disk. */
  get(id: string): ReservationRecord | undefined {
    const held = this.held.get(id)
    if (held !== undefined) {
      const { projectId, period, apiType, amount, charged, state, createdAt } = held
      return { id, projectId, period, apiType, amount, charged, state, createdAt }
    }
    this.writes.drain()
    return this.disk.get(id)
  }

  /**
   * Drops settled reservations created before `cutoff` that nobody closed; deletes settled rows of
   * older versions created before `cutoff`, examining at most `maxRows` rows from where the previous
   * call stopped; drops period balances idle since the previous call. Pending reservations stay.
   */
  sweep(cutoff: number, maxRows: number): { deleted: number; wrapped: boolean } {
    for (const held of this.held.values()) {
      if (held.createdAt < cutoff && held.state !== 'pending') this.forget(held)
    }
    this.evictIdleBalances()
    this.writes.drain()
    const { cursor, deleted } = this.disk.sweepTx(this.sweepCursor, maxRows, cutoff)
    this.sweepCursor = cursor
    return { deleted, wrapped: cursor === '' }
  }

  /** The sums of this turn, with their write step queued on first use. */
  private currentTurn(): TurnSums {
    const open = this.turn
    if (open !== undefined) return open
    const turn = new TurnSums()
    this.turn = turn
    turn.written = this.writes.enqueue(() => {
      // Runs in the batch (maybe twice, after a rollback): from now on charges go to the next turn.
      if (this.turn === turn) this.turn = undefined
      // Each line's upsert also moves its period's `used` (a trigger: sqlite-credit-disk.ts).
      for (const [balance, lines] of turn.lines) {
        for (const [line, delta] of lines) {
          if (delta === 0) continue
          const cut = line.lastIndexOf('\n')
          this.disk.addCharge(balance.projectId, balance.period, line.slice(0, cut), Number(line.slice(cut + 1)), delta)
        }
      }
      for (const [balance, lines] of turn.released) {
        for (const [line, amount] of lines) {
          const cut = line.lastIndexOf('\n')
          this.disk.addReleased(balance.projectId, balance.period, line.slice(0, cut), Number(line.slice(cut + 1)), amount)
        }
      }
      // One line (one project, period, API type and hour: nearly every turn) is one statement, which
      // commits alone without BEGIN/COMMIT when nothing else is queued in the batch.
    }, () => turn.statements() <= 1).then(undefined, (error: unknown) => {
      // Not on disk: those commits are pending again in memory, so a release gives them back.
      for (const held of turn.commits) {
        if (held.state === 'committed' && held.written === turn.written) {
          held.state = 'pending'
          held.written = undefined
        }
      }
      throw error
    })
    // Every reservation's last write is its turn's: `Store.immediate.closeCredits` drops that promise
    // unawaited. Handled once here (its committers still see a failure), it can never become an
    // unhandled rejection that ends the process.
    turn.written.catch(() => {})
    return turn
  }

  private subtractOnDisk(held: HeldReservation, amount: number): Promise<void> {
    const turn = this.currentTurn()
    turn.add(held, -amount)
    held.written = turn.written
    return turn.written
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
      balance = { projectId, period, used: this.disk.used(projectId, period), granted: this.disk.granted(projectId, period), held: 0, touched: true }
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

function checkAmount(name: string, value: number): void {
  if (!(value >= 0) || !Number.isFinite(value)) throw new RangeError(`${name} must be a non-negative number, got ${value}`)
}
