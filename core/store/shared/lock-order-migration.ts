/**
 * Migration 5 of the shared engine's core tables: ONE LOCK ORDER for every function of the engine.
 *
 * Every transaction of the credit engine takes its row locks in this order, and never waits for a
 * lock of an earlier step while it holds one of a later step:
 *
 *   1. `tollgate_instances`: only the caller's own row (`tollgate_apply` re-registers its owner,
 *      the heartbeat updates it); the reaper deletes stale rows in `id` order, `SKIP LOCKED`.
 *   2. `credit_balances`: every balance row the transaction will touch, locked up front in
 *      `(project_id, period)` order (created first when missing, in the same order). `tollgate_apply`
 *      finds them from its ops: `reserve`, `lease` and `grant` name their period; `commit`,
 *      `release`, `refund`, `draw` and `shrink` name a hold or lease whose period is read without a
 *      lock (a hold's project and period never change). The reaper locks the periods of the dead
 *      holds it found, in the same order.
 *   3. `credit_holds` and `credit_grants`: rows of the caller's own instance (its holds, its leases,
 *      new ledger rows, a grant id) in op order; only that instance's one batch in flight touches
 *      them. Rows of OTHER instances are only ever taken with `SKIP LOCKED`: the recall of a refused
 *      `lease` (a lease another batch holds is marked at the next refusal instead), and the
 *      reaper's dead holds.
 *   4. `documents`: last, in op order (an insert of a new key waits for a concurrent insert of the
 *      same key; two batches inserting the same new keys in opposite orders can still deadlock, a
 *      rare case the batch retry of pg.ts covers).
 *
 * Before this version, a refused `lease` locked the balance row and then marked the other
 * instances' leases `recall` (step 2 then 3), while `draw` and `shrink` locked their lease first and
 * the balance second (3 then 2): two instances on one period deadlocked (SQLSTATE 40P01) within
 * the deadlock timeout, and the whole batch failed. `tollgate_reap` took dead holds before their
 * balances (the same inversion), and a batch touching two periods locked them in op order, so two
 * batches with the periods in opposite orders deadlocked too. test/core/store/shared-lock-order.test.ts
 * reproduces each against version 4 and checks that version 5 never deadlocks.
 *
 * `tollgate_apply` is version 4's text (credit-leases-migration.ts; never edited, it is an applied
 * migration) with the up-front lock of step 2 and the `SKIP LOCKED` recall spliced in.
 */
import type { Migration } from './migrations.ts'
import { V4_APPLY } from './credit-leases-migration.ts'

const DECLARE = `
  -- Step 2 of the lock order: the balance rows of the batch, sorted.
  lock_projects text[];
  lock_periods text[];
  lock_row record;
`

// Step 2, before the first op: every balance row the batch touches, created when missing and
// locked in (project_id, period) order. They land in the batch's cache of version 3, so the ops
// find them there; an op whose period was not found here (none is known) would lock at first
// touch as before.
const LOCK_BALANCES = `
  SELECT coalesce(array_agg(lk.kp ORDER BY lk.kp, lk.ke), '{}'), coalesce(array_agg(lk.ke ORDER BY lk.kp, lk.ke), '{}')
  INTO lock_projects, lock_periods
  FROM (
    SELECT x.jo->>'p' AS kp, x.jo->>'e' AS ke FROM jsonb_array_elements(ops) AS x(jo) WHERE x.jo->>'o' IN ('reserve', 'lease', 'grant')
    UNION
    SELECT lh.project_id, lh.period FROM credit_holds lh
    WHERE lh.id = ANY (ARRAY(
      SELECT CASE WHEN x.jo->>'o' = 'draw' THEN x.jo->>'l' ELSE x.jo->>'i' END
      FROM jsonb_array_elements(ops) AS x(jo) WHERE x.jo->>'o' IN ('commit', 'release', 'refund', 'draw', 'shrink')))
  ) lk;
  IF array_length(lock_projects, 1) IS NOT NULL THEN
    INSERT INTO credit_balances (project_id, period)
    SELECT lk.kp, lk.ke FROM unnest(lock_projects, lock_periods) AS lk(kp, ke) ORDER BY lk.kp, lk.ke
    ON CONFLICT (project_id, period) DO NOTHING;
    FOR lock_row IN
      SELECT lb.project_id, lb.period, lb.used, lb.pending, lb.granted FROM credit_balances lb
      JOIN unnest(lock_projects, lock_periods) AS lk(kp, ke) ON lb.project_id = lk.kp AND lb.period = lk.ke
      ORDER BY lb.project_id, lb.period
      FOR UPDATE OF lb
    LOOP
      b_key := array_append(b_key, lock_row.project_id || chr(31) || lock_row.period);
      b_project := array_append(b_project, lock_row.project_id);
      b_period := array_append(b_period, lock_row.period);
      b_used := array_append(b_used, lock_row.used);
      b_pending := array_append(b_pending, lock_row.pending);
      b_granted := array_append(b_granted, lock_row.granted);
      b_dirty := array_append(b_dirty, false);
    END LOOP;
  END IF;
  FOR op IN SELECT value FROM jsonb_array_elements(ops) LOOP`

