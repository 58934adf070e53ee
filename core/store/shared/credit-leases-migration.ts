/**
 * Migration 4 of the shared engine's core tables: credit leases (see credit-leases.ts).
 *
 * A lease is a pending `credit_holds` row with `api_type = 'lease'`, owned by one instance: credits
 * it took from the period's balance (they count in `pending`, so no other instance can spend them)
 * and hands out to its requests without a round trip. Three ops join `tollgate_apply`:
 *
 * - `lease` `{i: lease id, p, e, a: allocation, n: most, m: least}`: takes `x` credits into the lease,
 *   `m <= x <= n` and at most an eighth of what is left, so the last credits of a period go one
 *   request at a time. When even `m` is not left, nothing is taken: the other instances' leases are
 *   marked `recall` (give back what no request holds) and their total comes back, so the caller can
 *   wait for them before refusing. Result `[x, used + pending, granted, others' leased, used +
 *   pending without the leases]` (the last is what a reader of the balance sees; equal to the second
 *   when refused).
 * - `draw` `{i: request id, l: lease id, n, t: api type}`: a request's charge, durable: a committed
 *   hold row for the request (its ledger line, refundable later like any committed hold) and `n`
 *   moved from the lease to `used`. Result `true`/`false` (the lease is recalled), `"exists"`, or
 *   `"expired"` when the lease is gone (released by the reaper while this instance was cut off).
 * - `shrink` `{i: lease id, n}`: gives `n` back (the lease's unheld credits); `n` = `"all"` ends the
 *   lease (released, `charged` 0). Result: what was given back.
 *
 * Lease rows are locked at first touch and written once per batch, like the balance rows of
 * version 3, so a batch of many draws on one lease makes one row version, not one per draw. The
 * function is version 3's text (never edited: it is an applied migration) with the lease parts
 * spliced in at fixed places; a place that cannot be found fails at load, not at migration.
 */
import type { Migration } from './migrations.ts'
import { V3_APPLY } from './tollgate-apply-v3.ts'

const COLUMNS = `
ALTER TABLE credit_holds ADD COLUMN recall boolean NOT NULL DEFAULT false;
CREATE INDEX credit_holds_pending_leases ON credit_holds (project_id, period) WHERE state = 'pending' AND api_type = 'lease';
`

const DECLARE = `
  -- Lease rows this batch touched: locked at first touch, written once at the end.
  l_id text[] := '{}';
  l_project text[] := '{}';
  l_period text[] := '{}';
  l_charged numeric[] := '{}';
  l_recall boolean[] := '{}';
  l_ended boolean[] := '{}';
  l_dirty boolean[] := '{}';
  lid text;
  j integer;
  x numeric;
  lp text;
  le text;
  lc numeric;
  lr boolean;
  i2 integer;
  lx numeric;
`

/** Appends lease `lid` (its project, period, charged and recall given as SQL expressions) to the batch's cache. */
function cacheLease(project: string, period: string, charged: string, recall: string, indent: string): string {
  return [
    `l_id := array_append(l_id, lid);`,
    `l_project := array_append(l_project, ${project});`,
    `l_period := array_append(l_period, ${period});`,
    `l_charged := array_append(l_charged, ${charged});`,
    `l_recall := array_append(l_recall, ${recall});`,
    `l_ended := array_append(l_ended, false);`,
    `l_dirty := array_append(l_dirty, false);`,
  ]
    .map((line) => indent + line)
    .join('\n')
}

/** Finds lease `lid` of this owner in the batch's cache, locking and caching it at first touch; `j` is NULL when it is not a live lease. */
const FIND_LEASE = `
      j := array_position(l_id, lid);
      IF j IS NULL THEN
        SELECT project_id, period, charged, recall INTO lp, le, lc, lr FROM credit_holds
        WHERE id = lid AND state = 'pending' AND owner = owner_id AND api_type = 'lease' FOR UPDATE;
        IF FOUND THEN
${cacheLease('lp', 'le', 'lc', 'lr', '          ')}
          j := array_length(l_id, 1);
        END IF;
      ELSIF l_ended[j] THEN
        j := NULL;
      END IF;`

/** Locks and caches the balance row of (p, e) at first touch, as version 3 does; sets `k`. */
const FIND_BALANCE = `
      k := array_position(b_key, p || chr(31) || e);
      IF k IS NULL THEN
        INSERT INTO credit_balances (project_id, period, used, pending) VALUES (p, e, 0, 0) ON CONFLICT (project_id, period) DO NOTHING;
        SELECT used, pending, granted INTO u, pe, g FROM credit_balances WHERE project_id = p AND period = e FOR UPDATE;
        b_key := array_append(b_key, p || chr(31) || e);
        b_project := array_append(b_project, p);
        b_period := array_append(b_period, e);
        b_used := array_append(b_used, u);
        b_pending := array_append(b_pending, pe);
        b_granted := array_append(b_granted, g);
        b_dirty := array_append(b_dirty, false);
        k := array_length(b_key, 1);
      END IF;`

