/**
 * Carries of the shared engine: a changed refill schedule moves a period's unspent granted credits
 * into the period the new schedule is in (core/store/types.ts `CreditCarry`, core/store/README.md).
 *
 * A carry is one transaction of its own, not a `tollgate_apply` op (so no core migration): it locks
 * both balance rows in key order (`ORDER BY period ... FOR UPDATE`), reads `used + pending` and
 * `granted` of the old period under that lock, so no reservation of any instance can slip between
 * the computation and the move, inserts the carry row (primary key = id: once per id, also across
 * instances) and moves `granted` on both rows. A period's `granted` is then its grants plus carries
 * in minus carries out, and its ledger lists each carry as an entry of its own. A deadlock with a
 * batch that locked the same rows in the other order is retried.
 *
 * Its table is a migration module of its own (`credit-carries`), so its versions never collide with
 * the core module's.
 */
import type pg from 'pg'
import { carryAmount, checkCarry } from '../credit-balance.ts'
import type { CreditCarry, CreditLedgerEntry } from '../types.ts'
import type { MigrationSet } from './migrations.ts'
import { pgFailure } from './pg.ts'
import { RETRY_DELAYS_MS } from './credit-leases.ts'
import { unfoldedAfterMark } from './draw-fold-mark-migration.ts'

export const carryMigrations: MigrationSet = {
  module: 'credit-carries',
  migrations: [
    {
      version: 1,
      name: 'credit carries: unspent grants moved by a schedule change',
      sql: `
CREATE TABLE credit_carries (
  id text PRIMARY KEY,
  project_id text NOT NULL,
  from_period text NOT NULL,
  to_period text NOT NULL,
  amount numeric NOT NULL CHECK (amount >= 0),
  actor text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX credit_carries_from ON credit_carries (project_id, from_period);
CREATE INDEX credit_carries_to ON credit_carries (project_id, to_period);
`,
    },
  ],
}

/** Deadlock and serialization failures: the carry's transaction is tried again. */
const RETRIED = new Set(['40P01', '40001'])
const MOST_ATTEMPTS = 5

/**
 * Moves the unspent granted credits of `carry.from` into `carry.to`, once per id. Returns whether
 * this call moved them and how much was moved (the stored amount when the id was carried before).
 */
export async function carryInPostgres(pool: pg.Pool, carry: CreditCarry): Promise<{ created: boolean; amount: number }> {
  checkCarry(carry)
  const { id, projectId, from, to, fromAllocation, actor } = carry
  for (let attempt = 1; ; attempt++) {
    let client: pg.PoolClient | undefined
    try {
      client = await pool.connect()
      await client.query('BEGIN')
      const [first, second] = from < to ? [from, to] : [to, from]
      await client.query(
        'INSERT INTO credit_balances (project_id, period, used, pending) VALUES ($1, $2, 0, 0), ($1, $3, 0, 0) ON CONFLICT (project_id, period) DO NOTHING',
        [projectId, first, second],
      )
      const { rows } = await client.query<{ period: string; used: string; granted: string }>(
        'SELECT period, used + pending AS used, granted FROM credit_balances WHERE project_id = $1 AND period IN ($2, $3) ORDER BY period FOR UPDATE',
        [projectId, from, to],
      )
      const stored = await client.query<{ amount: string }>('SELECT amount FROM credit_carries WHERE id = $1', [id])
      if (stored.rows[0] !== undefined) {
        await client.query('COMMIT')
        return { created: false, amount: Number(stored.rows[0].amount) }
      }
      const source = rows.find((row) => row.period === from)!
      const amount = carryAmount(fromAllocation, Number(source.granted), Number(source.used))
      await client.query(
        'INSERT INTO credit_carries (id, project_id, from_period, to_period, amount, actor) VALUES ($1, $2, $3, $4, $5, $6)',
        [id, projectId, from, to, amount, actor],
      )
      if (amount > 0) {
        await client.query(
          `UPDATE credit_balances SET granted = granted + CASE WHEN period = $2 THEN -$4::numeric ELSE $4::numeric END
           WHERE project_id = $1 AND period IN ($2, $3)`,
          [projectId, from, to, amount],
        )
      }
      await client.query('COMMIT')
      return { created: true, amount }
    } catch (error) {
      await client?.query('ROLLBACK').catch(() => {})
      const code = (error as { code?: string }).code
      if (code !== undefined && RETRIED.has(code) && attempt < MOST_ATTEMPTS) continue
      throw pgFailure(error)
    } finally {
      client?.release()
    }
  }
}

/**
 * Marks the other instances' leases of a period recalled and waits (about 0.6 s at most) until they
 * gave back their unheld credits, so a carry finds none parked there. The mark is a row of
 * `credit_recalls` (core migration 6): it waits for no lease row, which in-flight draws share-lock.
 * A lease's unheld credits are its `charged` less its draws not yet folded (read past its fold mark,
 * migration 7); its owner's next draw
 * sees the mark and gives them back (the shrink deletes the mark).
 */
export async function recallLeases(pool: pg.Pool, projectId: string, period: string, instanceId: string): Promise<void> {
  const others = `FROM credit_holds l WHERE l.project_id = $1 AND l.period = $2 AND l.state = 'pending' AND l.api_type = 'lease' AND l.owner <> $3
    AND l.charged - ${unfoldedAfterMark('l')} > 0`
  try {
    await pool.query(`INSERT INTO credit_recalls (lease_id) SELECT l.id ${others} ORDER BY l.id ON CONFLICT (lease_id) DO NOTHING`, [projectId, period, instanceId])
    for (const delay of [...RETRY_DELAYS_MS, 0]) {
      const { rows } = await pool.query<{ n: number }>(`SELECT count(*) AS n ${others} AND EXISTS (SELECT 1 FROM credit_recalls r WHERE r.lease_id = l.id)`, [projectId, period, instanceId])
      if (Number(rows[0]?.n ?? 0) === 0 || delay === 0) return
      await new Promise((resolve) => setTimeout(resolve, delay))
    }
  } catch (error) {
    throw pgFailure(error)
  }
}

/** The SQL of a period's carries (in and out) for the ledger listing; `$1` project, `$2` period. */
export const CARRIES_SQL = `SELECT id, from_period, to_period, amount, actor, created_at AS at FROM credit_carries
  WHERE project_id = $1 AND (from_period = $2 OR to_period = $2) AND amount <> 0 ORDER BY created_at, id`

/** A carry row as a ledger entry of `period`: positive where it went, negative where it came from. */
export function carryEntry(period: string, row: { id: string; from_period: string; to_period: string; amount: number | string; actor: string; at: Date }): CreditLedgerEntry {
  const amount = Number(row.amount)
  return { kind: 'carry', id: row.id, from: row.from_period, to: row.to_period, actor: row.actor, at: row.at.toISOString(), amount: row.to_period === period ? amount : -amount }
}
