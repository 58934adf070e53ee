/**
 * Migration 6 of the shared engine's core tables: APPEND-ONLY DRAWS, so that several batches of one
 * instance can be in flight at once and the WAL flush of one hides behind the others (issue 26).
 *
 * Until version 5 a `draw` (a leased request's charge) locked its lease row and the period's balance
 * row FOR UPDATE and held both to COMMIT, through the WAL flush (~0.6 ms on the bench VM): a second
 * batch of the same project waited for the first one's flush, so one batch per project was in
 * flight. A draw moves credits from the lease (counted in the balance's `pending`) to `used`; it
 * does not change `used + pending`, the only figure a refusal reads. So from this version a draw:
 *
 * - takes its lease row `FOR SHARE` (draws of concurrent batches share it; a `lease`, `shrink`, the
 *   reaper or a carry's recall, which change the row, wait for them or skip it);
 * - appends its ledger row (a committed `credit_holds` row, as before) and a `credit_draws` row
 *   (lease, amount), and touches neither the lease's `charged` nor the balance row.
 *
 * Unfolded draws are FOLDED into the lease and balance rows (`charged -= amount`, `pending -=
 * amount`, `used += amount`, the draw row deleted) by whatever next locks the lease FOR UPDATE: a
 * `lease` top-up, a `shrink` (the owner sends a `shrink` of 0 as its periodic fold, credit-leases.ts),
 * or the reaper releasing a dead instance's lease. Every reader counts unfolded draws:
 *
 * - a lease's credits no request took are `charged - its unfolded draws` (a draw is checked against
 *   that; a refused `lease` reports the other instances' total of it, so a refused request waits
 *   only for credits that are really idle);
 * - a balance read (credits.ts) is `used + pending - leased + unfolded draws`;
 * - a refusal (`used + pending + amount > allocation + granted`) is unchanged and exact: a draw,
 *   folded or not, moved nothing out of `used + pending`.
 *
 * A refund or release of a drawn hold before its fold lowers `used` at once; the fold later adds the
 * draw's whole amount: the sum is the same in either order.
 *
 * Recalls move to `credit_recalls` (one row per recalled lease): a refused `lease` marks the other
 * instances' leases by inserting rows there, which waits for no lease row (a lease row is share-locked
 * by in-flight draws nearly all the time under load, so version 5's `UPDATE ... SKIP LOCKED` would
 * almost never have marked one). A draw answers whether its lease is recalled; a top-up or a shrink
 * of the lease clears it.
 *
 * THE LOCK ORDER of version 5 (lock-order-migration.ts) holds, with step 3 refined:
 *   1. own `tollgate_instances` row;
 *   2. balance rows, up front, `(project_id, period)` order (draws no longer add theirs);
 *   3. the caller's own lease rows, up front, in `id` order: FOR UPDATE when the batch tops up or
 *      shrinks the lease, else FOR SHARE (only draws); then the caller's own other hold rows and
 *      new ledger rows in op order; `credit_draws` rows only under their lease's FOR UPDATE; other
 *      instances' rows only with `SKIP LOCKED` (the reaper) or not at all (a recall is an insert
 *      into `credit_recalls`, a carry's recall one too);
 *   4. documents.
 * A lock is never upgraded within a batch (its mode is chosen up front), so two batches of one
 * instance sharing a lease never deadlock.
 *
 * Several batches of one instance may now be in flight (pg.ts): only batches of `draw`, `lease` and
 * `shrink` ops run side by side; any other batch runs alone, in queue order, as before.
 */
import type { Migration } from './migrations.ts'
import { V5_APPLY } from './lock-order-migration.ts'

const TABLES = `
CREATE TABLE credit_draws (
  lease_id text NOT NULL,
  amount numeric NOT NULL
);
CREATE INDEX credit_draws_by_lease ON credit_draws (lease_id);
CREATE TABLE credit_recalls (
  lease_id text PRIMARY KEY
);
`

const DECLARE = `
  -- Leases this batch only draws from: share-locked up front, their unheld credits, their recall.
  s_id text[] := '{}';
  s_project text[] := '{}';
  s_period text[] := '{}';
  s_avail numeric[] := '{}';
  s_recall boolean[] := '{}';
  lock_lease record;
  dx numeric;
`

/** Unfolded draws of lease `expr`. */
const unfolded = (expr: string) => `coalesce((SELECT sum(fd.amount) FROM credit_draws fd WHERE fd.lease_id = ${expr}), 0)`

