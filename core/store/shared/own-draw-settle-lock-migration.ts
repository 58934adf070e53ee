/**
 * Migration 9 of the shared engine's core tables: A BATCH THAT SETTLES ITS OWN DRAW LOCKS THAT
 * DRAW'S BALANCE UP FRONT (issue 26, found in session 13).
 *
 * Step 2 of the lock order (lock-order-migration.ts) locks, before the first op, the balance row of
 * every period the batch touches. It finds the period of a `commit`, `release` or `refund` by reading
 * the ledger row the op names. When that row is a `draw` of the SAME batch, it does not exist yet at
 * the lookup (the draw inserts it later), so up to version 8 the op found its balance row unlocked
 * and locked it at first touch: after the balance rows of step 2 and the lease rows of step 3. Two
 * batches could then wait for each other (SQLSTATE 40P01), for instance one holding period `two`
 * and asking for `three` while the other, holding `three` up front, refunded a draw on `two`'s lease.
 * test/core/store/shared-lock-order.test.ts reproduces it against version 8 (a deadlock every time)
 * and checks this version; it is also the late lock the random stress of that test met about once in
 * four runs under CI's load, against the reaper or another batch.
 *
 * From this version the lookup also takes, for every `draw` of the batch whose id a `commit`,
 * `release` or `refund` of the batch names, the period of the draw's lease (a lease's project and
 * period never change). A batch of draws only still skips the lookup (version 8). No other op can
 * name a ledger row the same batch creates without naming its period: `reserve`, `lease` and `grant`
 * carry theirs.
 *
 * `tollgate_apply` is version 8's text (set-draws-migration.ts) with that lookup spliced in.
 */
import type { Migration } from './migrations.ts'
import { splice } from './append-draws-migration.ts'
import { NO_SEQSCAN } from './draw-fold-mark-migration.ts'
import { V8_APPLY } from './set-draws-migration.ts'

const SETTLED_HOLDS_V8 = `
    SELECT lh.project_id, lh.period FROM credit_holds lh
    WHERE lh.id = ANY (ARRAY(
      SELECT x.jo->>'i'
      FROM jsonb_array_elements(ops) AS x(jo) WHERE x.jo->>'o' IN ('commit', 'release', 'refund', 'shrink')))
  ) lk;`

const SETTLED_HOLDS_V9 = `
    SELECT lh.project_id, lh.period FROM credit_holds lh
    WHERE lh.id = ANY (ARRAY(
      SELECT x.jo->>'i'
      FROM jsonb_array_elements(ops) AS x(jo) WHERE x.jo->>'o' IN ('commit', 'release', 'refund', 'shrink')))
    UNION
    -- A draw of this batch that a later op settles: its ledger row is not there yet; its lease's is.
    SELECT dl.project_id, dl.period FROM credit_holds dl
    WHERE dl.id = ANY (ARRAY(
      SELECT d.jo->>'l' FROM jsonb_array_elements(ops) AS d(jo)
      WHERE d.jo->>'o' = 'draw' AND d.jo->>'i' IN (
        SELECT s.jo->>'i' FROM jsonb_array_elements(ops) AS s(jo) WHERE s.jo->>'o' IN ('commit', 'release', 'refund'))))
  ) lk;`

const LATE_LOCK = /^( +)(SELECT used, pending, granted INTO u, pe, g FROM credit_balances WHERE project_id = (\S+) AND period = (\S+) FOR UPDATE;|INSERT INTO credit_balances AS b \(project_id, period, used, pending, granted\) VALUES \(p, e, 0, 0, n\))$/gm

/**
 * Makes the lock order checkable: every place where an op would lock a balance row that step 2 did
 * not lock (the fallback of version 3, which the lookup above leaves unreached) says so at level
 * DEBUG1. A session that sets `client_min_messages = debug1` receives it as a notice (the stress of
 * shared-lock-order.test.ts counts them: there must be none); any other session pays one level test.
 */
function reportLateLocks(text: string): string {
  let found = 0
  const marked = text.replace(LATE_LOCK, (_line, indent: string, statement: string, project?: string, period?: string) => {
    found++
    return `${indent}RAISE DEBUG 'tollgate_apply: balance % % locked after lock order step 2', ${project ?? 'p'}, ${period ?? 'e'};\n${indent}${statement}`
  })
  if (found !== 5) throw new Error(`own-draw-settle-lock migration: expected 5 late balance locks to mark, found ${found}`)
  return marked
}

/** Version 9 of `tollgate_apply`: version 8 with the balance of a draw the batch settles itself locked up front. */
export const V9_APPLY = reportLateLocks(splice(V8_APPLY, SETTLED_HOLDS_V8, SETTLED_HOLDS_V9))

export const ownDrawSettleLockMigration: Migration = {
  version: 9,
  name: 'tollgate_apply: the balance of a draw settled in its own batch is locked up front (lock order step 2)',
  // CREATE OR REPLACE resets the function's settings: sequential scans are turned off again.
  sql: V9_APPLY + NO_SEQSCAN,
}
