/**
 * Version 3 of `tollgate_apply` (core migration 3), kept in a module of its own because migration 4
 * (credit-leases-migration.ts) is built from its text. An applied migration: never edit it.
 */
// Version 3 of tollgate_apply (migration 2 added grants), same ops and results as version 2. Measured on the bench VM (one project, batches
// of reserves + commits): v1 spent 48 µs of PostgreSQL CPU per op at 50 ops per batch and 75 µs at
// 200, because every op updated the period's balance row again, and in one transaction each update
// of a row adds a version that the next one walks past. v2 locks each balance row once per batch
// (first touch), keeps used/pending in variables and writes each touched row once at the end:
// 32 and 24 µs per op. The row locks are held to COMMIT as before, so the order of concurrent
// batches and the no-overspend rule are unchanged. The results are collected in an array instead
// of re-copying a growing jsonb value per op.
export const V3_APPLY = `
CREATE OR REPLACE FUNCTION tollgate_apply(ops jsonb, owner_id text) RETURNS jsonb LANGUAGE plpgsql AS $fn$
DECLARE
  op jsonb;
  kind text;
  results jsonb[] := '{}';
  res jsonb;
  durable boolean := false;
  hold_id text;
  p text;
  e text;
  n numeric;
  m numeric;
  h record;
  held boolean;
  k integer;
  u numeric;
  pe numeric;
  -- Balance rows this batch touched: locked at first touch, written once at the end.
  b_key text[] := '{}';
  b_project text[] := '{}';
  b_period text[] := '{}';
  b_used numeric[] := '{}';
  b_pending numeric[] := '{}';
  b_granted numeric[] := '{}';
  b_dirty boolean[] := '{}';
  g numeric;
BEGIN
  -- A reaper may have dropped this instance while it could not reach us: it is alive again.
  IF NOT EXISTS (SELECT 1 FROM tollgate_instances WHERE id = owner_id) THEN
    INSERT INTO tollgate_instances (id) VALUES (owner_id) ON CONFLICT (id) DO UPDATE SET seen_at = now();
  END IF;
  FOR op IN SELECT value FROM jsonb_array_elements(ops) LOOP
    kind := op->>'o';
    hold_id := op->>'i';
    IF kind = 'reserve' THEN
      p := op->>'p';
      e := op->>'e';
      n := (op->>'n')::numeric;
      k := array_position(b_key, p || chr(31) || e);
      IF k IS NULL THEN
        g := coalesce((SELECT granted FROM credit_balances WHERE project_id = p AND period = e), 0);
        IF n <= (op->>'a')::numeric + g THEN
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
        END IF;
      END IF;
      IF k IS NULL THEN
        -- More than the whole allocation and grants, in a period this batch has not locked: refused, nothing written.
        IF EXISTS (SELECT 1 FROM credit_holds WHERE id = hold_id) THEN
          res := '"exists"';
        ELSE
          SELECT used + pending INTO u FROM credit_balances WHERE project_id = p AND period = e;
          res := jsonb_build_array(false, coalesce(u, 0), g);
        END IF;
      ELSE
        INSERT INTO credit_holds (id, project_id, period, api_type, amount, charged, state, owner)
        SELECT hold_id, p, e, op->>'t', n, n, 'pending', owner_id
        WHERE b_used[k] + b_pending[k] + n <= (op->>'a')::numeric + b_granted[k]
        ON CONFLICT (id) DO NOTHING;
        IF FOUND THEN
          b_pending[k] := b_pending[k] + n;
          b_dirty[k] := true;
          res := jsonb_build_array(true, b_used[k] + b_pending[k], b_granted[k]);
        ELSIF EXISTS (SELECT 1 FROM credit_holds WHERE id = hold_id) THEN
          res := '"exists"';
        ELSE
          res := jsonb_build_array(false, b_used[k] + b_pending[k], b_granted[k]);
        END IF;
      END IF;
    ELSIF kind = 'commit' OR kind = 'release' OR kind = 'refund' THEN
      durable := true;
      IF kind = 'commit' THEN
        -- The common case in one statement: a pending hold becomes committed.
        UPDATE credit_holds SET state = 'committed', settled_at = now() WHERE id = hold_id AND state = 'pending'
        RETURNING 'pending'::text AS state, charged, project_id, period INTO h;
        held := FOUND;
        IF NOT held THEN
          SELECT state, charged, project_id, period INTO h FROM credit_holds WHERE id = hold_id;
          held := FOUND;
        END IF;
      ELSE
        SELECT state, charged, project_id, period INTO h FROM credit_holds WHERE id = hold_id FOR UPDATE;
        held := FOUND;
      END IF;
      IF held THEN
        k := array_position(b_key, h.project_id || chr(31) || h.period);
        IF k IS NULL THEN
          SELECT used, pending, granted INTO u, pe, g FROM credit_balances WHERE project_id = h.project_id AND period = h.period FOR UPDATE;
          b_key := array_append(b_key, h.project_id || chr(31) || h.period);
          b_project := array_append(b_project, h.project_id);
          b_period := array_append(b_period, h.period);
          b_used := array_append(b_used, u);
          b_pending := array_append(b_pending, pe);
          b_granted := array_append(b_granted, g);
          b_dirty := array_append(b_dirty, false);
          k := array_length(b_key, 1);
        END IF;
      END IF;
      IF kind = 'commit' THEN
        IF NOT held THEN
          res := '"missing"';
        ELSIF h.state = 'pending' THEN
          b_pending[k] := b_pending[k] - h.charged;
          b_used[k] := b_used[k] + h.charged;
          b_dirty[k] := true;
          res := '"ok"';
        ELSE
          res := to_jsonb(h.state);
        END IF;
      ELSIF kind = 'release' THEN
        IF NOT held THEN
          res := '"missing"';
        ELSIF h.state <> 'released' THEN
          UPDATE credit_holds SET state = 'released', charged = 0, settled_at = now() WHERE id = hold_id;
          IF h.state = 'pending' THEN
            b_pending[k] := b_pending[k] - h.charged;
          ELSE
            b_used[k] := b_used[k] - h.charged;
          END IF;
          b_dirty[k] := true;
          res := to_jsonb(h.state);
        ELSE
          res := '"released"';
        END IF;
      ELSE
        m := 0;
        IF held AND h.state <> 'released' THEN
          m := least((op->>'n')::numeric, h.charged);
          IF m > 0 THEN
            UPDATE credit_holds SET charged = charged - m WHERE id = hold_id;
            IF h.state = 'pending' THEN
              b_pending[k] := b_pending[k] - m;
            ELSE
              b_used[k] := b_used[k] - m;
            END IF;
            b_dirty[k] := true;
          END IF;
        END IF;
        res := to_jsonb(m);
      END IF;
    ELSIF kind = 'grant' THEN
      durable := true;
      p := op->>'p';
      e := op->>'e';
      n := (op->>'n')::numeric;
      INSERT INTO credit_grants (id, project_id, period, amount, reason, actor)
      VALUES (hold_id, p, e, n, op->>'r', op->>'w')
      ON CONFLICT (id) DO NOTHING;
      IF FOUND THEN
        k := array_position(b_key, p || chr(31) || e);
        IF k IS NULL THEN
          INSERT INTO credit_balances AS b (project_id, period, used, pending, granted) VALUES (p, e, 0, 0, n)
          ON CONFLICT (project_id, period) DO UPDATE SET granted = b.granted + excluded.granted
          RETURNING jsonb_build_array(true, b.project_id, b.period, b.used + b.pending, b.granted) INTO res;
        ELSE
          -- The row is locked by this batch and its used/pending are written at the end: move granted
          -- now (the end writes only used and pending) and in the batch's copy, for later reserves.
          UPDATE credit_balances SET granted = granted + n WHERE project_id = p AND period = e;
          b_granted[k] := b_granted[k] + n;
          res := jsonb_build_array(true, p, e, b_used[k] + b_pending[k], b_granted[k]);
        END IF;
      ELSE
        SELECT jsonb_build_array(false, gr.project_id, gr.period, coalesce(b.used + b.pending, 0), coalesce(b.granted, 0)) INTO res
        FROM credit_grants gr LEFT JOIN credit_balances b ON b.project_id = gr.project_id AND b.period = gr.period
        WHERE gr.id = hold_id;
        k := array_position(b_key, (res->>1) || chr(31) || (res->>2));
        IF k IS NOT NULL THEN
          res := jsonb_build_array(false, res->1, res->2, b_used[k] + b_pending[k], b_granted[k]);
        END IF;
      END IF;
    ELSIF kind = 'doc-insert' THEN
      durable := true;
      INSERT INTO documents (collection, key, owner, doc, created_at, updated_at)
      VALUES (op->>'c', op->>'k', op->>'w', op->>'d', (op->>'t')::bigint, (op->>'t')::bigint)
      ON CONFLICT (collection, key) DO NOTHING;
      IF FOUND THEN
        res := '[true]'::jsonb;
      ELSE
        SELECT jsonb_build_array(false, owner, doc, created_at, updated_at) INTO res
        FROM documents WHERE collection = op->>'c' AND key = op->>'k';
      END IF;
    ELSIF kind = 'doc-update' THEN
      durable := true;
      UPDATE documents SET doc = op->>'d', updated_at = (op->>'t')::bigint WHERE collection = op->>'c' AND key = op->>'k';
      res := to_jsonb(FOUND);
    ELSIF kind = 'doc-delete' THEN
      durable := true;
      DELETE FROM documents WHERE collection = op->>'c' AND key = op->>'k';
      res := to_jsonb(FOUND);
    ELSE
      RAISE EXCEPTION 'tollgate_apply: unknown op %', kind;
    END IF;
    results := array_append(results, res);
  END LOOP;
  FOR k IN 1 .. coalesce(array_length(b_key, 1), 0) LOOP
    IF b_dirty[k] THEN
      UPDATE credit_balances SET used = b_used[k], pending = b_pending[k] WHERE project_id = b_project[k] AND period = b_period[k];
    END IF;
  END LOOP;
  IF NOT durable THEN
    PERFORM set_config('synchronous_commit', 'off', true);
  END IF;
  RETURN to_jsonb(results);
END
$fn$;
`