const RECALL_V4 = `
        UPDATE credit_holds SET recall = true
        WHERE project_id = p AND period = e AND state = 'pending' AND api_type = 'lease' AND owner <> owner_id AND charged > 0 AND NOT recall;`

// Step 3 for other instances' rows: a lease another batch holds is skipped, never waited for (its
// credits still count in the total returned, so the refused request asks again and recalls it then).
const RECALL_V5 = `
        UPDATE credit_holds SET recall = true WHERE id = ANY (ARRAY(
          SELECT rl.id FROM credit_holds rl
          WHERE rl.project_id = p AND rl.period = e AND rl.state = 'pending' AND rl.api_type = 'lease' AND rl.owner <> owner_id AND rl.charged > 0 AND NOT rl.recall
          ORDER BY rl.id FOR UPDATE SKIP LOCKED));`

/** Replaces the one occurrence of `marker` in `text`; throws when there is not exactly one. */
function splice(text: string, marker: string, replacement: string): string {
  const at = text.indexOf(marker)
  if (at < 0 || text.indexOf(marker, at + 1) >= 0) throw new Error(`lock-order migration: marker not found exactly once: ${marker.trim().slice(0, 60)}`)
  return text.slice(0, at) + replacement + text.slice(at + marker.length)
}

let apply = V4_APPLY
apply = splice(apply, '\nDECLARE\n', '\nDECLARE\n' + DECLARE.trimStart())
apply = splice(apply, '  FOR op IN SELECT value FROM jsonb_array_elements(ops) LOOP', LOCK_BALANCES.replace(/^\n/, ''))
apply = splice(apply, RECALL_V4, RECALL_V5)

/** Version 5 of `tollgate_apply`: version 4 in the lock order above. */
export const V5_APPLY = apply

/**
 * The reaper in the lock order: stale instance rows (id order, skipping locked ones), then the
 * balance rows of the periods with dead holds (sorted; it waits for the batches holding them, so a
 * busy period is still reaped), then the dead holds of those periods (`SKIP LOCKED`: a hold some
 * live batch holds is not dead).
 */
export const V5_REAP = `
CREATE OR REPLACE FUNCTION tollgate_reap(timeout_ms bigint) RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
  released bigint;
  dead_projects text[];
  dead_periods text[];
BEGIN
  DELETE FROM tollgate_instances WHERE id = ANY (ARRAY(
    SELECT si.id FROM tollgate_instances si WHERE si.seen_at < now() - timeout_ms * interval '1 millisecond'
    ORDER BY si.id FOR UPDATE SKIP LOCKED));
  SELECT coalesce(array_agg(d.project_id ORDER BY d.project_id, d.period), '{}'), coalesce(array_agg(d.period ORDER BY d.project_id, d.period), '{}')
  INTO dead_projects, dead_periods
  FROM (
    SELECT DISTINCT h.project_id, h.period FROM credit_holds h
    WHERE h.state = 'pending' AND NOT EXISTS (SELECT 1 FROM tollgate_instances i WHERE i.id = h.owner)
  ) d;
  IF array_length(dead_projects, 1) IS NULL THEN
    RETURN 0;
  END IF;
  PERFORM 1 FROM credit_balances b JOIN unnest(dead_projects, dead_periods) AS k(kp, ke) ON b.project_id = k.kp AND b.period = k.ke
  ORDER BY b.project_id, b.period FOR UPDATE OF b;
  WITH dead AS (
    SELECT h.id, h.charged FROM credit_holds h
    JOIN unnest(dead_projects, dead_periods) AS k(kp, ke) ON h.project_id = k.kp AND h.period = k.ke
    WHERE h.state = 'pending' AND NOT EXISTS (SELECT 1 FROM tollgate_instances i WHERE i.id = h.owner)
    FOR UPDATE OF h SKIP LOCKED
  ), rel AS (
    UPDATE credit_holds h SET state = 'released', charged = 0, settled_at = now()
    FROM dead WHERE h.id = dead.id AND h.state = 'pending'
    RETURNING h.project_id, h.period, dead.charged
  ), sums AS (
    SELECT project_id, period, sum(charged) AS amount, count(*) AS n FROM rel GROUP BY project_id, period
  ), moved AS (
    UPDATE credit_balances b SET pending = b.pending - sums.amount
    FROM sums WHERE b.project_id = sums.project_id AND b.period = sums.period
    RETURNING sums.n
  )
  SELECT coalesce(sum(n), 0) INTO released FROM moved;
  RETURN released;
END
$fn$;
`

export const lockOrderMigration: Migration = {
  version: 5,
  name: 'one lock order: balances sorted before holds; recall and reaper skip locked rows',
  sql: V5_APPLY + V5_REAP,
}
