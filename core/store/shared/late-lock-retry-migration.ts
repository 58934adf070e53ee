/**
 * Migration 12 of the shared engine's core tables: A BATCH NEVER LOCKS A BALANCE ROW AFTER STEP 2
 * (issue 26, the lock order made strict).
 *
 * Step 2 of the lock order (lock-order-migration.ts) finds the balance rows a batch needs from its
 * ops, reading the holds and leases they name without a lock, and locks those rows in order. A hold
 * or lease that another transaction creates and commits between that read and the op that uses it
 * is invisible to step 2 and visible to the op (PL/pgSQL statements under READ COMMITTED each take
 * a new snapshot). Up to version 11 the op then locked its balance row late, after the rows of step
 * 3, and said so at DEBUG1: the random stress of test/core/store/shared-lock-order.test.ts met it
 * about once in 7 runs (a `shrink` racing its lease's creation in the other session of the same
 * instance, behind a batch that waited at step 2 for another period). Holding a lease row while
 * waiting for a balance row is the inversion that deadlocks.
 *
 * From this version the op does not wait: the batch fails with SQLSTATE 40001 (serialization
 * failure), which rolls all of it back, and pg.ts sends it again after a short random pause (counted
 * in `tollgate_store_batch_retries_total`). The re-sent batch's step 2 sees the row (it was
 * committed before the first attempt failed) and locks its balance in order, so the answers are
 * those of the batch sent once, after the creation. No op is answered as if its row did not exist:
 * a `release` told "missing" for a hold that does exist would leave that hold's credits pending.
 *
 * The same holds for the fold of a lease that a `shrink` (or a top-up) locks FOR UPDATE when its
 * balance row was not locked at step 2 (a lease created, and drawn from, after step 2's read): up
 * to version 11 that raised a plain exception (SQLSTATE P0001, which pg.ts passes on as an error);
 * it is now a serialization failure too, and the batch is sent again.
 *
 * `tollgate_apply` is version 11's text (one-draw-lock-migration.ts) with each of the five late
 * locks of version 9 and that exception replaced.
 */
import type { Migration } from './migrations.ts'
import { splice } from './append-draws-migration.ts'
import { NO_SEQSCAN } from './draw-fold-mark-migration.ts'
import { V11_APPLY } from './one-draw-lock-migration.ts'

/** What the failure says; the lock-order test matches it. */
export const LATE_LOCK_MESSAGE = 'not locked at lock order step 2; the batch is sent again'

const LATE_LOCK = /RAISE DEBUG 'tollgate_apply: balance % % locked after lock order step 2', (\S+), (\S+);/g

function failLateLocks(text: string): string {
  let found = 0
  const strict = text.replace(LATE_LOCK, (_line, project: string, period: string) => {
    found++
    return `RAISE EXCEPTION 'tollgate_apply: balance % % ${LATE_LOCK_MESSAGE}', ${project}, ${period} USING ERRCODE = 'serialization_failure';`
  })
  if (found !== 5) throw new Error(`late-lock-retry migration: expected 5 late balance locks, found ${found}`)
  return splice(
    strict,
    `RAISE EXCEPTION 'tollgate_apply: balance % % of lease % not locked', p, e, lid;`,
    `RAISE EXCEPTION 'tollgate_apply: balance % % of lease % ${LATE_LOCK_MESSAGE}', p, e, lid USING ERRCODE = 'serialization_failure';`,
  )
}

/** Version 12 of `tollgate_apply`: version 11, failing (40001, re-sent) instead of locking a balance row late. */
export const V12_APPLY = failLateLocks(V11_APPLY)

export const lateLockRetryMigration: Migration = {
  version: 12,
  name: 'tollgate_apply: a balance row step 2 did not lock fails the batch with 40001 (sent again) instead of being locked late',
  // CREATE OR REPLACE resets the function's settings: sequential scans are turned off again.
  sql: V12_APPLY + NO_SEQSCAN,
}
