/**
 * The core tables of the shared engine and the two functions every instance calls:
 *
 * - `tollgate_apply(ops jsonb, owner text)`: one event-loop turn's writes (credit reserve, commit,
 *   release, partial refund; document insert, update, delete), applied in order in ONE transaction,
 *   one round trip (the group commit). It returns one result per op. A batch that only reserves
 *   commits with `synchronous_commit = off`: a reservation that a PostgreSQL crash loses makes its
 *   commit fail (the client gets 503), so it never needs to wait for the WAL flush; every batch that
 *   charges, refunds or writes a document waits for it.
 * - `tollgate_reap(timeout_ms)`: forgets instances not seen for `timeout_ms` (PostgreSQL's clock, so
 *   instance clocks never matter) and releases the pending holds of instances that are not alive.
 *
 * Balances: `credit_balances.used` is the sum of committed charges, `pending` the sum of pending
 * holds; a reservation passes only when `used + pending + amount <= allocation`, checked and added by
 * one conditional upsert on the period's row, whose row lock orders concurrent batches of every
 * instance. `credit_holds` keeps one row per reservation: the ledger a balance is explained by.
 */
import { creditGrantsMigration } from './credit-grants-migration.ts'
import { creditLeasesMigration } from './credit-leases-migration.ts'
import { lockOrderMigration } from './lock-order-migration.ts'
import { appendDrawsMigration } from './append-draws-migration.ts'
import { drawFoldMarkMigration } from './draw-fold-mark-migration.ts'
import { setDrawsMigration } from './set-draws-migration.ts'
import { ownDrawSettleLockMigration } from './own-draw-settle-lock-migration.ts'
import { oneLeaseDrawsMigration } from './one-lease-draws-migration.ts'
import { oneDrawLockMigration } from './one-draw-lock-migration.ts'
import { lateLockRetryMigration } from './late-lock-retry-migration.ts'
import { drawLockRetryMigration } from './draw-lock-retry-migration.ts'
import { V3_APPLY } from './tollgate-apply-v3.ts'
import type { MigrationSet } from './migrations.ts'

const V1_TABLES = `
CREATE TABLE credit_balances (
  project_id text NOT NULL,
  period text NOT NULL,
  used numeric NOT NULL DEFAULT 0,
  pending numeric NOT NULL DEFAULT 0,
  PRIMARY KEY (project_id, period)
);
CREATE TABLE credit_holds (
  id text PRIMARY KEY,
  project_id text NOT NULL,
  period text NOT NULL,
  api_type text NOT NULL,
  amount numeric NOT NULL,
  charged numeric NOT NULL,
  state text NOT NULL CHECK (state IN ('pending', 'committed', 'released')),
  owner text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  settled_at timestamptz
);
CREATE INDEX credit_holds_pending_by_owner ON credit_holds (owner) WHERE state = 'pending';
CREATE INDEX credit_holds_by_period ON credit_holds (project_id, period);
CREATE TABLE tollgate_instances (
  id text PRIMARY KEY,
  started_at timestamptz NOT NULL DEFAULT now(),
  seen_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE usage_hourly (
  project_id text NOT NULL,
  bucket_ms bigint NOT NULL,
  api_type text NOT NULL,
  requests bigint NOT NULL,
  credits numeric NOT NULL,
  errors bigint NOT NULL,
  PRIMARY KEY (project_id, bucket_ms, api_type)
);
CREATE TABLE documents (
  collection text NOT NULL,
  key text NOT NULL,
  owner text NOT NULL,
  doc text NOT NULL,
  created_at bigint NOT NULL,
  updated_at bigint NOT NULL,
  seq bigserial NOT NULL,
  PRIMARY KEY (collection, key)
);
CREATE INDEX documents_by_owner ON documents (collection, owner, created_at, seq);
`

const V1_FUNCTIONS = `
CREATE FUNCTION tollgate_apply(ops jsonb, owner_id text) RETURNS jsonb LANGUAGE plpgsql AS $fn$
DECLARE
  op jsonb;
  kind text;
  results jsonb := '[]'::jsonb;
  res jsonb;
  durable boolean := false;
  u numeric;
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
        IF n <= (op->>'a')::numeric THEN
          INSERT INTO credit_balances AS b (project_id, period, used, pending) VALUES (op->>'p', op->>'e', 0, n)
          ON CONFLICT (project_id, period) DO UPDATE SET pending = b.pending + excluded.pending
            WHERE b.used + b.pending + excluded.pending <= (op->>'a')::numeric
          RETURNING b.used + b.pending INTO u;
        END IF;
        IF u IS NULL THEN
          SELECT used + pending INTO u FROM credit_balances WHERE project_id = op->>'p' AND period = op->>'e';
          res := jsonb_build_array(false, coalesce(u, 0));
        ELSE
          INSERT INTO credit_holds (id, project_id, period, api_type, amount, charged, state, owner)
          VALUES (op->>'i', op->>'p', op->>'e', op->>'t', n, n, 'pending', owner_id);
          res := jsonb_build_array(true, u);
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

CREATE FUNCTION tollgate_reap(timeout_ms bigint) RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
  released bigint;
BEGIN
  DELETE FROM tollgate_instances WHERE seen_at < now() - timeout_ms * interval '1 millisecond';
  WITH dead AS (
    SELECT id, charged FROM credit_holds h
    WHERE state = 'pending' AND NOT EXISTS (SELECT 1 FROM tollgate_instances i WHERE i.id = h.owner)
    FOR UPDATE SKIP LOCKED
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


/** The shared engine's own tables (module `core`). */
export const coreMigrations: MigrationSet = {
  module: 'core',
  migrations: [
    { version: 1, name: 'credits, usage, documents, instances', sql: V1_TABLES + V1_FUNCTIONS },
    creditGrantsMigration,
    { version: 3, name: 'tollgate_apply: one write per balance row per batch', sql: V3_APPLY },
    creditLeasesMigration,
    lockOrderMigration,
    appendDrawsMigration,
    drawFoldMarkMigration,
    setDrawsMigration,
    ownDrawSettleLockMigration,
    oneLeaseDrawsMigration,
    oneDrawLockMigration,
    lateLockRetryMigration,
    drawLockRetryMigration,
  ],
}
