/**
 * Credit ledger of the SQLite engine: one balance row per (project, period) and one row per reservation.
 *
 * The balance row holds `used` only: the allocation comes from config on every call, so a reload that
 * changes a project's allocation takes effect at once. The check-and-reserve is a single upsert whose
 * WHERE clause refuses the charge when it would pass the allocation. Writes go through the store's
 * {@link WriteBatcher}: each runs synchronously, in queue order, inside its batch's transaction, so no
 * other operation can interleave between a check and its write, and its promise settles once the
 * batch has committed. Reads drain the queue first, so they see every write issued before them.
 *
 * A reservation row carries the period it was charged to, so commit, release and refundPart always
 * touch that period's balance, whatever the clock says when they run.
 *
 * Settled reservation rows are only needed while a request may still refund them, so a background
 * sweep deletes those older than the retention. The table is keyed by id alone (one B-tree to write
 * per request); the sweep walks it in key order in small chunks, so deletes hit contiguous pages.
 */
import type Database from 'better-sqlite3'
import type { WriteBatcher } from './sqlite-batch.ts'
import type { CreditBalance, CreditReservation } from './types.ts'

export type ReservationState = 'pending' | 'committed' | 'released'

/** A reservation as stored. `charged` is what still counts toward the balance. */
export interface ReservationRecord {
  id: string
  projectId: string
  period: string
  apiType: string
  amount: number
  charged: number
  state: ReservationState
  createdAt: number
}

export const CREDITS_SCHEMA = `
CREATE TABLE IF NOT EXISTS credit_balances (
  project_id TEXT NOT NULL,
  period TEXT NOT NULL,
  used NUMERIC NOT NULL,
  PRIMARY KEY (project_id, period)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS credit_reservations (
  id TEXT NOT NULL PRIMARY KEY,
  project_id TEXT NOT NULL,
  period TEXT NOT NULL,
  api_type TEXT NOT NULL,
  amount NUMERIC NOT NULL,
  charged NUMERIC NOT NULL,
  state TEXT NOT NULL,
  created_at INTEGER NOT NULL
) WITHOUT ROWID;
`

interface ReservationRow {
  id: string
  project_id: string
  period: string
  api_type: string
  amount: number
  charged: number
  state: ReservationState
  created_at: number
}

type ChargeParams = Pick<CreditReservation, 'projectId' | 'period' | 'amount' | 'allocation'>

export class SqliteCreditLedger {
  // The write steps below run inside a batch transaction (see WriteBatcher): none opens its own.
  private readonly reserveStep: (reservation: CreditReservation, now: number) => { ok: boolean; used: number }
  private readonly releaseStep: (id: string) => void
  private readonly refundStep: (id: string, amount: number) => void
  private readonly recoverTx: () => number
  private readonly sweepTx: (cursor: string, maxRows: number, cutoff: number) => { cursor: string; deleted: number }
  private readonly commitStmt: Database.Statement
  private readonly usedStmt: Database.Statement
  private readonly getStmt: Database.Statement
  private sweepCursor = ''

