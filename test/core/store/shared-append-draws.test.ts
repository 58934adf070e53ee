/**
 * Append-only draws (core migration 6, core/store/shared/append-draws-migration.ts) and several
 * batches of one instance in flight (core/store/shared/pg.ts), on a real PostgreSQL:
 *
 * - two draw batches of one instance on one lease run side by side: neither waits for the other's
 *   COMMIT (the version-5 draw held the lease and balance rows to COMMIT, so the second waited);
 * - the fold: unfolded draws count in every reader, a refund before the fold and the fold commute,
 *   a shrink of 0 folds, and the reaper folds a dead instance's draws as it releases its lease;
 * - exact at the boundary with batches in flight side by side: N concurrent requests on two
 *   instances against a balance of B serve exactly B, and the ledger and the balance row agree.
 */
import t, { type Test } from 'tap'
import pg from 'pg'
import { randomUUID } from 'node:crypto'
import { coreMigrations, openSharedStore, type SharedStore } from '../../../core/store/shared/index.ts'
import { freshPrefix, freshSchema, needServers, PG_URL, REDIS_URL, sql, schemaAtCoreVersion } from '../../helpers/shared-servers.ts'

type Op = Record<string, string | number>
const P = { p: 'proj', e: '2026-11' }

async function session(t: Test, schema: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: PG_URL, options: `-c search_path="${schema}" -c lock_timeout=1500ms` })
  await client.connect()
  client.on('error', () => {})
  t.teardown(() => client.end().catch(() => {}))
  return client
}

const apply = (client: pg.Client, owner: string, ops: Op[]) =>
  client.query<{ r: unknown[] }>('SELECT tollgate_apply($1::jsonb, $2) AS r', [JSON.stringify(ops), owner]).then((result) => result.rows[0]!.r)

/** The balance as a reader sees it (credits.ts BALANCE_SQL), and the raw row. */
async function balanceOf(schema: string) {
  const [row] = await sql<{ used: number; pending: number; draws: number; leased: number }>(
    schema,
    `SELECT b.used::int, b.pending::int,
       (SELECT coalesce(sum(d.amount), 0)::int FROM credit_draws d) AS draws,
       (SELECT coalesce(sum(l.charged), 0)::int FROM credit_holds l WHERE l.state = 'pending' AND l.api_type = 'lease') AS leased
     FROM credit_balances b WHERE b.project_id = 'proj'`,
  )
  return row!
}

/** Two draw batches of one instance, each held open before COMMIT: the second does not wait for the first. */
async function twoOpenDrawBatches(t: Test, version: number): Promise<string> {
  const schema = await schemaAtCoreVersion(t, version)
  const [a1, a2] = [await session(t, schema), await session(t, schema)]
  await apply(a1, 'A', [{ o: 'lease', i: 'lease-a', ...P, a: 100, n: 50, m: 1 }])
  await a1.query('BEGIN')
  await apply(a1, 'A', [{ o: 'draw', i: 'd1', l: 'lease-a', n: 1, t: 'X' }])
  await a2.query('BEGIN')
  try {
    await apply(a2, 'A', [{ o: 'draw', i: 'd2', l: 'lease-a', n: 1, t: 'X' }])
    return 'ok'
  } catch (error) {
    return (error as { code?: string }).code ?? String(error)
  } finally {
    await a2.query('ROLLBACK').catch(() => {})
    await a1.query('ROLLBACK').catch(() => {})
  }
}

