/**
 * Migration 8 of the shared engine's core tables: A BATCH'S DRAWS IN ONE STATEMENT (issue 26).
 *
 * Up to version 7, `tollgate_apply` ran each `draw` as its own PL/pgSQL statements: an INSERT of the
 * request's ledger row (`credit_holds`, ON CONFLICT DO NOTHING) and an INSERT of a `credit_draws` row.
 * A statement of PL/pgSQL costs far more to start and end than to run (executor start, the ON CONFLICT
 * arbiter and the CHECK constraint read back from the catalog text, index opening, per statement): a
 * batch of 16 draws cost ~190 µs of PostgreSQL CPU per draw, 64 draws ~115 µs (bench/apply-draws-cpu.ts,
 * one connection, durable): ~90 µs per draw, ~1.6 ms per batch.
 *
 * From this version, the draws of every lease the batch share-locks (the leases it only draws from)
 * run set-based, in ONE statement, when the lease can cover them all:
 *
 * - one INSERT of every request's ledger row (a row per charge, as the ledger's readers need: its
 *   id makes a re-sent draw answer `exists`, the usage and the ledger list read it);
 * - ONE `credit_draws` row per lease per batch, of the sum of the draws that inserted their ledger
 *   row (folds and unfolded sums only ever read the sum of a lease's draw rows);
 * - the answers: `exists` for a draw whose ledger row was already there, else the lease's recall
 *   mark, as before.
 *
 * WHY THE ANSWERS AND CHARGES ARE THOSE OF THE DRAWS ONE BY ONE: the leases taken set-based are
 * share-locked by this batch and not topped up or shrunk by it (those are FOR UPDATE and charge
 * directly, in the op loop), so nothing but this lease's own draws changes what it has left during
 * the batch. A draw one by one is refused (`expired`) only when what is left is less than it; the
 * set-based path is taken only when the sum of ALL the lease's draws of the batch (positive
 * amounts, `exists` ones included) is at most what the lease had left at the lock, so no prefix of
 * them can exceed it and none would have been refused; a draw whose ledger row exists draws nothing
 * either way. And it is taken only when every op id of the batch is distinct, so which of two ops
 * with one id would have inserted it (op order) cannot differ, and when the batch has no `lease` op:
 * a granted lease answers the period as readers see it, net of the credits its instance's other
 * leases hold undrawn, and a draw inserted ahead of the op loop would change that figure for a
 * `lease` op before it in op order (the answers differ; the charges do not). Any other lease's draws, and every
 * draw of a batch where this does not hold, go through the op loop of version 7 unchanged (its
 * exact answer one at a time, e.g. near the lease's last credit). An all-draw batch (the common one)
 * returns right after the statement: it has no lease or balance row to write.
 *
 * THE LOCK ORDER (lock-order-migration.ts) is unchanged in its steps: the set-based draws run after
 * the lease rows are share-locked (step 3), as a draw did, and insert only new ledger rows of the
 * caller's own instance. Within step 3 those ledger rows are now inserted before the ops of the op
 * loop rather than among them: they are new rows with ids no other instance uses, so no other
 * transaction waits for them in an opposite order (only a re-send of the same batch, after it
 * rolled back, has the same ids). The fold mark of version 7 holds as before: the one draw row of a
 * lease takes its `nextval` after the lease's FOR SHARE.
 *
 * `tollgate_apply` is version 7's text (draw-fold-mark-migration.ts) with the statement spliced in
 * after the lease locks, the op loop skipping the draws it answered, and, for a batch of draws only,
 * no lookup of balance rows to lock (a draw locks none: its result is always empty).
 */
import type { Migration } from './migrations.ts'
import { splice } from './append-draws-migration.ts'
import { NO_SEQSCAN, V7_APPLY } from './draw-fold-mark-migration.ts'

const DECLARE = `
  -- Answers of the draws taken set-based, by op position (NULL: the op loop answers), and their count.
  pre jsonb[] := '{}';
  pre_count integer := 0;
  oi integer := 0;
`

const LOOP_V7 = `
  FOR op IN SELECT value FROM jsonb_array_elements(ops) LOOP
    kind := op->>'o';`

/**
 * Fewest ops of a batch for the set-based statement: it costs more to start than a draw's two
 * INSERTs (measured ~0.2 ms more per batch of one draw), and pays from about 4 draws on.
 */
export const SET_DRAWS_MIN_OPS = 4

