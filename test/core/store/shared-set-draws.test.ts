/**
 * Core migration 8 (core/store/shared/set-draws-migration.ts) on a real PostgreSQL: a batch's draws
 * taken set-based (one ledger INSERT, one `credit_draws` row per lease) answer, charge and refuse
 * exactly as version 7's draws one by one.
 *
 * Batches of at least SET_DRAWS_MIN_OPS ops (4) take the set-based path when it applies; smaller ones
 * keep version 7's op loop. Two schemas, one at version 7 and one at the latest version, get the same sequence of batches
 * (one instance, the same op ids), and after every batch their answers, their ledgers (every hold's
 * id, state and amount), their balance rows and what each lease has left (charged minus unfolded
 * draws) must be equal. The batches cover what could tell the two apart: draws that fit their lease
 * exactly, one credit past it (version 7 refuses only the draws that no longer fit, in op order, and
 * passes smaller ones after them), re-sent draw ids (`exists`), one id twice in a batch, a draw of
 * 0 credits, a lease marked `recall` by another instance, draws beside a top-up or a shrink of the
 * same lease or of another, draws on an unknown lease, and then a random mix near exhaustion.
 */
import t, { type Test } from 'tap'
import pg from 'pg'
import { coreMigrations } from '../../../core/store/shared/index.ts'
import { needServers, PG_URL, schemaAtCoreVersion } from '../../helpers/shared-servers.ts'

const LATEST = coreMigrations.migrations.length
type Op = Record<string, string | number>

async function migrated(t: Test, version: number): Promise<pg.Client> {
  const schema = await schemaAtCoreVersion(t, version)
  const client = new pg.Client({ connectionString: PG_URL, options: `-c search_path="${schema}"` })
  await client.connect()
  t.teardown(() => client.end().catch(() => {}))
  return client
}

const apply = (client: pg.Client, owner: string, ops: Op[]) =>
  client.query<{ r: unknown[] }>('SELECT tollgate_apply($1::jsonb, $2) AS r', [JSON.stringify(ops), owner]).then((result) => result.rows[0]!.r)

/** Everything a charge or a refusal leaves behind: the ledger, the balances, what each lease has left. */
async function state(client: pg.Client): Promise<unknown> {
  const ledger = await client.query(`SELECT id, state, amount::text, charged::text, api_type, owner FROM credit_holds ORDER BY id`)
  const balances = await client.query(`SELECT project_id, period, used::text, pending::text FROM credit_balances ORDER BY project_id, period`)
  const left = await client.query(`SELECT h.id, (h.charged - coalesce((SELECT sum(d.amount) FROM credit_draws d WHERE d.lease_id = h.id AND d.id > h.folded_through), 0))::text AS left
    FROM credit_holds h WHERE h.api_type = 'lease' ORDER BY h.id`)
  return { ledger: ledger.rows, balances: balances.rows, left: left.rows }
}

/** Sends `ops` to both schemas and checks that the answers and the state after them are equal. */
async function same(t: Test, before: pg.Client, after: pg.Client, ops: Op[], what: string, owner = 'A'): Promise<unknown[]> {
  const expected = await apply(before, owner, ops)
  const got = await apply(after, owner, ops)
  t.same(got, expected, `${what}: the answers of version 7`)
  t.same(await state(after), await state(before), `${what}: the ledger, balances and leases of version 7`)
  return got
}

const draw = (id: string, lease: string, n: number): Op => ({ o: 'draw', i: id, l: lease, n, t: 'X' })

