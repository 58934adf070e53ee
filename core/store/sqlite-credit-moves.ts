/**
 * Credits an operator moves in the SQLite engine, once per id: grants (credits added to a period)
 * and carries (a period's unspent granted credits moved into another on a schedule change). Part of
 * {@link SqliteCreditLedger} (sqlite-credits.ts), which owns the balances in memory; this module
 * decides whether an id is new (this process is the only writer), moves the memory balances at once,
 * and writes the row in the turn's group commit, undoing the memory move if that write fails.
 */
import type { WriteBatcher } from './sqlite-batch.ts'
import { carryAmount, checkCarry, checkGrant } from './credit-balance.ts'
import type { CreditDisk } from './sqlite-credit-disk.ts'
import type { PeriodBalance } from './sqlite-credit-memory.ts'
import type { CreditBalance, CreditCarried, CreditCarry, CreditGrant } from './types.ts'

/** What the moves read and change of the ledger's balances in memory. */
export interface LedgerBalances {
  /** The in-memory balance of a period, loaded from disk (after the queued writes) on first use. */
  periodBalance(projectId: string, period: string): PeriodBalance
  /** The in-memory balance of a period if it is loaded, without loading it. */
  cached(projectId: string, period: string): PeriodBalance | undefined
  /** Committed + pending of a period, as answered to callers. */
  balance(projectId: string, period: string, allocation: number): CreditBalance
}

/**
 * @example
 * ```ts
 * const moves = new SqliteCreditMoves(disk, writes, balances)
 * await moves.grant({ id: 'g1', projectId: 'demo', period: '2026-11', allocation: 100, amount: 50, reason: 'promo', actor: 'admin' }, Date.now())
 * ```
 */
export class SqliteCreditMoves {
  /** Grants queued and not yet committed, by id: a second grant of the same id waits for the first. */
  private readonly grantsInFlight = new Map<string, Promise<unknown>>()
  /** Carries queued and not yet committed, by id. */
  private readonly carriesInFlight = new Map<string, Promise<unknown>>()

  constructor(
    private readonly disk: CreditDisk,
    private readonly writes: WriteBatcher,
    private readonly balances: LedgerBalances,
  ) {}

  /**
   * Grants credits once per id. Whether the id is new is decided here, synchronously, against the
   * disk (after the queued writes) and the grants still queued: this process is the only writer.
   * The period's memory balance moves at once (so a reservation right after sees it) and the row
   * is written in the turn's group commit; the promise resolves after that COMMIT. A failed write
   * takes the credits back out of memory.
   */
  grant(grant: CreditGrant, now: number): Promise<{ created: boolean; balance: CreditBalance }> {
    checkGrant(grant)
    const { id, projectId, period, allocation, amount, reason, actor } = grant
    const inFlight = this.grantsInFlight.get(id)
    if (inFlight !== undefined) return inFlight.then(() => this.existingGrant(id, allocation))
    this.writes.drain()
    if (this.disk.getGrant(id) !== undefined) return Promise.resolve(this.existingGrant(id, allocation))
    const cached = this.balances.cached(projectId, period)
    if (cached !== undefined) cached.granted += amount
    const written = this.writes.enqueue(() => this.disk.insertGrant({ id, projectId, period, amount, reason, actor, createdAt: now }), true)
    this.grantsInFlight.set(id, written)
    return written.then(
      () => {
        this.grantsInFlight.delete(id)
        return { created: true, balance: this.balances.balance(projectId, period, allocation) }
      },
      (error: unknown) => {
        this.grantsInFlight.delete(id)
        if (cached !== undefined && this.balances.cached(projectId, period) === cached) cached.granted -= amount
        throw error
      },
    )
  }

  /**
   * Moves a period's unspent granted credits into another (a schedule change), once per id. Decided
   * here, synchronously, against both periods' memory balances (pending reservations included), so
   * no reservation can slip between the computation and the move; the row is written in the turn's
   * group commit and the promise resolves after that COMMIT. A failed write moves the credits back.
   */
  carry(carry: CreditCarry, now: number): Promise<CreditCarried> {
    checkCarry(carry)
    const { id, projectId, from, to, fromAllocation, actor } = carry
    const inFlight = this.carriesInFlight.get(id)
    if (inFlight !== undefined) return inFlight.then(() => this.existingCarry(carry))
    this.writes.drain()
    if (this.disk.getCarry(id) !== undefined) return Promise.resolve(this.existingCarry(carry))
    const source = this.balances.periodBalance(projectId, from)
    const target = this.balances.periodBalance(projectId, to)
    source.touched = target.touched = true
    const amount = carryAmount(fromAllocation, source.granted, source.used)
    source.granted -= amount
    target.granted += amount
    const written = this.writes.enqueue(() => this.disk.insertCarry({ id, projectId, from, to, amount, actor, createdAt: now }), true)
    this.carriesInFlight.set(id, written)
    return written.then(
      () => {
        this.carriesInFlight.delete(id)
        return { created: true, amount, ...this.carryBalances(carry) }
      },
      (error: unknown) => {
        this.carriesInFlight.delete(id)
        if (this.balances.cached(projectId, from) === source) source.granted += amount
        if (this.balances.cached(projectId, to) === target) target.granted -= amount
        throw error
      },
    )
  }

  private existingCarry(carry: CreditCarry): CreditCarried {
    this.writes.drain()
    const stored = this.disk.getCarry(carry.id)
    if (stored === undefined) throw new Error(`credit carry ${carry.id} was not written`)
    return { created: false, amount: stored.amount, ...this.carryBalances({ ...carry, projectId: stored.projectId, from: stored.from, to: stored.to }) }
  }

  private carryBalances({ projectId, from, fromAllocation, to, toAllocation }: CreditCarry): { from: CreditBalance; to: CreditBalance } {
    return { from: this.balances.balance(projectId, from, fromAllocation), to: this.balances.balance(projectId, to, toAllocation) }
  }

  /** The balance of the period an existing grant went to. */
  private existingGrant(id: string, allocation: number): { created: boolean; balance: CreditBalance } {
    this.writes.drain()
    const stored = this.disk.getGrant(id)
    if (stored === undefined) throw new Error(`credit grant ${id} was not written`)
    return { created: false, balance: this.balances.balance(stored.projectId, stored.period, allocation) }
  }
}