const SET_DRAWS = `
  IF array_length(s_id, 1) IS NOT NULL AND jsonb_array_length(ops) >= ${SET_DRAWS_MIN_OPS} THEN
    WITH x AS (
      SELECT x.jo, x.ord FROM jsonb_array_elements(ops) WITH ORDINALITY AS x(jo, ord)
    ), per_lease AS (
      SELECT x.jo->>'l' AS lease, sum((x.jo->>'n')::numeric) AS total, min((x.jo->>'n')::numeric) AS least_n
      FROM x WHERE x.jo->>'o' = 'draw' GROUP BY 1
    ), covered AS (
      -- The share-locked leases that cover all their draws of the batch (see the top of the migration).
      SELECT s.id, s.project, s.period, s.recall
      FROM per_lease JOIN unnest(s_id, s_project, s_period, s_avail, s_recall) AS s(id, project, period, avail, recall) ON s.id = per_lease.lease
      WHERE per_lease.total <= s.avail AND per_lease.least_n > 0
        AND (SELECT count(*) = count(DISTINCT x.jo->>'i') AND bool_and(x.jo->>'o' <> 'lease') FROM x)
    ), d AS (
      SELECT x.ord, x.jo->>'i' AS hold, (x.jo->>'n')::numeric AS n, x.jo->>'t' AS t, covered.id AS lease, covered.project, covered.period, covered.recall
      FROM x JOIN covered ON covered.id = x.jo->>'l' WHERE x.jo->>'o' = 'draw'
    ), ledger AS (
      INSERT INTO credit_holds (id, project_id, period, api_type, amount, charged, state, owner, settled_at)
      SELECT d.hold, d.project, d.period, d.t, d.n, d.n, 'committed', owner_id, now() FROM d ORDER BY d.ord
      ON CONFLICT (id) DO NOTHING
      RETURNING id
    ), drawn AS (
      INSERT INTO credit_draws (lease_id, amount)
      SELECT d.lease, sum(d.n) FROM d JOIN ledger ON ledger.id = d.hold GROUP BY d.lease
      RETURNING lease_id
    )
    SELECT array_agg(CASE WHEN d.hold IS NULL THEN NULL WHEN ledger.id IS NULL THEN '"exists"'::jsonb ELSE to_jsonb(d.recall) END ORDER BY x.ord),
      count(d.hold)
    INTO pre, pre_count
    FROM x LEFT JOIN d ON d.ord = x.ord LEFT JOIN ledger ON ledger.id = d.hold;
    -- Every op was such a draw: no lease or balance row of this batch to write.
    IF pre_count = jsonb_array_length(ops) THEN
      RETURN to_jsonb(pre);
    END IF;
  END IF;
  FOR op IN SELECT value FROM jsonb_array_elements(ops) LOOP
    oi := oi + 1;
    IF pre[oi] IS NOT NULL THEN
      results := array_append(results, pre[oi]);
      CONTINUE;
    END IF;
    kind := op->>'o';`

// A batch of draws only locks no balance row (step 2): its lookup of the periods to lock is skipped.
const LOCK_LOOKUP_V7 = `
  SELECT coalesce(array_agg(lk.kp ORDER BY lk.kp, lk.ke), '{}'), coalesce(array_agg(lk.ke ORDER BY lk.kp, lk.ke), '{}')
  INTO lock_projects, lock_periods`
const LOCK_LOOKUP_END_V7 = `
  ) lk;
  IF array_length(lock_projects, 1) IS NOT NULL THEN`

let apply = V7_APPLY
apply = splice(apply, '\nDECLARE\n', '\nDECLARE\n' + DECLARE.trimStart())
apply = splice(apply, LOCK_LOOKUP_V7, `
  IF NOT jsonb_path_exists(ops, '$[*] ? (@.o != "draw")') THEN
    lock_projects := '{}';
    lock_periods := '{}';
  ELSE` + LOCK_LOOKUP_V7)
apply = splice(apply, LOCK_LOOKUP_END_V7, `
  ) lk;
  END IF;
  IF array_length(lock_projects, 1) IS NOT NULL THEN`)
apply = splice(apply, LOOP_V7, SET_DRAWS)

/** Version 8 of `tollgate_apply`: version 7 with the covered draws of share-locked leases set-based. */
export const V8_APPLY = apply

export const setDrawsMigration: Migration = {
  version: 8,
  name: 'tollgate_apply: a batch\'s draws on a share-locked lease that covers them in one statement, one credit_draws row per lease per batch',
  // CREATE OR REPLACE resets the function's settings: sequential scans are turned off again.
  sql: V8_APPLY + NO_SEQSCAN,
}