// Step 3, up front: the caller's own leases the batch names, in id order; FOR UPDATE (and folded)
// when the batch tops them up or shrinks them, FOR SHARE when it only draws from them.
const LOCK_LEASES = `
  FOR lock_lease IN
    SELECT ll.id, ll.project_id, ll.period,
      ll.id = ANY (ARRAY(SELECT x.jo->>'i' FROM jsonb_array_elements(ops) AS x(jo) WHERE x.jo->>'o' IN ('lease', 'shrink'))) AS upd
    FROM credit_holds ll
    WHERE ll.id = ANY (ARRAY(
      SELECT CASE WHEN x.jo->>'o' = 'draw' THEN x.jo->>'l' ELSE x.jo->>'i' END
      FROM jsonb_array_elements(ops) AS x(jo) WHERE x.jo->>'o' IN ('lease', 'shrink', 'draw')))
      AND ll.owner = owner_id AND ll.api_type = 'lease' AND ll.state = 'pending'
    ORDER BY ll.id
  LOOP
    lid := lock_lease.id;
    IF lock_lease.upd THEN
      SELECT charged, recall INTO lc, lr FROM credit_holds WHERE id = lid AND state = 'pending' FOR UPDATE;
      IF FOUND THEN
        -- The fold: this lease's draws leave the lease for used.
        WITH fd AS (DELETE FROM credit_draws WHERE lease_id = lid RETURNING amount) SELECT coalesce(sum(amount), 0) INTO dx FROM fd;
        lr := lr OR EXISTS (SELECT 1 FROM credit_recalls WHERE lease_id = lid);
        l_id := array_append(l_id, lid);
        l_project := array_append(l_project, lock_lease.project_id);
        l_period := array_append(l_period, lock_lease.period);
        l_charged := array_append(l_charged, lc - dx);
        l_recall := array_append(l_recall, lr);
        l_ended := array_append(l_ended, false);
        l_dirty := array_append(l_dirty, dx > 0);
        IF dx > 0 THEN
          p := lock_lease.project_id;
          e := lock_lease.period;
          k := array_position(b_key, p || chr(31) || e);
          IF k IS NULL THEN
            RAISE EXCEPTION 'tollgate_apply: balance % % of lease % not locked', p, e, lid;
          END IF;
          b_pending[k] := b_pending[k] - dx;
          b_used[k] := b_used[k] + dx;
          b_dirty[k] := true;
        END IF;
      END IF;
    ELSE
      SELECT charged, recall INTO lc, lr FROM credit_holds WHERE id = lid AND state = 'pending' FOR SHARE;
      IF FOUND THEN
        s_id := array_append(s_id, lid);
        s_project := array_append(s_project, lock_lease.project_id);
        s_period := array_append(s_period, lock_lease.period);
        s_avail := array_append(s_avail, lc - ${unfolded('lid')});
        s_recall := array_append(s_recall, lr OR EXISTS (SELECT 1 FROM credit_recalls WHERE lease_id = lid));
      END IF;
    END IF;
  END LOOP;
  FOR op IN SELECT value FROM jsonb_array_elements(ops) LOOP`

// Version 5 locked the balance of a draw's lease up front; a draw leaves the balance row alone now.
const BALANCE_IDS_V5 = `      SELECT CASE WHEN x.jo->>'o' = 'draw' THEN x.jo->>'l' ELSE x.jo->>'i' END
      FROM jsonb_array_elements(ops) AS x(jo) WHERE x.jo->>'o' IN ('commit', 'release', 'refund', 'draw', 'shrink')))`
const BALANCE_IDS_V6 = `      SELECT x.jo->>'i'
      FROM jsonb_array_elements(ops) AS x(jo) WHERE x.jo->>'o' IN ('commit', 'release', 'refund', 'shrink')))`