const OPS = `
    ELSIF kind = 'lease' THEN
      p := op->>'p';
      e := op->>'e';
      n := (op->>'n')::numeric;
      m := (op->>'m')::numeric;
      lid := hold_id;
${FIND_BALANCE}
      -- What is left of the period: a lease takes at most an eighth of it, at least what is needed.
      x := (op->>'a')::numeric + b_granted[k] - b_used[k] - b_pending[k];
      IF x >= m THEN
        x := least(x, greatest(m, least(n, floor(x / 8))));
${FIND_LEASE}
        IF j IS NOT NULL THEN
          l_charged[j] := l_charged[j] + x;
          l_recall[j] := false;
          l_dirty[j] := true;
          res := jsonb_build_array(x, b_used[k] + b_pending[k] + x, b_granted[k], 0);
        ELSE
          INSERT INTO credit_holds (id, project_id, period, api_type, amount, charged, state, owner)
          VALUES (lid, p, e, 'lease', x, x, 'pending', owner_id)
          ON CONFLICT (id) DO NOTHING;
          IF FOUND THEN
${cacheLease('p', 'e', 'x', 'false', '            ')}
            res := jsonb_build_array(x, b_used[k] + b_pending[k] + x, b_granted[k], 0);
          ELSE
            -- The id names a lease that was ended or reaped: the caller starts a new one.
            x := 0;
            res := '"expired"';
          END IF;
        END IF;
        b_pending[k] := b_pending[k] + x;
        b_dirty[k] := true;
        -- The period as a reader sees it: without the credits leases hold (this batch's copies of cached ones).
        SELECT coalesce(sum(charged), 0) INTO lx FROM credit_holds
        WHERE project_id = p AND period = e AND state = 'pending' AND api_type = 'lease' AND NOT (id = ANY (l_id));
        FOR i2 IN 1 .. coalesce(array_length(l_id, 1), 0) LOOP
          IF l_project[i2] = p AND l_period[i2] = e AND NOT l_ended[i2] THEN
            lx := lx + l_charged[i2];
          END IF;
        END LOOP;
        IF jsonb_typeof(res) = 'array' THEN
          res := res || jsonb_build_array(b_used[k] + b_pending[k] - lx);
        END IF;
      ELSIF m > 0 THEN
        UPDATE credit_holds SET recall = true
        WHERE project_id = p AND period = e AND state = 'pending' AND api_type = 'lease' AND owner <> owner_id AND charged > 0 AND NOT recall;
        SELECT coalesce(sum(charged), 0) INTO x FROM credit_holds
        WHERE project_id = p AND period = e AND state = 'pending' AND api_type = 'lease' AND owner <> owner_id;
        res := jsonb_build_array(0, b_used[k] + b_pending[k], b_granted[k], x, b_used[k] + b_pending[k]);
      ELSE
        res := jsonb_build_array(0, b_used[k] + b_pending[k], b_granted[k], 0, b_used[k] + b_pending[k]);
      END IF;
    ELSIF kind = 'draw' THEN
      durable := true;
      n := (op->>'n')::numeric;
      lid := op->>'l';
${FIND_LEASE}
      IF j IS NULL OR l_charged[j] < n THEN
        res := '"expired"';
      ELSE
        INSERT INTO credit_holds (id, project_id, period, api_type, amount, charged, state, owner, settled_at)
        VALUES (hold_id, l_project[j], l_period[j], op->>'t', n, n, 'committed', owner_id, now())
        ON CONFLICT (id) DO NOTHING;
        IF NOT FOUND THEN
          res := '"exists"';
        ELSE
          p := l_project[j];
          e := l_period[j];
${FIND_BALANCE}
          l_charged[j] := l_charged[j] - n;
          l_dirty[j] := true;
          b_pending[k] := b_pending[k] - n;
          b_used[k] := b_used[k] + n;
          b_dirty[k] := true;
          res := to_jsonb(l_recall[j]);
        END IF;
      END IF;
    ELSIF kind = 'shrink' THEN
      lid := hold_id;
${FIND_LEASE}
      IF j IS NULL THEN
        res := '0';
      ELSE
        IF op->>'n' = 'all' THEN
          x := l_charged[j];
          l_ended[j] := true;
        ELSE
          x := least((op->>'n')::numeric, l_charged[j]);
        END IF;
        p := l_project[j];
        e := l_period[j];
${FIND_BALANCE}
        l_charged[j] := l_charged[j] - x;
        l_recall[j] := false;
        l_dirty[j] := true;
        b_pending[k] := b_pending[k] - x;
        b_dirty[k] := true;
        res := to_jsonb(x);
      END IF;
    ELSIF kind = 'doc-insert' THEN`

const WRITE_LEASES = `  FOR j IN 1 .. coalesce(array_length(l_id, 1), 0) LOOP
    IF l_dirty[j] THEN
      IF l_ended[j] THEN
        UPDATE credit_holds SET charged = 0, recall = false, state = 'released', settled_at = now() WHERE id = l_id[j];
      ELSE
        UPDATE credit_holds SET charged = l_charged[j], recall = l_recall[j] WHERE id = l_id[j];
      END IF;
    END IF;
  END LOOP;
  FOR k IN 1 .. coalesce(array_length(b_key, 1), 0) LOOP`

/** Replaces the one occurrence of `marker` in `text`; throws when there is not exactly one. */
function splice(text: string, marker: string, replacement: string): string {
  const at = text.indexOf(marker)
  if (at < 0 || text.indexOf(marker, at + 1) >= 0) throw new Error(`credit-leases migration: marker not found exactly once: ${marker.trim().slice(0, 60)}`)
  return text.slice(0, at) + replacement + text.slice(at + marker.length)
}

let apply = V3_APPLY
apply = splice(apply, '\nDECLARE\n', '\nDECLARE\n' + DECLARE.trimStart())
apply = splice(apply, "    ELSIF kind = 'doc-insert' THEN", OPS.replace(/^\n/, ''))
apply = splice(apply, '  FOR k IN 1 .. coalesce(array_length(b_key, 1), 0) LOOP', WRITE_LEASES)

/** Migration 4's `tollgate_apply` text: migration 5 (lock-order-migration.ts) is built from it. */
export const V4_APPLY = apply

export const creditLeasesMigration: Migration = {
  version: 4,
  name: 'credit leases: lease, draw and shrink ops',
  sql: COLUMNS + apply,
}
