/**
 * Migration 13 of the shared engine's core tables: EVERY LEASE ROW A BATCH LOCKS FOR UPDATE HAS ITS
 * BALANCE ROW LOCKED AT STEP 2, OR THE BATCH IS SENT AGAIN (issue 26, found by the lock-order stress
 * in CI, session 16).
 *
 * Step 3 locks FOR UPDATE the leases a batch tops up or shrinks, and every op on such a lease moves
 * its balance row (a top-up or shrink its `pending`, a draw on it, charged directly, `pending` and
 * `used`). Up to version 12 step 3 checked that balance against the rows step 2 locked only when the
 * lease had draws to fold. A lease created and committed by the instance's other session after step
 * 2's read, with nothing to fold yet, passed unseen; a draw on it then wrote `b_pending[NULL]` and the
 * batch failed with SQLSTATE 22004 ("array subscript in assignment must not be null"), which pg.ts
 * passes on as an error to every request of the batch. Seen once: the random stress of
 * test/core/store/shared-lock-order.test.ts, in CI, 2026-11-28 21:32 (PostgreSQL's log:
 * tollgate_apply line 518).
 *
 * From this version step 3 checks the balance of every lease it locks FOR UPDATE, folded or not: one
 * place instead of each op's. Missing, the batch fails with 40001, as migration 12 does for every
 * other balance row step 2 did not lock (late-lock-retry-migration.ts): all of it rolls back and pg.ts
 * sends it again; the re-sent batch's step 2 sees the lease and locks its balance in order.
 *
 * `tollgate_apply` is version 12's text with step 3's check taken out of the fold's branch.
 */
import type { Migration } from './migrations.ts'
import { splice } from './append-draws-migration.ts'
import { NO_SEQSCAN } from './draw-fold-mark-migration.ts'
import { LATE_LOCK_MESSAGE, V12_APPLY } from './late-lock-retry-migration.ts'

const CHECKED_ONLY_WHEN_FOLDED = `        IF dx > 0 THEN
          p := lock_lease.project_id;
          e := lock_lease.period;
          k := array_position(b_key, p || chr(31) || e);
          IF k IS NULL THEN
            RAISE EXCEPTION 'tollgate_apply: balance % % of lease % ${LATE_LOCK_MESSAGE}', p, e, lid USING ERRCODE = 'serialization_failure';
          END IF;
          b_pending[k] := b_pending[k] - dx;`

const CHECKED_ALWAYS = `        p := lock_lease.project_id;
        e := lock_lease.period;
        k := array_position(b_key, p || chr(31) || e);
        IF k IS NULL THEN
          RAISE EXCEPTION 'tollgate_apply: balance % % ${LATE_LOCK_MESSAGE} (lease %)', p, e, lid USING ERRCODE = 'serialization_failure';
        END IF;
        IF dx > 0 THEN
          b_pending[k] := b_pending[k] - dx;`

/** Version 13 of `tollgate_apply`: version 12, with the balance of every lease locked FOR UPDATE checked at step 3 (40001, sent again). */
export const V13_APPLY = splice(V12_APPLY, CHECKED_ONLY_WHEN_FOLDED, CHECKED_ALWAYS)

export const drawLockRetryMigration: Migration = {
  version: 13,
  name: 'tollgate_apply: every lease locked FOR UPDATE has its balance checked at step 3 (40001, sent again, when step 2 did not lock it)',
  // CREATE OR REPLACE resets the function's settings: sequential scans are turned off again.
  sql: V13_APPLY + NO_SEQSCAN,
}
