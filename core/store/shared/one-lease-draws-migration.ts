/**
 * Migration 10 of the shared engine's core tables: A BATCH OF DRAWS ON ONE LEASE IN FEW, SMALL
 * STATEMENTS (issue 26, PostgreSQL's fixed cost per batch).
 *
 * Where version 8's batch cost went (version 9 left a draw batch's path as it was; callgrind on a
 * backend of a private cluster, instructions of one call of 4 draws on one lease, the gateway's
 * common batch; bench/RESULTS.md, session 13):
 * 1.30M in all, of which the set-based statement 780k (executor start of ~30 plan nodes: five
 * aggregates, two hash joins, five CTEs; the CHECK constraint of `credit_holds` read back from its
 * catalog text), the lease lookup (a cursor over a query with two sub-selects and a sort, then the
 * FOR SHARE) 165k, the function's start 110k, of which ~35k cast the untyped literals of its
 * DECLARE (`'{}'` to an array type through its text input, per call).
 *
 * This version (version 9's text, own-draw-settle-lock-migration.ts, with the changes below)
 * changes how, not what:
 *
 * - Every untyped literal of the function is typed (`'{}'::text[]`, `'"exists"'::jsonb`): the
 *   literal is then a constant of its type, planned once, instead of text parsed on every call.
 * - A batch of two or more ops, all draws naming one lease, takes a short path before the lease
 *   loop: the lease row FOR SHARE in one statement (only the caller's pending lease, as the loop
 *   locks it), its unfolded sum and recall as before, then ONE statement with three small CTEs
 *   (the check, the ledger rows, the one `credit_draws` row) that answers every draw.
 *
 * WHY THE ANSWERS AND CHARGES ARE THOSE OF VERSION 8: the short path inserts anything only when
 * version 8's set-based path would have taken every op of the batch (set-draws-migration.ts): every
 * op is a draw on that one share-locked lease, with a positive amount, the op ids are distinct, and
 * the sum of the amounts is at most what the lease had left at the lock. It then writes the same
 * rows (a ledger row per new id, one `credit_draws` row of the sum of the inserted ones) and gives
 * the same answers (`exists` for an id already in the ledger, else the lease's recall mark). When
 * the check fails it has written nothing, forgets what it read, and the batch goes through version
 * 8's path unchanged (lease loop, set-based statement, op loop), which locks the same lease again
 * (a lock it holds). A batch of one draw keeps version 8's op loop: two one-row INSERTs cost less
 * than the short path's statement (measured 285k against 364k instructions).
 *
 * THE LOCK ORDER (lock-order-migration.ts) is unchanged: step 1 (the instance check) first, no
 * balance row (a batch of draws locks none, as in version 8), then step 3: the one lease row, then
 * new ledger rows of the caller's own instance.
 */
import type { Migration } from './migrations.ts'
import { splice } from './append-draws-migration.ts'
import { NO_SEQSCAN } from './draw-fold-mark-migration.ts'
import { V9_APPLY } from './own-draw-settle-lock-migration.ts'

/**
 * `text` with every untyped literal assignment of `tollgate_apply` typed: array defaults and resets
 * (`x t[] := '{}'`), and the jsonb answers (`res := '"exists"'`). Throws when the count differs from
 * what version 9's text holds, so a change of that text cannot silently leave one untyped.
 */
export function typeLiterals(text: string, expected: number): string {
  let count = 0
  const typed = text
    .replace(/^(\s+)(\w+) (\w+\[\]) := '\{\}';$/gm, (_all, indent: string, name: string, type: string) => {
      count++
      return `${indent}${name} ${type} := '{}'::${type};`
    })
    .replace(/^(\s+)(lock_projects|lock_periods) := '\{\}';$/gm, (_all, indent: string, name: string) => {
      count++
      return `${indent}${name} := '{}'::text[];`
    })
    .replace(/^(\s+)res := ('[^']*');$/gm, (_all, indent: string, literal: string) => {
      count++
      return `${indent}res := ${literal}::jsonb;`
    })
  if (count !== expected) throw new Error(`one-lease-draws migration: typed ${count} literals, expected ${expected}`)
  return typed
}

