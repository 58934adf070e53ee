/**
 * Migration 11 of the shared engine's core tables: A BATCH OF ONE DRAW LOCKS ITS LEASE BY ID
 * (issue 26, PostgreSQL's fixed cost per batch at moderate load).
 *
 * Below saturation most batches hold one draw (a request's charge leaves as soon as no batch is in
 * flight), and such a batch cost version 10 ~736k instructions (bench/apply-draws-instructions.ts,
 * session 13). Its lease went through the lease loop: a cursor over a query with two sub-selects of
 * the ops and a sort, then the lease row FOR SHARE. This version locks the one draw's lease in one
 * statement by its id, with the loop's own conditions (the caller's pending lease), and records it
 * as the loop's share-locked branch does (what it has left, its unfolded draws counted, and whether
 * it is recalled); the op loop then runs unchanged.
 *
 * Same answers and charges: the same row, locked FOR SHARE with the same conditions (a concurrent
 * change makes PostgreSQL re-check them on the newest version, as the loop's second statement did),
 * the same entries in the share-locked arrays. THE LOCK ORDER (lock-order-migration.ts) is
 * unchanged: a batch of one draw locks no balance row and then that one lease row (step 3).
 */
import type { Migration } from './migrations.ts'
import { splice } from './append-draws-migration.ts'
import { NO_SEQSCAN } from './draw-fold-mark-migration.ts'
import { V10_APPLY } from './one-lease-draws-migration.ts'

const ONE_DRAW_LOCK = `
  IF draws_only AND jsonb_array_length(ops) = 1 THEN
    one_lease := ops->0->>'l';
    SELECT project_id, period, charged, recall, folded_through INTO lp, le, lc, lr, lf FROM credit_holds
    WHERE id = one_lease AND owner = owner_id AND api_type = 'lease' AND state = 'pending' FOR SHARE;
    IF FOUND THEN
      lid := one_lease;
      s_id := array_append(s_id, lid);
      s_project := array_append(s_project, lp);
      s_period := array_append(s_period, le);
      s_avail := array_append(s_avail, lc - coalesce((SELECT sum(fd.amount) FROM credit_draws fd WHERE fd.lease_id = lid AND fd.id > lf), 0));
      s_recall := array_append(s_recall, lr OR EXISTS (SELECT 1 FROM credit_recalls WHERE lease_id = lid));
    END IF;
  ELSE
  FOR lock_lease IN
`

const LOOP_END = `  END LOOP;
  IF array_length(s_id, 1) IS NOT NULL AND jsonb_array_length(ops) >= 4 THEN`

let apply = splice(V10_APPLY, '\n  FOR lock_lease IN\n', ONE_DRAW_LOCK)
apply = splice(apply, LOOP_END, LOOP_END.replace('  END LOOP;\n', '  END LOOP;\n  END IF;\n'))

/** Version 11 of `tollgate_apply`: version 10, a batch of one draw locking its lease by id. */
export const V11_APPLY = apply

export const oneDrawLockMigration: Migration = {
  version: 11,
  name: 'tollgate_apply: a batch of one draw locks its lease by id, not through the lease loop',
  // CREATE OR REPLACE resets the function's settings: sequential scans are turned off again.
  sql: V11_APPLY + NO_SEQSCAN,
}