t.test('draws set-based against draws one by one', async (t) => {
  if (!(await needServers(t))) return
  const before = await migrated(t, 7)
  const after = await migrated(t, LATEST)
  const drawRows = async () => Number((await after.query('SELECT count(*) AS n FROM credit_draws')).rows[0].n)

  // Lease a holds 10 credits, lease b (another period) 6.
  await same(t, before, after, [{ o: 'lease', i: 'a', p: 'proj', e: 'p1', a: 1000, n: 10, m: 10 }], 'lease a')
  await same(t, before, after, [{ o: 'lease', i: 'b', p: 'proj', e: 'p2', a: 1000, n: 6, m: 6 }], 'lease b')

  let rows = await drawRows()
  t.same(await same(t, before, after, [draw('d1', 'a', 3), draw('d2', 'b', 2), draw('d3', 'a', 4), draw('d3b', 'b', 1)], 'draws within both leases'), [false, false, false, false])
  t.equal(await drawRows(), rows + 2, 'one credit_draws row per lease for the whole batch (the set-based path ran)')

  // a has 3 left: 2 + 2 do not fit together; one by one the first passes, the second is refused, a 1 passes after it.
  t.same(await same(t, before, after, [draw('d4', 'a', 2), draw('d5', 'a', 2), draw('d6', 'a', 1), draw('d6b', 'b', 1)], 'one credit past the lease'), [false, 'expired', false, false])
  rows = await drawRows()
  t.same(await same(t, before, after, [draw('d7', 'b', 1), draw('d7b', 'b', 1), draw('d7c', 'nope', 1), draw('d7d', 'nope', 1)], 'exactly what the lease has left'), [false, false, 'expired', 'expired'])
  t.equal(await drawRows(), rows + 1, 'one credit_draws row for the lease drawn to its last credit')
  t.same(await same(t, before, after, [draw('d8', 'b', 1)], 'a draw on an empty lease'), ['expired'])

  await same(t, before, after, [{ o: 'lease', i: 'a', p: 'proj', e: 'p1', a: 1000, n: 20, m: 20 }], 'top-up of a (folds it)')
  t.same(await same(t, before, after, [draw('d1', 'a', 3), draw('d9', 'a', 3), draw('d9b', 'a', 1), draw('d9c', 'a', 1)], 'a re-sent draw id beside new ones'), ['exists', false, false, false])
  t.same(await same(t, before, after, [draw('d10', 'a', 1), draw('d10', 'a', 1), draw('d10b', 'a', 1), draw('d10c', 'a', 1)], 'one id twice in a batch'), [false, 'exists', false, false])
  await same(t, before, after, [draw('d11', 'a', 0), draw('d12', 'a', 1), draw('d12b', 'a', 1), draw('d12c', 'a', 1)], 'a draw of 0 credits')
  await same(t, before, after, [draw('d13', 'nope', 1), draw('d14', 'a', 1), draw('d14b', 'a', 1), draw('d14c', 'b', 1)], 'a draw on an unknown lease beside good ones')
  await same(t, before, after, [draw('d15', 'a', 1), { o: 'shrink', i: 'a', n: 2 }, draw('d16', 'a', 1), draw('d17', 'b', 1)], 'draws beside a shrink of their lease')
  await same(t, before, after, [draw('d18', 'b', 1), { o: 'lease', i: 'b', p: 'proj', e: 'p2', a: 1000, n: 5, m: 5 }, draw('d19', 'a', 2)], 'draws beside a top-up of another lease')
  await same(t, before, after, [draw('d20', 'a', 1), { o: 'lease', i: 'c', p: 'proj', e: 'p1', a: 1000, n: 5, m: 5 }, draw('d21', 'c', 1)], 'draws beside a new lease and a draw on it')

  // Another instance is refused on p1: A's lease a is marked recall, and its draws answer true.
  await same(t, before, after, [{ o: 'lease', i: 'a', p: 'proj', e: 'p1', a: 1000, n: 20, m: 20 }], 'another top-up of a')
  await same(t, before, after, [{ o: 'lease', i: 'z', p: 'proj', e: 'p1', a: 0, n: 5, m: 5 }], 'a refused lease of another instance', 'B')
  t.same(await same(t, before, after, [draw('d22', 'a', 1), draw('d23', 'a', 1), draw('d23b', 'a', 1), draw('d23c', 'a', 1)], 'draws on a recalled lease'), [true, true, true, true])
  await same(t, before, after, [{ o: 'shrink', i: 'a', n: 0 }, { o: 'shrink', i: 'b', n: 0 }, { o: 'shrink', i: 'c', n: 0 }], 'folds of every lease')

  // A random mix near exhaustion: small leases, draws of 1–4 credits, re-sent ids, top-ups and shrinks.
  let seed = 26
  const random = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2147483648
    return Math.floor(seed / 65536) % n
  }
  let next = 100
  const leases = ['a', 'b', 'c']
  const period = { a: 'p1', b: 'p2', c: 'p1' } as Record<string, string>
  for (let round = 0; round < 200; round++) {
    const ops: Op[] = []
    const size = 1 + random(10)
    for (let i = 0; i < size; i++) {
      const pick = random(20)
      const lease = leases[random(leases.length)]!
      if (pick <= 1) ops.push({ o: 'lease', i: lease, p: 'proj', e: period[lease]!, a: 1000, n: 1 + random(16), m: 1 })
      else if (pick === 2) ops.push({ o: 'shrink', i: lease, n: random(3) })
      else if (pick === 3 && next > 100) ops.push(draw(`d${100 + random(next - 100)}`, lease, 1 + random(4)))
      else ops.push(draw(`d${next++}`, lease, 1 + random(4)))
    }
    await same(t, before, after, ops, `random batch ${round}`)
  }
  const { rows: charged } = await after.query(`SELECT count(*)::int AS n FROM credit_holds WHERE state = 'committed'`)
  t.ok(charged[0].n > 200, `the random batches charged (${charged[0].n} ledger rows) and refused alike`)
  // Draw rows written in all (a folded row is gone, its id stays taken): fewer with draws set-based.
  const written = async (client: pg.Client) => Number((await client.query('SELECT last_value FROM credit_draws_id_seq')).rows[0].last_value)
  const [one, set] = [await written(before), await written(after)]
  t.ok(set < one, `the set-based path ran in the random batches: ${set} draw rows against ${one} one by one`)
})