const DRAW_V6 = `    ELSIF kind = 'draw' THEN
      durable := true;
      n := (op->>'n')::numeric;
      lid := op->>'l';
      j := array_position(l_id, lid);
      IF j IS NOT NULL THEN
        -- A lease this batch also tops up or shrinks (locked FOR UPDATE, folded): charged directly.
        IF l_ended[j] OR l_charged[j] < n THEN
          res := '"expired"';
        ELSE
          INSERT INTO credit_holds (id, project_id, period, api_type, amount, charged, state, owner, settled_at)
          VALUES (hold_id, l_project[j], l_period[j], op->>'t', n, n, 'committed', owner_id, now())
          ON CONFLICT (id) DO NOTHING;
          IF NOT FOUND THEN
            res := '"exists"';
          ELSE
            k := array_position(b_key, l_project[j] || chr(31) || l_period[j]);
            l_charged[j] := l_charged[j] - n;
            l_dirty[j] := true;
            b_pending[k] := b_pending[k] - n;
            b_used[k] := b_used[k] + n;
            b_dirty[k] := true;
            res := to_jsonb(l_recall[j]);
          END IF;
        END IF;
      ELSE
        -- Appended: the ledger row and a draw row; the lease and balance rows are folded later.
        i2 := array_position(s_id, lid);
        IF i2 IS NULL OR s_avail[i2] < n THEN
          res := '"expired"';
        ELSE
          INSERT INTO credit_holds (id, project_id, period, api_type, amount, charged, state, owner, settled_at)
          VALUES (hold_id, s_project[i2], s_period[i2], op->>'t', n, n, 'committed', owner_id, now())
          ON CONFLICT (id) DO NOTHING;
          IF NOT FOUND THEN
            res := '"exists"';
          ELSE
            INSERT INTO credit_draws (lease_id, amount) VALUES (lid, n);
            s_avail[i2] := s_avail[i2] - n;
            res := to_jsonb(s_recall[i2]);
          END IF;
        END IF;
      END IF;
    ELSIF kind = 'shrink' THEN`

const OTHERS_V5 = `        SELECT coalesce(sum(charged), 0) INTO x FROM credit_holds
        WHERE project_id = p AND period = e AND state = 'pending' AND api_type = 'lease' AND owner <> owner_id;`
const OTHERS_V6 = `        SELECT coalesce(sum(ol.charged - ${unfolded('ol.id')}), 0) INTO x FROM credit_holds ol
        WHERE ol.project_id = p AND ol.period = e AND ol.state = 'pending' AND ol.api_type = 'lease' AND ol.owner <> owner_id;`

const RECALL_V5 = `        UPDATE credit_holds SET recall = true WHERE id = ANY (ARRAY(
          SELECT rl.id FROM credit_holds rl
          WHERE rl.project_id = p AND rl.period = e AND rl.state = 'pending' AND rl.api_type = 'lease' AND rl.owner <> owner_id AND rl.charged > 0 AND NOT rl.recall
          ORDER BY rl.id FOR UPDATE SKIP LOCKED));`
// No lease row is locked: the mark is a row of its own, read by the owner's next draw.
const RECALL_V6 = `        INSERT INTO credit_recalls (lease_id)
        SELECT rl.id FROM credit_holds rl
        WHERE rl.project_id = p AND rl.period = e AND rl.state = 'pending' AND rl.api_type = 'lease' AND rl.owner <> owner_id AND rl.charged > 0
        ORDER BY rl.id
        ON CONFLICT (lease_id) DO NOTHING;`

const LEASED_V5 = `        SELECT coalesce(sum(charged), 0) INTO lx FROM credit_holds
        WHERE project_id = p AND period = e AND state = 'pending' AND api_type = 'lease' AND NOT (id = ANY (l_id));`
const LEASED_V6 = `        SELECT coalesce(sum(ol.charged - ${unfolded('ol.id')}), 0) INTO lx FROM credit_holds ol
        WHERE ol.project_id = p AND ol.period = e AND ol.state = 'pending' AND ol.api_type = 'lease' AND NOT (ol.id = ANY (l_id));`

const WRITE_V5 = `      IF l_ended[j] THEN
        UPDATE credit_holds SET charged = 0, recall = false, state = 'released', settled_at = now() WHERE id = l_id[j];
      ELSE
        UPDATE credit_holds SET charged = l_charged[j], recall = l_recall[j] WHERE id = l_id[j];
      END IF;`
const WRITE_V6 = `      IF l_ended[j] THEN
        UPDATE credit_holds SET charged = 0, recall = false, state = 'released', settled_at = now() WHERE id = l_id[j];
      ELSE
        UPDATE credit_holds SET charged = l_charged[j], recall = l_recall[j] WHERE id = l_id[j];
      END IF;
      IF l_ended[j] OR NOT l_recall[j] THEN
        DELETE FROM credit_recalls WHERE lease_id = l_id[j];
      END IF;`

// A shrink of 0 is the owner's periodic fold (its lock folds the draws): it gives nothing back, so
// it leaves a recall mark for the draw that will.
const SHRINK_RECALL_V5 = `        l_charged[j] := l_charged[j] - x;
        l_recall[j] := false;`
const SHRINK_RECALL_V6 = `        l_charged[j] := l_charged[j] - x;
        IF op->>'n' <> '0' THEN
          l_recall[j] := false;
        END IF;`

