/**
 * Migration 13 of the shared engine's core tables: A DRAW CHARGED DIRECTLY ON A LEASE CHECKS THAT ITS
 * BALANCE ROW WAS LOCKED (issue 26, found by the lock-order stress in CI, session 16).
 *
 * A `draw` on a lease that the same batch also tops up or shrinks is charged directly: the lease row
 * is locked FOR UPDATE at step 3 and the draw moves its balance's `pending` and `used`. Step 3 checks
 * that balance against the rows step 2 locked only when the lease had draws to fold. A lease created
 * and committed by the instance's other session after step 2's read, with nothing to fold yet, passed
 * that check unseen, and the draw then wrote `b_pending[NULL]`: the batch failed with SQLSTATE 22004
 * ("array subscript in assignment must not be null"), which pg.ts passes on as an error to every
 * request of the batch. Seen once: the random stress of test/core/store/shared-lock-order.test.ts,
 * in CI, 2026-11-28 21:32 (PostgreSQL's log: tollgate_apply line 518).
 *
 * From this version the draw fails the batch with 40001 instead, as migration 12 does for every other
 * balance row step 2 did not lock (late-lock-retry-migration.ts): all of it rolls back and pg.ts sends
 * it again; the re-sent batch's step 2 sees the lease and locks its balance in order.
 *
 * `tollgate_apply` is version 12's text with that check added before the direct charge.
 */
import type { Migration } from './migrations.ts'
import { splice } from './append-draws-migration.ts'
import { NO_SEQSCAN } from './draw-fold-mark-migration.ts'
import { LATE_LOCK_MESSAGE, V12_APPLY } from './late-lock-retry-migration.ts'

const DIRECT_CHARGE = `            k := array_position(b_key, l_project[j] || chr(31) || l_period[j]);
            l_charged[j] := l_charged[j] - n;`

/** Version 13 of `tollgate_apply`: version 12, with a direct draw's balance checked (40001, sent again). */
export const V13_APPLY = splice(
  V12_APPLY,
  DIRECT_CHARGE,
  `            k := array_position(b_key, l_project[j] || chr(31) || l_period[j]);
            IF k IS NULL THEN
              RAISE EXCEPTION 'tollgate_apply: balance % % of lease % ${LATE_LOCK_MESSAGE}', l_project[j], l_period[j], lid USING ERRCODE = 'serialization_failure';
            END IF;
            l_charged[j] := l_charged[j] - n;`,
)

export const drawLockRetryMigration: Migration = {
  version: 13,
  name: 'tollgate_apply: a draw charged directly on a lease whose balance step 2 did not lock fails with 40001 (sent again)',
  // CREATE OR REPLACE resets the function's settings: sequential scans are turned off again.
  sql: V13_APPLY + NO_SEQSCAN,
}
