/**
 * Migration 7 of the shared engine's core tables: AN UNFOLDED SUM READS ONLY UNFOLDED DRAWS (issue 26).
 *
 * Migration 6 (append-draws-migration.ts) appends a `credit_draws` row per draw and a fold deletes
 * its lease's rows. Every batch sums its lease's unfolded draws (a draw's check of what its lease has
 * left, a refused `lease`'s total of the other leases, a balance read, the reaper), and that sum went
 * through an index on `lease_id` alone: under load the few leases of a busy project carry hundreds of
 * live rows and tens of thousands of deleted ones under the same keys, and every sum walked every
 * deleted entry (and its heap tuple) until autovacuum, up to a minute away, removed them. Buffers per
 * sum grew with the number of draws folded since the last vacuum (bench/draw-fold-scan.ts: 2 buffers
 * on a fresh lease, 86 after 20,000 folded draws, 126 with an old snapshot open), and PostgreSQL CPU
 * per charged request rose from 44–50 µs to 270–430 µs with durable req/s falling round after round.
 *
 * From this version:
 *
 * - draw rows get an `id` from a sequence (`bigserial`, CACHE 1) and the index is `(lease_id, id)`;
 * - the fold records on the lease row the highest draw id it folded (`credit_holds.folded_through`);
 * - every unfolded sum and the fold itself read `lease_id = L AND id > folded_through`: the btree
 *   descent lands past every entry the folds deleted, so a sum touches the live rows only, however
 *   many dead ones autovacuum has not removed yet.
 *
 * WHY NO DRAW ROW WITH AN ID <= folded_through CAN APPEAR AFTER THE FOLD (so skipping them is exact):
 * a draw takes its lease row FOR SHARE before it inserts its row (and so before `nextval`); the fold
 * takes the lease row FOR UPDATE, which waits until every batch holding it FOR SHARE has committed or
 * rolled back, and its DELETE (a fresh statement snapshot, READ COMMITTED) then sees every draw row
 * those batches committed. A draw that comes later waits for the fold's COMMIT to get its FOR SHARE,
 * so its `nextval` runs after every id the fold saw was handed out, and a sequence with CACHE 1 hands
 * out increasing values across sessions (a session cache could hand out an older, lower value later,
 * hence CACHE 1). A draw of the same batch as the fold charges the lease directly and writes no draw
 * row (migration 6). Readers that do not lock the lease (another lease's total, a balance read) read
 * `charged`, `folded_through` and the draw rows in one statement snapshot, in which the fold's three
 * writes (lease row, draw rows, balance) are all visible or none is.
 *
 * Second line: per-table autovacuum settings on `credit_draws` (no scale factor, a threshold of
 * 5,000 dead rows, no cost delay), so the dead rows and heap pages go at the launcher's next pass
 * (`autovacuum_naptime`, 60 s by default) instead of when 20 % of a table that is nearly all dead
 * rows has changed. They only bound the table's size now; no sum waits for them.
 *
 * Third: `tollgate_apply` runs with `enable_seqscan = off` (see NO_SEQSCAN below): a plan a
 * connection cached while `credit_holds` was nearly empty scanned the whole ledger in every batch.
 *
 * THE LOCK ORDER of version 5/6 (lock-order-migration.ts, append-draws-migration.ts) is unchanged:
 * no lock is added or moved; the fold still deletes `credit_draws` rows only under its lease's FOR
 * UPDATE, and `folded_through` is written with the lease row's other columns at the end of the batch.
 */
import type { Migration } from './migrations.ts'
import { V6_APPLY, V6_REAP, splice } from './append-draws-migration.ts'

const TABLES = `
ALTER TABLE credit_draws ADD COLUMN id bigserial;
ALTER SEQUENCE credit_draws_id_seq CACHE 1;
DROP INDEX credit_draws_by_lease;
CREATE INDEX credit_draws_by_lease_id ON credit_draws (lease_id, id);
ALTER TABLE credit_holds ADD COLUMN folded_through bigint NOT NULL DEFAULT 0;
ALTER TABLE credit_draws SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000, autovacuum_vacuum_cost_delay = 0);
`

/** Unfolded draws of the lease row `alias` (its `id` and `folded_through`). */
export const unfoldedAfterMark = (alias: string) =>
  `coalesce((SELECT sum(fd.amount) FROM credit_draws fd WHERE fd.lease_id = ${alias}.id AND fd.id > ${alias}.folded_through), 0)`

const DECLARE = `
  -- The fold marks: per lease folded in this batch, the highest draw id it folded (written at the end).
  lf bigint;
  f_id text[] := '{}';
  f_through bigint[] := '{}';
`

const FOLD_V6 = `      SELECT charged, recall INTO lc, lr FROM credit_holds WHERE id = lid AND state = 'pending' FOR UPDATE;
      IF FOUND THEN
        -- The fold: this lease's draws leave the lease for used.
        WITH fd AS (DELETE FROM credit_draws WHERE lease_id = lid RETURNING amount) SELECT coalesce(sum(amount), 0) INTO dx FROM fd;`
