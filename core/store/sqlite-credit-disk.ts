/**
 * The on-disk half of the SQLite credit ledger: one balance row per (project, period) whose `used`
 * is the sum of COMMITTED charges (minus their refunds): moved with each charge line by the line's
 * TEMP triggers ({@link CreditDisk.addCharge}), and by {@link CreditDisk.addUsed} for the refunds of
 * older versions' reservation rows.
 *
 * Reservations are not written here (see sqlite-credits.ts). The `credit_reservations` table holds
 * rows of databases written by older versions: committed ones (kept for late refunds until the sweep
 * deletes them) and, before 2026-05, pending ones, which still count in `used` until
 * {@link CreditDisk.recoverTx} releases them.
 *
 * The write steps run inside a WriteBatcher transaction and never open one of their own; each is a
 * pure function of the database state and its arguments, so the batcher may run it again.
 */
import type Database from 'better-sqlite3'

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
-- Credits granted on top of the allocation (top-ups, x402 payments), one row per grant id.
CREATE TABLE IF NOT EXISTS credit_grants (
  id TEXT NOT NULL PRIMARY KEY,
  project_id TEXT NOT NULL,
  period TEXT NOT NULL,
  amount NUMERIC NOT NULL,
  reason TEXT NOT NULL,
  actor TEXT NOT NULL,
  created_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS credit_grants_by_period ON credit_grants (project_id, period, created_at);
-- Unspent granted credits a schedule change moved from one period to another (one row per carry id):
-- a period's granted is its grants plus what was carried in minus what was carried out.
CREATE TABLE IF NOT EXISTS credit_carries (
  id TEXT NOT NULL PRIMARY KEY,
  project_id TEXT NOT NULL,
  from_period TEXT NOT NULL,
  to_period TEXT NOT NULL,
  amount NUMERIC NOT NULL,
  actor TEXT NOT NULL,
  created_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS credit_carries_from ON credit_carries (project_id, from_period);
CREATE INDEX IF NOT EXISTS credit_carries_to ON credit_carries (project_id, to_period);
-- Committed charges per (period, API type, UTC hour of the reservation): the ledger's charge lines.
-- Moving a line moves credit_balances.used by the same delta (TEMP triggers, below), so their sum equals it.
CREATE TABLE IF NOT EXISTS credit_charges (
  project_id TEXT NOT NULL,
  period TEXT NOT NULL,
  api_type TEXT NOT NULL,
  hour_ms INTEGER NOT NULL,
  amount NUMERIC NOT NULL,
  PRIMARY KEY (project_id, period, hour_ms, api_type)
) WITHOUT ROWID;
-- Older versions committed by inserting a committed row; kept so that their databases keep the same schema.
CREATE TRIGGER IF NOT EXISTS credit_reservation_committed AFTER INSERT ON credit_reservations
WHEN NEW.state = 'committed' AND NEW.charged > 0
BEGIN
  INSERT INTO credit_balances (project_id, period, used) VALUES (NEW.project_id, NEW.period, NEW.charged)
  ON CONFLICT (project_id, period) DO UPDATE SET used = used + excluded.used;
END;
`

/** The triggers by which a charge line's amount moves its period's `used` (see the CreditDisk constructor). */
const CHARGE_MOVES_USED = `
CREATE TEMP TRIGGER IF NOT EXISTS credit_charge_inserted AFTER INSERT ON main.credit_charges
WHEN NEW.amount <> 0
BEGIN
  INSERT INTO credit_balances (project_id, period, used) VALUES (NEW.project_id, NEW.period, max(0, NEW.amount))
  ON CONFLICT (project_id, period) DO UPDATE SET used = max(0, used + NEW.amount);
END;
CREATE TEMP TRIGGER IF NOT EXISTS credit_charge_moved AFTER UPDATE OF amount ON main.credit_charges
WHEN NEW.amount <> OLD.amount
BEGIN
  INSERT INTO credit_balances (project_id, period, used) VALUES (NEW.project_id, NEW.period, max(0, NEW.amount - OLD.amount))
  ON CONFLICT (project_id, period) DO UPDATE SET used = max(0, used + NEW.amount - OLD.amount);
END;
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

/** A grant as stored. */
export interface GrantRecord {
  id: string
  projectId: string
  period: string
  amount: number
  reason: string
  actor: string
  createdAt: number
}

/** A carry as stored. */
export interface CarryRecord {
  id: string
  projectId: string
  from: string
  to: string
  amount: number
  actor: string
  createdAt: number
}

/** Per (project, period): what recovery released. */
export interface ReleasedGroup {
  projectId: string
  period: string
  amount: number
  n: number
}

/**
 * Prepared statements and write steps of the credit tables.
 *
 * @example
 * ```ts
 * const disk = new CreditDisk(db)
 * await writes.enqueue(() => disk.addUsed('demo', '2026-11', 5))
 * ```
 */
export class CreditDisk {
  private readonly addUsedStmt: Database.Statement
  private readonly usedStmt: Database.Statement
  private readonly getStmt: Database.Statement
  private readonly releaseStmt: Database.Statement
  private readonly reduceStmt: Database.Statement
  private readonly addChargeStmt: Database.Statement
  private readonly chargesStmt: Database.Statement
  private readonly addReleasedStmt: Database.Statement
  private readonly insertGrantStmt: Database.Statement
  private readonly grantStmt: Database.Statement
  private readonly grantsStmt: Database.Statement
  private readonly grantedStmt: Database.Statement
  private readonly insertCarryStmt: Database.Statement
  private readonly carryStmt: Database.Statement
  private readonly carriesStmt: Database.Statement
  readonly recoverTx: () => ReleasedGroup[]
  readonly sweepTx: (cursor: string, maxRows: number, cutoff: number) => { cursor: string; deleted: number }

  constructor(db: Database.Database) {
    db.exec(CREDITS_SCHEMA)
    // Added with two-phase metering: what a line's charges had reserved beyond what they were charged.
    const columns = db.prepare('SELECT name FROM pragma_table_info(?)').pluck().all('credit_charges') as string[]
    if (!columns.includes('released')) db.exec('ALTER TABLE credit_charges ADD COLUMN released NUMERIC NOT NULL DEFAULT 0')
    // A charge line moves its period's `used` itself, by what its amount moved, so a turn's charges
    // are one statement (one upsert per line) instead of a balance upsert beside each line's: the
    // group commit of a turn with one line then needs no BEGIN/COMMIT (sqlite-credits.ts). TEMP:
    // kept by this connection only, never in the file, so an older version opening the database
    // (which moves `used` itself) does not count its charges twice. Never below zero, as addUsed.
    db.exec(CHARGE_MOVES_USED)
    this.addUsedStmt = db.prepare(`
      INSERT INTO credit_balances (project_id, period, used) VALUES (?, ?, max(0, ?))
      ON CONFLICT (project_id, period) DO UPDATE SET used = max(0, used + ?)`)
    this.usedStmt = db.prepare('SELECT used FROM credit_balances WHERE project_id = ? AND period = ?').pluck()
    this.getStmt = db.prepare('SELECT * FROM credit_reservations WHERE id = ?')
    this.releaseStmt = db.prepare(`UPDATE credit_reservations SET state = 'released', charged = 0 WHERE id = ?`)
    this.reduceStmt = db.prepare('UPDATE credit_reservations SET charged = charged - @amount WHERE id = @id')
    this.addChargeStmt = db.prepare(`
      INSERT INTO credit_charges (project_id, period, api_type, hour_ms, amount) VALUES (?, ?, ?, ?, ?)
      ON CONFLICT (project_id, period, hour_ms, api_type) DO UPDATE SET amount = amount + excluded.amount`)
    this.chargesStmt = db.prepare(`
      SELECT api_type AS apiType, hour_ms AS hourMs, amount, released FROM credit_charges
      WHERE project_id = ? AND period = ? AND (amount <> 0 OR released <> 0) ORDER BY hour_ms, api_type`)
    this.addReleasedStmt = db.prepare(`
      INSERT INTO credit_charges (project_id, period, api_type, hour_ms, amount, released) VALUES (?, ?, ?, ?, 0, ?)
      ON CONFLICT (project_id, period, hour_ms, api_type) DO UPDATE SET released = released + excluded.released`)
    this.insertGrantStmt = db.prepare(`
      INSERT INTO credit_grants (id, project_id, period, amount, reason, actor, created_at)
      VALUES (@id, @projectId, @period, @amount, @reason, @actor, @createdAt) ON CONFLICT (id) DO NOTHING`)
    this.grantStmt = db.prepare(`
      SELECT id, project_id AS projectId, period, amount, reason, actor, created_at AS createdAt FROM credit_grants WHERE id = ?`)
    this.grantsStmt = db.prepare(`
      SELECT id, project_id AS projectId, period, amount, reason, actor, created_at AS createdAt FROM credit_grants
      WHERE project_id = ? AND period = ? ORDER BY created_at, id`)
    this.grantedStmt = db.prepare(`
      SELECT coalesce((SELECT sum(amount) FROM credit_grants WHERE project_id = @p AND period = @e), 0)
        + coalesce((SELECT sum(amount) FROM credit_carries WHERE project_id = @p AND to_period = @e), 0)
        - coalesce((SELECT sum(amount) FROM credit_carries WHERE project_id = @p AND from_period = @e), 0)`).pluck()
    const carryColumns = 'id, project_id AS projectId, from_period AS "from", to_period AS "to", amount, actor, created_at AS createdAt'
    this.insertCarryStmt = db.prepare(`
      INSERT INTO credit_carries (id, project_id, from_period, to_period, amount, actor, created_at)
      VALUES (@id, @projectId, @from, @to, @amount, @actor, @createdAt) ON CONFLICT (id) DO NOTHING`)
    this.carryStmt = db.prepare(`SELECT ${carryColumns} FROM credit_carries WHERE id = ?`)
    this.carriesStmt = db.prepare(`
      SELECT ${carryColumns} FROM credit_carries
      WHERE project_id = @p AND (from_period = @e OR to_period = @e) AND amount <> 0 ORDER BY created_at, id`)
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

    this.recoverTx = db.transaction(() => {
      const groups = pendingSumsStmt.all() as ReleasedGroup[]
      for (const group of groups) this.addUsed(group.projectId, group.period, -group.amount)
      releasePendingStmt.run()
      return groups
    })
    this.sweepTx = db.transaction((cursor: string, maxRows: number, cutoff: number) => {
      const chunk = chunkEndStmt.get({ cursor, maxRows }) as { lastId: string | null; n: number }
      if (chunk.lastId === null) return { cursor: '', deleted: 0 }
      const { changes } = sweepStmt.run({ cursor, lastId: chunk.lastId, cutoff })
      // A short chunk reached the end of the table: the next sweep starts over from the first key.
      return { cursor: chunk.n < maxRows ? '' : chunk.lastId, deleted: changes }
    })
  }

  /** Moves a period's committed `used` by `delta` (a charge, or a refund when negative), never below 0. */
  addUsed(projectId: string, period: string, delta: number): void {
    this.addUsedStmt.run(projectId, period, delta, delta)
  }

  /**
   * Moves the charge line of (period, API type, hour) by `delta`, and with it (a trigger) the
   * period's committed `used`: one statement. Not to be combined with {@link CreditDisk.addUsed} for
   * the same charge.
   */
  addCharge(projectId: string, period: string, apiType: string, hourMs: number, delta: number): void {
    this.addChargeStmt.run(projectId, period, apiType, hourMs, delta)
  }

  /** Moves what the line's charges released before their commit (the estimate beside the actual). */
  addReleased(projectId: string, period: string, apiType: string, hourMs: number, amount: number): void {
    this.addReleasedStmt.run(projectId, period, apiType, hourMs, amount)
  }

  /** The non-zero charge lines of a period, oldest hour first. */
  charges(projectId: string, period: string): { apiType: string; hourMs: number; amount: number; released: number }[] {
    return this.chargesStmt.all(projectId, period) as { apiType: string; hourMs: number; amount: number; released: number }[]
  }

  /** Inserts a grant unless its id exists; returns whether it did. A write step. */
  insertGrant(grant: GrantRecord): boolean {
    return this.insertGrantStmt.run(grant).changes === 1
  }

  getGrant(id: string): GrantRecord | undefined {
    return this.grantStmt.get(id) as GrantRecord | undefined
  }

  /** A period's grants, oldest first. */
  grants(projectId: string, period: string): GrantRecord[] {
    return this.grantsStmt.all(projectId, period) as GrantRecord[]
  }

  /** A period's granted credits as on disk: its grants, plus carries in, minus carries out. */
  granted(projectId: string, period: string): number {
    return this.grantedStmt.get({ p: projectId, e: period }) as number
  }

  /** Inserts a carry unless its id exists; returns whether it did. A write step. */
  insertCarry(carry: CarryRecord): boolean {
    return this.insertCarryStmt.run(carry).changes === 1
  }

  getCarry(id: string): CarryRecord | undefined {
    return this.carryStmt.get(id) as CarryRecord | undefined
  }

  /** The non-zero carries into or out of a period, oldest first. */
  carries(projectId: string, period: string): CarryRecord[] {
    return this.carriesStmt.all({ p: projectId, e: period }) as CarryRecord[]
  }

  /** Refunds what the reservation still charges and marks it released. */
  releaseStep(id: string): void {
    const row = this.getStmt.get(id) as ReservationRow | undefined
    if (row === undefined || row.state === 'released') return
    this.addUsed(row.project_id, row.period, -row.charged)
    this.releaseStmt.run(id)
  }

  /** Refunds up to `amount` of what the reservation still charges. */
  refundStep(id: string, amount: number): void {
    const row = this.getStmt.get(id) as ReservationRow | undefined
    if (row === undefined || row.state === 'released') return
    const refund = Math.min(amount, row.charged)
    if (refund <= 0) return
    this.addUsed(row.project_id, row.period, -refund)
    this.reduceStmt.run({ id, amount: refund })
  }

  /** Committed `used` of a period as on disk (0 when it has no row). */
  used(projectId: string, period: string): number {
    return (this.usedStmt.get(projectId, period) as number | undefined) ?? 0
  }

  get(id: string): ReservationRecord | undefined {
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
}