// Core migration 10 (one-lease-draws-migration.ts): a batch of 2 or more draws all on one lease takes
// a short path of its own; it must answer, charge and refuse as version 7 too, and fall back to the
// general path, having written nothing, whenever a condition of the set-based path fails.
t.test('draws on one lease (the short path of version 10) against draws one by one', async (t) => {
  if (!(await needServers(t))) return
  const before = await migrated(t, 7)
  const after = await migrated(t, LATEST)
  const drawRows = async () => Number((await after.query('SELECT count(*) AS n FROM credit_draws')).rows[0].n)

  await same(t, before, after, [{ o: 'lease', i: 'a', p: 'proj', e: 'p1', a: 1000, n: 10, m: 10 }], 'lease a')
  let rows = await drawRows()
  t.same(await same(t, before, after, [draw('d1', 'a', 3), draw('d2', 'a', 4)], 'two draws on one lease'), [false, false])
  t.equal(await drawRows(), rows + 1, 'one credit_draws row for a batch of two draws (the short path ran)')
  t.same(await same(t, before, after, [draw('d3', 'a', 2), draw('d4', 'a', 2)], 'one credit past the lease'), [false, 'expired'])
  t.same(await same(t, before, after, [draw('d1', 'a', 1), draw('d5', 'a', 1)], 'a re-sent id beside a new one'), ['exists', false])
  await same(t, before, after, [{ o: 'lease', i: 'a', p: 'proj', e: 'p1', a: 1000, n: 10, m: 10 }], 'top-up of a')
  t.same(await same(t, before, after, [draw('d6', 'a', 1), draw('d6', 'a', 1)], 'one id twice'), [false, 'exists'])
  await same(t, before, after, [draw('d7', 'a', 0), draw('d8', 'a', 1)], 'a draw of 0 credits')
  await same(t, before, after, [{ o: 'draw', i: 'd9', n: 1, t: 'X' }, draw('d10', 'a', 1)], 'a draw naming no lease')
  t.same(await same(t, before, after, [draw('d13', 'nope', 1), draw('d14', 'nope', 1)], 'draws on an unknown lease'), ['expired', 'expired'])
  await same(t, before, after, [{ o: 'lease', i: 'z', p: 'proj', e: 'p1', a: 0, n: 5, m: 5 }], 'a refused lease of another instance', 'B')
  t.same(await same(t, before, after, [draw('d15', 'a', 1), draw('d16', 'a', 1)], 'draws on a recalled lease'), [true, true])
  await same(t, before, after, [draw('d17', 'a', 1), draw('d18', 'a', 1)], 'draws on the lease of another instance', 'B')

  // Random batches of draws on one lease near exhaustion, with re-sent ids, top-ups and folds between them.
  let seed = 9
  const random = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2147483648
    return Math.floor(seed / 65536) % n
  }
  let next = 100
  const answers = new Map<string, number>()
  for (let round = 0; round < 150; round++) {
    const pick = random(10)
    if (pick <= 2) await same(t, before, after, [{ o: 'lease', i: 'a', p: 'proj', e: 'p1', a: 5000, n: 10 + random(30), m: 1 }], `random top-up ${round}`)
    else if (pick === 3) await same(t, before, after, [{ o: 'shrink', i: 'a', n: random(3) }], `random shrink ${round}`)
    const ops: Op[] = []
    const size = 2 + random(5)
    for (let i = 0; i < size; i++) ops.push(draw(random(6) === 0 && next > 100 ? `d${100 + random(next - 100)}` : `d${next++}`, 'a', 1 + random(4)))
    for (const answer of await same(t, before, after, ops, `random one-lease batch ${round}`)) answers.set(String(answer), (answers.get(String(answer)) ?? 0) + 1)
  }
  t.ok((answers.get('false') ?? 0) > 200 && (answers.get('expired') ?? 0) > 20 && (answers.get('exists') ?? 0) > 20, `the random batches charged, refused and found re-sent ids alike: ${JSON.stringify([...answers])}`)
})