const FOLD_V7 = `      SELECT charged, recall, folded_through INTO lc, lr, lf FROM credit_holds WHERE id = lid AND state = 'pending' FOR UPDATE;
      IF FOUND THEN
        -- The fold: this lease's draws leave the lease for used; the lease row records the last one.
        WITH fd AS (DELETE FROM credit_draws WHERE lease_id = lid AND id > lf RETURNING id, amount)
        SELECT coalesce(sum(amount), 0), coalesce(max(id), lf) INTO dx, lf FROM fd;
        IF dx > 0 THEN
          f_id := array_append(f_id, lid);
          f_through := array_append(f_through, lf);
        END IF;`

const SHARE_V6 = `      SELECT charged, recall INTO lc, lr FROM credit_holds WHERE id = lid AND state = 'pending' FOR SHARE;
      IF FOUND THEN
        s_id := array_append(s_id, lid);
        s_project := array_append(s_project, lock_lease.project_id);
        s_period := array_append(s_period, lock_lease.period);
        s_avail := array_append(s_avail, lc - coalesce((SELECT sum(fd.amount) FROM credit_draws fd WHERE fd.lease_id = lid), 0));`
const SHARE_V7 = `      SELECT charged, recall, folded_through INTO lc, lr, lf FROM credit_holds WHERE id = lid AND state = 'pending' FOR SHARE;
      IF FOUND THEN
        s_id := array_append(s_id, lid);
        s_project := array_append(s_project, lock_lease.project_id);
        s_period := array_append(s_period, lock_lease.period);
        s_avail := array_append(s_avail, lc - coalesce((SELECT sum(fd.amount) FROM credit_draws fd WHERE fd.lease_id = lid AND fd.id > lf), 0));`

// The other leases' totals (a lease's reader view, a refused lease's idle credits): twice in V6.
const OTHERS_SUM_V6 = `SELECT coalesce(sum(ol.charged - coalesce((SELECT sum(fd.amount) FROM credit_draws fd WHERE fd.lease_id = ol.id), 0)), 0) INTO`
const OTHERS_SUM_V7 = `SELECT coalesce(sum(ol.charged - ${unfoldedAfterMark('ol')}), 0) INTO`

const WRITE_V6 = `        UPDATE credit_holds SET charged = l_charged[j], recall = l_recall[j] WHERE id = l_id[j];`
const WRITE_V7 = `        UPDATE credit_holds SET charged = l_charged[j], recall = l_recall[j],
          folded_through = coalesce(f_through[array_position(f_id, l_id[j])], folded_through) WHERE id = l_id[j];`

let apply = V6_APPLY
apply = splice(apply, '\nDECLARE\n', '\nDECLARE\n' + DECLARE.trimStart())
apply = splice(apply, FOLD_V6, FOLD_V7)
apply = splice(apply, SHARE_V6, SHARE_V7)
const others = apply.split(OTHERS_SUM_V6)
if (others.length !== 3) throw new Error('draw-fold-mark migration: the other leases\' sum not found exactly twice')
apply = others.join(OTHERS_SUM_V7)
apply = splice(apply, WRITE_V6, WRITE_V7)

/** Version 7 of `tollgate_apply`: version 6 with sums and folds past the lease's fold mark. */
export const V7_APPLY = apply

/** The reaper of version 6 (lock order unchanged) reading and folding past each dead lease's mark. */
let reap = splice(V6_REAP, 'sum(o.charged - coalesce((SELECT sum(fd.amount) FROM credit_draws fd WHERE fd.lease_id = o.id), 0))', `sum(o.charged - ${unfoldedAfterMark('o')})`)
reap = splice(reap, `  -- Then the fold of the dead leases' draws (their rows are locked above, so no draw is in flight):
  -- drawn credits leave pending for used.
  WITH dr AS (
    DELETE FROM credit_draws d WHERE d.lease_id = ANY (dead_ids) RETURNING d.lease_id, d.amount
  ), sums AS (
    SELECT h.project_id, h.period, sum(dr.amount) AS amount FROM dr JOIN credit_holds h ON h.id = dr.lease_id GROUP BY h.project_id, h.period
  )`, `  -- Then the fold of the dead leases' draws past their marks (their rows are locked above, so no
  -- draw is in flight): drawn credits leave pending for used.
  WITH dr AS (
    DELETE FROM credit_draws d USING credit_holds h
    WHERE h.id = ANY (dead_ids) AND d.lease_id = h.id AND d.id > h.folded_through
    RETURNING h.project_id, h.period, d.amount
  ), sums AS (
    SELECT dr.project_id, dr.period, sum(dr.amount) AS amount FROM dr GROUP BY dr.project_id, dr.period
  )`)
const V7_REAP = reap

// Every statement of tollgate_apply finds its rows by key. PL/pgSQL keeps a connection's plan of each
// statement; one planned while `credit_holds` was nearly empty (a fresh schema, before the first
// autoanalyze) is a sequential scan, kept after the table has grown to a ledger of many thousand rows:
// every batch then read the whole ledger (1,357 buffers a batch at 100,000 rows, against ~20). With
// sequential scans disabled for the function's own statements, the plan is an index scan at any size.
export const NO_SEQSCAN = `
ALTER FUNCTION tollgate_apply(jsonb, text) SET enable_seqscan = off;
`

export const drawFoldMarkMigration: Migration = {
  version: 7,
  name: 'draw ids and a fold mark per lease: unfolded sums skip folded draws; autovacuum settings of credit_draws; tollgate_apply without sequential scans',
  sql: TABLES + V7_APPLY + NO_SEQSCAN + V7_REAP,
}
