/**
 * Migration 2 of the shared engine's core tables: credit grants.
 *
 * - `credit_grants`: one row per grant id (top-ups, x402 payments); the primary key makes a grant
 *   idempotent across every instance (a concurrent insert of the same id waits for the first and
 *   then does nothing).
 * - `credit_balances.granted`: the sum of a period's grants, so a reservation passes when
 *   `used + pending + amount <= allocation + granted`, still one conditional upsert on the row.
 * - `tollgate_apply` is replaced (never edited in migration 1): `reserve` admits against the grants
 *   and returns them, and a new `grant` op inserts the grant and moves `granted` in the batch's
 *   transaction (durable: such a batch waits for the WAL flush).
 */
import type { Migration } from './migrations.ts'

const TABLES = `
CREATE TABLE credit_grants (
  id text PRIMARY KEY,
  project_id text NOT NULL,
  period text NOT NULL,
  amount numeric NOT NULL CHECK (amount > 0),
  reason text NOT NULL,
  actor text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX credit_grants_by_period ON credit_grants (project_id, period, created_at);
ALTER TABLE credit_balances ADD COLUMN granted numeric NOT NULL DEFAULT 0;
`

const APPLY = `
CREATE OR REPLACE FUNCTION tollgate_apply(ops jsonb, owner_id text) RETURNS jsonb LANGUAGE plpgsql AS $fn$
DECLARE
  op jsonb;
  kind text;
  results jsonb := '[]'::jsonb;
  res jsonb;
  durable boolean := false;
  u numeric;
  g numeric;
  n numeric;
  m numeric;
  st text;
  h record;
BEGIN
  -- A reaper may have dropped this instance while it could not reach us: it is alive again.
  IF NOT EXISTS (SELECT 1 FROM tollgate_instances WHERE id = owner_id) THEN
    INSERT INTO tollgate_instances (id) VALUES (owner_id) ON CONFLICT (id) DO UPDATE SET seen_at = now();
  END IF;
  FOR op IN SELECT value FROM jsonb_array_elements(ops) LOOP
    kind := op->>'o';
    IF kind = 'reserve' THEN
      IF EXISTS (SELECT 1 FROM credit_holds WHERE id = op->>'i') THEN
        res := '"exists"';
      ELSE
        n := (op->>'n')::numeric;
        u := NULL;
        -- The grants are read only when the allocation alone cannot cover the amount (the usual
        -- reserve skips that lookup). A period without a row has no grants: a new row holds at
        -- most the allocation.
        g := 0;
        IF n > (op->>'a')::numeric THEN
          g := coalesce((SELECT granted FROM credit_balances WHERE project_id = op->>'p' AND period = op->>'e'), 0);
        END IF;
        IF n <= (op->>'a')::numeric + g THEN
          INSERT INTO credit_balances AS b (project_id, period, used, pending) VALUES (op->>'p', op->>'e', 0, n)
          ON CONFLICT (project_id, period) DO UPDATE SET pending = b.pending + excluded.pending
            WHERE b.used + b.pending + excluded.pending <= (op->>'a')::numeric + b.granted
          RETURNING b.used + b.pending, b.granted INTO u, g;
        END IF;
        IF u IS NULL THEN
          SELECT used + pending, granted INTO u, g FROM credit_balances WHERE project_id = op->>'p' AND period = op->>'e';
          res := jsonb_build_array(false, coalesce(u, 0), coalesce(g, 0));
        ELSE
          INSERT INTO credit_holds (id, project_id, period, api_type, amount, charged, state, owner)
          VALUES (op->>'i', op->>'p', op->>'e', op->>'t', n, n, 'pending', owner_id);
          res := jsonb_build_array(true, u, g);
        END IF;
      END IF;
    ELSIF kind = 'commit' THEN
      durable := true;
      UPDATE credit_holds SET state = 'committed', settled_at = now()
      WHERE id = op->>'i' AND state = 'pending'
      RETURNING project_id, period, charged INTO h;
      IF FOUND THEN
        UPDATE credit_balances SET pending = pending - h.charged, used = used + h.charged
        WHERE project_id = h.project_id AND period = h.period;
        res := '"ok"';
      ELSE
        SELECT state INTO st FROM credit_holds WHERE id = op->>'i';
        res := to_jsonb(coalesce(st, 'missing'));
      END IF;
    ELSIF kind = 'release' THEN
      durable := true;
      SELECT state, charged, project_id, period INTO h FROM credit_holds WHERE id = op->>'i' FOR UPDATE;
      IF NOT FOUND THEN
        res := '"missing"';
      ELSIF h.state <> 'released' THEN
        UPDATE credit_holds SET state = 'released', charged = 0, settled_at = now() WHERE id = op->>'i';
        IF h.state = 'pending' THEN
          UPDATE credit_balances SET pending = pending - h.charged WHERE project_id = h.project_id AND period = h.period;
        ELSE
          UPDATE credit_balances SET used = used - h.charged WHERE project_id = h.project_id AND period = h.period;
        END IF;
        res := to_jsonb(h.state);
      ELSE
        res := '"released"';
      END IF;
    ELSIF kind = 'refund' THEN
      durable := true;
      SELECT state, charged, project_id, period INTO h FROM credit_holds WHERE id = op->>'i' FOR UPDATE;
      m := 0;
      IF FOUND AND h.state <> 'released' THEN
        m := least((op->>'n')::numeric, h.charged);
        IF m > 0 THEN
          UPDATE credit_holds SET charged = charged - m WHERE id = op->>'i';
          IF h.state = 'pending' THEN
            UPDATE credit_balances SET pending = pending - m WHERE project_id = h.project_id AND period = h.period;
          ELSE
            UPDATE credit_balances SET used = used - m WHERE project_id = h.project_id AND period = h.period;
          END IF;
        END IF;
      END IF;
      res := to_jsonb(m);
    ELSIF kind = 'grant' THEN
      durable := true;
      INSERT INTO credit_grants (id, project_id, period, amount, reason, actor)
      VALUES (op->>'i', op->>'p', op->>'e', (op->>'n')::numeric, op->>'r', op->>'w')
      ON CONFLICT (id) DO NOTHING;
      IF FOUND THEN
        INSERT INTO credit_balances AS b (project_id, period, used, pending, granted) VALUES (op->>'p', op->>'e', 0, 0, (op->>'n')::numeric)
        ON CONFLICT (project_id, period) DO UPDATE SET granted = b.granted + excluded.granted
        RETURNING jsonb_build_array(true, b.project_id, b.period, b.used + b.pending, b.granted) INTO res;
      ELSE
        SELECT jsonb_build_array(false, gr.project_id, gr.period, coalesce(b.used + b.pending, 0), coalesce(b.granted, 0)) INTO res
        FROM credit_grants gr LEFT JOIN credit_balances b ON b.project_id = gr.project_id AND b.period = gr.period
        WHERE gr.id = op->>'i';
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
    results := results || jsonb_build_array(res);
  END LOOP;
  IF NOT durable THEN
    PERFORM set_config('synchronous_commit', 'off', true);
  END IF;
  RETURN results;
END
$fn$;
`

export const creditGrantsMigration: Migration = { version: 2, name: 'credit grants', sql: TABLES + APPLY }