t.test('append-only draws', async (t) => {
  if (!(await needServers(t))) return

  t.test('two draw batches of one instance on one lease are in flight together', async (t) => {
    // 55P03: lock_timeout, i.e. the second batch waited for the first one's row locks.
    t.equal(await twoOpenDrawBatches(t, 5), '55P03', 'core version 5: the second draw batch waits for the first COMMIT')
    t.equal(await twoOpenDrawBatches(t, coreMigrations.migrations.length), 'ok', `core version ${coreMigrations.migrations.length}: it does not`)
  })

  t.test('the fold: readers count unfolded draws; refunds, shrinks and the reaper fold exactly', async (t) => {
    const schema = await schemaAtCoreVersion(t)
    const [a, b, reaper] = [await session(t, schema), await session(t, schema), await session(t, schema)]
    t.same(await apply(a, 'A', [{ o: 'lease', i: 'lease-a', ...P, a: 100, n: 40, m: 1 }]), [[12, 12, 0, 0, 0]], 'a lease of an eighth of 100')
    const draws = Array.from({ length: 5 }, (_, i) => ({ o: 'draw', i: `d${i}`, l: 'lease-a', n: 2, t: 'X' }))
    t.same(await apply(a, 'A', draws.slice(0, 3)), [false, false, false])
    t.same(await apply(b, 'A', draws.slice(3)), [false, false])
    t.same(await balanceOf(schema), { used: 0, pending: 12, draws: 10, leased: 12 }, 'appended: lease and balance rows untouched')
    t.same(await apply(a, 'A', [{ o: 'draw', i: 'too-much', l: 'lease-a', n: 3, t: 'X' }]), ['expired'], 'a draw past what the lease has left is refused')
    // A reader: used + pending - (leased - unfolded) = 10.
    const [read] = await sql<{ used: number }>(schema, `SELECT b.used + b.pending - coalesce((SELECT sum(l.charged - coalesce((SELECT sum(d.amount) FROM credit_draws d WHERE d.lease_id = l.id), 0))
      FROM credit_holds l WHERE l.project_id = b.project_id AND l.period = b.period AND l.state = 'pending' AND l.api_type = 'lease'), 0) AS used FROM credit_balances b`)
    t.equal(Number(read!.used), 10, 'the balance read counts the unfolded draws as used')
    // A refused lease of another instance sees only the 2 idle credits in A's lease.
    const refused = await apply(b, 'B', [{ o: 'lease', i: 'lease-b', ...P, a: 12, n: 40, m: 5 }])
    t.same(refused, [[0, 12, 0, 2, 12]], "B refused: A's lease holds 2 credits no request took (unfolded draws excluded)")
    t.same(await sql(schema, 'SELECT lease_id FROM credit_recalls'), [{ lease_id: 'lease-a' }], "A's lease marked recalled, without waiting for its row")
    t.same(await apply(a, 'A', [{ o: 'draw', i: 'd-after', l: 'lease-a', n: 1, t: 'X' }]), [true], "A's next draw learns of the recall")
    // Refund part of an unfolded draw, then fold with a shrink of 0: the same sums as the other order.
    t.same(await apply(a, 'A', [{ o: 'refund', i: 'd0', n: 1 }]), [1])
    t.same(await apply(a, 'A', [{ o: 'shrink', i: 'lease-a', n: 0 }]), [0], 'a shrink of 0 gives nothing back')
    t.same(await balanceOf(schema), { used: 10, pending: 1, draws: 0, leased: 1 }, 'folded: used 11 drawn - 1 refunded, 1 left in the lease')
    t.same(await sql(schema, 'SELECT lease_id FROM credit_recalls'), [{ lease_id: 'lease-a' }], 'the fold leaves the recall mark')
    t.same(await apply(a, 'A', [{ o: 'shrink', i: 'lease-a', n: 1 }]), [1])
    t.same(await sql(schema, 'SELECT lease_id FROM credit_recalls'), [], 'a shrink that gives back clears it')
    t.same(await sql(schema, "SELECT sum(charged)::int AS s FROM credit_holds WHERE state = 'committed'"), [{ s: 10 }], 'the ledger rows sum to used')

    // The reaper folds a dead instance's draws as it releases its lease.
    t.same(await apply(b, 'D', [{ o: 'lease', i: 'lease-d', ...P, a: 100, n: 40, m: 1 }]), [[11, 21, 0, 0, 10]])
    await apply(b, 'D', [{ o: 'draw', i: 'dd1', l: 'lease-d', n: 4, t: 'X' }, { o: 'draw', i: 'dd2', l: 'lease-d', n: 3, t: 'X' }])
    await b.query("DELETE FROM tollgate_instances WHERE id = 'D'")
    t.same((await reaper.query('SELECT tollgate_reap(10000)::int AS n')).rows, [{ n: 1 }], 'the dead lease released')
    t.same(await balanceOf(schema), { used: 17, pending: 0, draws: 0, leased: 0 }, 'its 7 drawn credits are used, its 4 idle ones back')
  })

  t.test('batches in flight side by side stay exact at the boundary: N requests on B credits serve B', async (t) => {
    const schema = freshSchema(t)
    const keyPrefix = freshPrefix(t)
    const open = async (): Promise<SharedStore> => {
      const store = await openSharedStore({ postgres: PG_URL, redis: REDIS_URL, schema, keyPrefix, poolSize: 8, onBackgroundError: () => {} })
      t.teardown(() => store.close())
      return store
    }
    const [a, b] = await Promise.all([open(), open()])
    const B = 300
    const N = 900
    let served = 0
    let refused = 0
    const one = async (store: SharedStore) => {
      const r = { id: randomUUID(), projectId: 'edge', period: '2026-11', allocation: B, amount: 1, apiType: 'X' }
      if (!(await store.reserveCredits(r)).ok) return void refused++
      // A little upstream time, so that several turns' draws are in flight at once.
      await new Promise((resolve) => setImmediate(resolve))
      await store.commitCredits(r.id)
      served++
    }
    // 60 requests in flight on each instance at any time.
    const queue = Array.from({ length: N }, (_, i) => (i % 2 === 0 ? a : b))
    await Promise.all(Array.from({ length: 120 }, async (_, w) => {
      for (let i = w; i < queue.length; i += 120) await one(queue[i]!)
    }))
    t.equal(served, B, `exactly ${B} of ${N} served`)
    t.equal(refused, N - B, 'the rest refused')
    const peak = Math.max(a.writeStats().peakInFlight, b.writeStats().peakInFlight)
    t.ok(peak > 1, `batches of one instance were in flight side by side (peak ${peak})`)
    await Promise.all([a.idle(), b.idle()])
    t.equal((await a.balance('edge', '2026-11', B)).used, B, 'the balance says all used')
    t.same(await sql(schema, "SELECT sum(charged)::int AS s FROM credit_holds WHERE project_id = 'edge' AND state = 'committed'"), [{ s: B }], 'one ledger row per served request')
    const [row] = await sql<{ used: number; pending: number; draws: number }>(schema, `SELECT used::int, pending::int, (SELECT coalesce(sum(amount), 0)::int FROM credit_draws) AS draws FROM credit_balances WHERE project_id = 'edge'`)
    t.equal(row!.used + row!.draws, B, `used ${row!.used} + unfolded ${row!.draws} = ${B}`)
    t.equal(row!.used + row!.pending, B, 'used + pending = B: nothing more reserved')
  })
})