const DECLARE = `
  -- The batch is only draws (no balance row to lock), and the one lease they all name.
  draws_only boolean;
  one_lease text;
`

const DRAWS_ONLY_V8 = `  IF NOT jsonb_path_exists(ops, '$[*] ? (@.o != "draw")') THEN`

// Before version 8's lease loop. `lp, le, lc, lr, lf, dx` are the loop's own scratch variables,
// each assigned before it is read there, so the short path may use them.
const ONE_LEASE_DRAWS = `
  IF draws_only AND jsonb_array_length(ops) >= 2 THEN
    one_lease := ops->0->>'l';
    IF one_lease IS NOT NULL AND NOT jsonb_path_exists(ops, '$[*] ? (@.l != $l)', jsonb_build_object('l', one_lease)) THEN
      SELECT project_id, period, charged, recall, folded_through INTO lp, le, lc, lr, lf FROM credit_holds
      WHERE id = one_lease AND owner = owner_id AND api_type = 'lease' AND state = 'pending' FOR SHARE;
      IF FOUND THEN
        -- What the lease has left (its unfolded draws counted) and whether it is recalled, as the loop reads them.
        dx := lc - coalesce((SELECT sum(fd.amount) FROM credit_draws fd WHERE fd.lease_id = one_lease AND fd.id > lf), 0);
        lr := lr OR EXISTS (SELECT 1 FROM credit_recalls WHERE lease_id = one_lease);
        WITH g AS (
          -- Version 8's conditions for taking every op set-based (see the top of this migration).
          SELECT count(*) = count(DISTINCT g.jo->>'i')
            AND bool_and(coalesce(g.jo->>'l' = one_lease AND (g.jo->>'n')::numeric > 0, false))
            AND sum((g.jo->>'n')::numeric) <= dx AS ok
          FROM jsonb_array_elements(ops) AS g(jo)
        ), ledger AS (
          INSERT INTO credit_holds (id, project_id, period, api_type, amount, charged, state, owner, settled_at)
          SELECT x.jo->>'i', lp, le, x.jo->>'t', (x.jo->>'n')::numeric, (x.jo->>'n')::numeric, 'committed', owner_id, now()
          FROM jsonb_array_elements(ops) WITH ORDINALITY AS x(jo, ord)
          WHERE (SELECT ok FROM g)
          ORDER BY x.ord
          ON CONFLICT (id) DO NOTHING
          RETURNING id, amount
        ), drawn AS (
          INSERT INTO credit_draws (lease_id, amount) SELECT one_lease, sum(ledger.amount) FROM ledger HAVING count(*) > 0
        )
        SELECT array_agg(CASE WHEN x.jo->>'i' = ANY (ARRAY(SELECT ledger.id FROM ledger)) THEN to_jsonb(lr) ELSE '"exists"'::jsonb END ORDER BY x.ord)
        INTO pre
        FROM jsonb_array_elements(ops) WITH ORDINALITY AS x(jo, ord)
        WHERE (SELECT ok FROM g);
        IF pre IS NOT NULL THEN
          RETURN to_jsonb(pre);
        END IF;
        -- Not taken: nothing was written; version 8's path (unchanged in 9) runs from its lease loop.
        pre := '{}'::jsonb[];
      END IF;
    END IF;
  END IF;
  FOR lock_lease IN
`

let apply = typeLiterals(V9_APPLY, 37)
apply = splice(apply, '\nDECLARE\n', '\nDECLARE\n' + DECLARE.trimStart())
apply = splice(apply, DRAWS_ONLY_V8, `  draws_only := NOT jsonb_path_exists(ops, '$[*] ? (@.o != "draw")');\n  IF draws_only THEN`)
apply = splice(apply, '\n  FOR lock_lease IN\n', ONE_LEASE_DRAWS)

/** Version 10 of `tollgate_apply`: version 9 with typed literals and the one-lease draw batch's short path. */
export const V10_APPLY = apply

export const oneLeaseDrawsMigration: Migration = {
  version: 10,
  name: 'tollgate_apply: typed literals; a batch of draws on one lease in one lock statement and one write statement',
  // CREATE OR REPLACE resets the function's settings: sequential scans are turned off again.
  sql: V10_APPLY + NO_SEQSCAN,
}