/** Replaces the one occurrence of `marker` in `text`; throws when there is not exactly one. */
export function splice(text: string, marker: string, replacement: string): string {
  const at = text.indexOf(marker)
  if (at < 0 || text.indexOf(marker, at + 1) >= 0) throw new Error(`append-draws migration: marker not found exactly once: ${marker.trim().slice(0, 60)}`)
  return text.slice(0, at) + replacement + text.slice(at + marker.length)
}

/** Replaces the text from `start` up to (not including) `end`, each found exactly once. */
function spliceBetween(text: string, start: string, end: string, replacement: string): string {
  const from = text.indexOf(start)
  const to = text.indexOf(end, from)
  if (from < 0 || to < 0 || text.indexOf(start, from + 1) >= 0) throw new Error(`append-draws migration: section not found exactly once: ${start.trim()}`)
  return text.slice(0, from) + replacement + text.slice(to + end.length)
}

let apply = V5_APPLY
apply = splice(apply, '\nDECLARE\n', '\nDECLARE\n' + DECLARE.trimStart())
apply = splice(apply, BALANCE_IDS_V5, BALANCE_IDS_V6)
apply = splice(apply, '  FOR op IN SELECT value FROM jsonb_array_elements(ops) LOOP', LOCK_LEASES.replace(/^\n/, ''))
apply = spliceBetween(apply, "    ELSIF kind = 'draw' THEN", "    ELSIF kind = 'shrink' THEN", DRAW_V6)
apply = splice(apply, OTHERS_V5, OTHERS_V6)
apply = splice(apply, RECALL_V5, RECALL_V6)
apply = splice(apply, LEASED_V5, LEASED_V6)
apply = splice(apply, WRITE_V5, WRITE_V6)
apply = splice(apply, SHRINK_RECALL_V5, SHRINK_RECALL_V6)

/** Version 6 of `tollgate_apply`: version 5 with append-only draws. */
export const V6_APPLY = apply

/**
 * The reaper of version 5 (lock order unchanged) folding a dead lease's draws as it releases it: the
 * lease's credits leave `pending`, its drawn ones join `used`.
 */
export const V6_REAP = `
CREATE OR REPLACE FUNCTION tollgate_reap(timeout_ms bigint) RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
  released bigint;
  dead_projects text[];
  dead_periods text[];
  dead_ids text[];
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
  SELECT coalesce(array_agg(dh.id ORDER BY dh.id), '{}') INTO dead_ids FROM (
    SELECT h.id FROM credit_holds h
    JOIN unnest(dead_projects, dead_periods) AS k(kp, ke) ON h.project_id = k.kp AND h.period = k.ke
    WHERE h.state = 'pending' AND NOT EXISTS (SELECT 1 FROM tollgate_instances i WHERE i.id = h.owner)
    ORDER BY h.id
    FOR UPDATE OF h SKIP LOCKED
  ) dh;
  -- Released first: what the dead holds had that no draw took (read before the fold below).
  WITH rel AS (
    UPDATE credit_holds h SET state = 'released', charged = 0, settled_at = now()
    WHERE h.id = ANY (dead_ids) AND h.state = 'pending'
    RETURNING h.project_id, h.period, h.id
  ), sums AS (
    SELECT rel.project_id, rel.period, sum(o.charged - ${unfolded('o.id')}) AS amount, count(*) AS n
    FROM rel JOIN credit_holds o ON o.id = rel.id GROUP BY rel.project_id, rel.period
  ), moved AS (
    UPDATE credit_balances b SET pending = b.pending - sums.amount
    FROM sums WHERE b.project_id = sums.project_id AND b.period = sums.period
    RETURNING sums.n
  )
  SELECT coalesce(sum(n), 0) INTO released FROM moved;
  -- Then the fold of the dead leases' draws (their rows are locked above, so no draw is in flight):
  -- drawn credits leave pending for used.
  WITH dr AS (
    DELETE FROM credit_draws d WHERE d.lease_id = ANY (dead_ids) RETURNING d.lease_id, d.amount
  ), sums AS (
    SELECT h.project_id, h.period, sum(dr.amount) AS amount FROM dr JOIN credit_holds h ON h.id = dr.lease_id GROUP BY h.project_id, h.period
  )
  UPDATE credit_balances b SET used = b.used + sums.amount, pending = b.pending - sums.amount
  FROM sums WHERE b.project_id = sums.project_id AND b.period = sums.period;
  DELETE FROM credit_recalls WHERE lease_id = ANY (dead_ids);
  RETURN released;
END
$fn$;
`

export const appendDrawsMigration: Migration = {
  version: 6,
  name: 'append-only draws folded later; recalls in credit_recalls; several batches in flight',
  sql: TABLES + V6_APPLY + V6_REAP,
}