// Core migration 11 (one-draw-lock-migration.ts): a batch of one draw locks its lease by id instead
// of through the lease loop; it must answer, charge and refuse as version 7 in every case the loop
// told apart (the caller's own pending lease only).
t.test('a batch of one draw (the lease locked by id, version 11) against version 7', async (t) => {
  if (!(await needServers(t))) return
  const before = await migrated(t, 7)
  const after = await migrated(t, LATEST)

  await same(t, before, after, [{ o: 'lease', i: 'a', p: 'proj', e: 'p1', a: 1000, n: 5, m: 5 }], 'lease a')
  t.same(await same(t, before, after, [draw('d1', 'a', 3)], 'a draw within the lease'), [false])
  t.same(await same(t, before, after, [draw('d2', 'a', 2)], 'a draw to its last credit'), [false])
  t.same(await same(t, before, after, [draw('d3', 'a', 1)], 'a draw on an empty lease'), ['expired'])
  await same(t, before, after, [{ o: 'lease', i: 'a', p: 'proj', e: 'p1', a: 1000, n: 5, m: 5 }], 'top-up of a (folds it)')
  t.same(await same(t, before, after, [draw('d4', 'a', 6)], 'a draw one credit past what is left'), ['expired'])
  t.same(await same(t, before, after, [draw('d1', 'a', 1)], 'a re-sent draw id'), ['exists'])
  await same(t, before, after, [draw('d5', 'a', 0)], 'a draw of 0 credits')
  await same(t, before, after, [{ o: 'draw', i: 'd6', n: 1, t: 'X' }], 'a draw naming no lease')
  t.same(await same(t, before, after, [draw('d7', 'nope', 1)], 'a draw on an unknown lease'), ['expired'])
  await same(t, before, after, [draw('d8', 'a', 1)], 'a draw on the lease of another instance', 'B')
  await same(t, before, after, [{ o: 'lease', i: 'z', p: 'proj', e: 'p1', a: 0, n: 5, m: 5 }], 'a refused lease of another instance', 'B')
  t.same(await same(t, before, after, [draw('d9', 'a', 1)], 'a draw on a recalled lease'), [true])
  await same(t, before, after, [{ o: 'shrink', i: 'a', n: 0 }], 'lease a ended')
  await same(t, before, after, [draw('d10', 'a', 1)], 'a draw on an ended lease')
})