  constructor(
    db: Database.Database,
    private readonly writes: WriteBatcher,
  ) {
    db.exec(CREDITS_SCHEMA)
    // The new row is inserted only when the amount fits a fresh allocation; an existing row is
    // updated only when used + amount still fits. No row returned = refused.
    const chargeStmt = db.prepare(`
      INSERT INTO credit_balances (project_id, period, used)
      SELECT @projectId, @period, @amount WHERE @amount <= @allocation
      ON CONFLICT (project_id, period) DO UPDATE SET used = used + excluded.used
        WHERE used + excluded.used <= @allocation
      RETURNING used`).pluck()
    const insertStmt = db.prepare(`
      INSERT INTO credit_reservations (id, project_id, period, api_type, amount, charged, state, created_at)
      VALUES (?, ?, ?, ?, ?, ?, 'pending', ?)`)
    this.usedStmt = db.prepare('SELECT used FROM credit_balances WHERE project_id = ? AND period = ?').pluck()
    this.commitStmt = db.prepare(`UPDATE credit_reservations SET state = 'committed' WHERE id = ? AND state = 'pending'`)
    this.getStmt = db.prepare('SELECT * FROM credit_reservations WHERE id = ?')
    const unchargeStmt = db.prepare(
      'UPDATE credit_balances SET used = max(0, used - @amount) WHERE project_id = @projectId AND period = @period',
    )
    const releaseStmt = db.prepare(`UPDATE credit_reservations SET state = 'released', charged = 0 WHERE id = ?`)
    const reduceStmt = db.prepare('UPDATE credit_reservations SET charged = charged - @amount WHERE id = @id')
    const pendingSumsStmt = db.prepare(`
      SELECT project_id AS projectId, period, sum(charged) AS amount, count(*) AS n
      FROM credit_reservations WHERE state = 'pending' GROUP BY project_id, period`)
    const releasePendingStmt = db.prepare(`UPDATE credit_reservations SET state = 'released', charged = 0 WHERE state = 'pending'`)
    const chunkEndStmt = db.prepare(`
      SELECT max(id) AS lastId, count(*) AS n FROM
        (SELECT id FROM credit_reservations WHERE id > @cursor ORDER BY id LIMIT @maxRows)`)
    const sweepStmt = db.prepare(`
      DELETE FROM credit_reservations
      WHERE id > @cursor AND id <= @lastId AND state <> 'pending' AND created_at < @cutoff`)

    this.reserveStep = (reservation, now) => {
      const { id, projectId, period, apiType, amount, allocation } = reservation
      const charge: ChargeParams = { projectId, period, amount, allocation }
      const used = chargeStmt.get(charge) as number | undefined
      if (used === undefined) return { ok: false, used: (this.usedStmt.get(projectId, period) as number | undefined) ?? 0 }
      // A duplicate id throws here; the batch rolls the charge back with it and rejects this reserve only.
      insertStmt.run(id, projectId, period, apiType, amount, amount, now)
      return { ok: true, used }
    }
    this.releaseStep = (id) => {
      const row = this.getStmt.get(id) as ReservationRow | undefined
      if (row === undefined || row.state === 'released') return
      unchargeStmt.run({ projectId: row.project_id, period: row.period, amount: row.charged })
      releaseStmt.run(id)
    }
    this.refundStep = (id, amount) => {
      const row = this.getStmt.get(id) as ReservationRow | undefined
      if (row === undefined || row.state === 'released') return
      const refund = Math.min(amount, row.charged)
      if (refund <= 0) return
      unchargeStmt.run({ projectId: row.project_id, period: row.period, amount: refund })
      reduceStmt.run({ id, amount: refund })
    }
    this.recoverTx = db.transaction(() => {
      let released = 0
      for (const group of pendingSumsStmt.all() as { projectId: string; period: string; amount: number; n: number }[]) {
        unchargeStmt.run(group)
        released += group.n
      }
      releasePendingStmt.run()
      return released
    })
    this.sweepTx = db.transaction((cursor: string, maxRows: number, cutoff: number) => {
      const chunk = chunkEndStmt.get({ cursor, maxRows }) as { lastId: string | null; n: number }
      if (chunk.lastId === null) return { cursor: '', deleted: 0 }
      const { changes } = sweepStmt.run({ cursor, lastId: chunk.lastId, cutoff })
      // A short chunk reached the end of the table: the next sweep starts over from the first key.
      return { cursor: chunk.n < maxRows ? '' : chunk.lastId, deleted: changes }
    })
  }

  /** Queues the check-and-reserve; bad input throws at once, before anything is queued. */
  reserve(reservation: CreditReservation, now: number): Promise<{ ok: boolean; balance: CreditBalance }> {
    if (typeof reservation.id !== 'string' || reservation.id === '') throw new TypeError('reservation id must be a non-empty string')
    checkAmount('amount', reservation.amount)
    if (!Number.isFinite(reservation.allocation)) throw new RangeError(`allocation must be a finite number, got ${reservation.allocation}`)
    // A copy: the caller may reuse its object before the batch runs.
    const queued = { ...reservation }
    return this.writes.enqueue(() => {
      const { ok, used } = this.reserveStep(queued, now)
      return { ok, balance: toBalance(queued.projectId, queued.period, queued.allocation, used) }
    })
  }

  commit(id: string): Promise<void> {
    return this.writes.enqueue(() => {
      this.commitStmt.run(id)
    }, true)
  }

  release(id: string): Promise<void> {
    return this.writes.enqueue(() => this.releaseStep(id))
  }

  refundPart(id: string, amount: number): Promise<void> {
    checkAmount('amount', amount)
    if (amount === 0) return Promise.resolve()
    return this.writes.enqueue(() => this.refundStep(id, amount))
  }

  balance(projectId: string, period: string, allocation: number): CreditBalance {
    this.writes.drain()
    const used = (this.usedStmt.get(projectId, period) as number | undefined) ?? 0
    return toBalance(projectId, period, allocation, used)
  }

  recoverPending(): number {
    this.writes.drain()
    return this.recoverTx()
  }

  get(id: string): ReservationRecord | undefined {
    this.writes.drain()
    const row = this.getStmt.get(id) as ReservationRow | undefined
    if (row === undefined) return undefined
    return {
      id: row.id,
      projectId: row.project_id,
      period: row.period,
      apiType: row.api_type,
      amount: row.amount,
      charged: row.charged,
      state: row.state,
      createdAt: row.created_at,
    }
  }

  /**
   * Deletes settled reservations created before `cutoff`, examining at most `maxRows` rows from where
   * the previous call stopped. Returns how many rows were deleted and whether the walk wrapped around.
   */
  sweep(cutoff: number, maxRows: number): { deleted: number; wrapped: boolean } {
    this.writes.drain()
    const { cursor, deleted } = this.sweepTx(this.sweepCursor, maxRows, cutoff)
    this.sweepCursor = cursor
    return { deleted, wrapped: cursor === '' }
  }
}

function toBalance(projectId: string, period: string, allocation: number, used: number): CreditBalance {
  return { projectId, period, allocation, used, remaining: Math.max(0, allocation - used) }
}

function checkAmount(name: string, value: number): void {
  if (!(value >= 0) || !Number.isFinite(value)) throw new RangeError(`${name} must be a non-negative number, got ${value}`)
}
