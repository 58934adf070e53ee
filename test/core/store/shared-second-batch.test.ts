/**
 * The shared engine's group commit sends a second batch of draws beside the one in flight only once
 * enough are queued (pg.ts, SECOND_BATCH_MIN_OPS): at moderate load a few charges wait for the
 * batch in flight and leave together, so PostgreSQL pays one batch's fixed cost for them, not two;
 * under load the queue is long and two batches are in flight as before. The batch in flight is held
 * by a real row lock: an outside session locks the lease row the draws need.
 */
import t from 'tap'
import pg from 'pg'
import { randomBytes } from 'node:crypto'
import { openSharedStore } from '../../../core/store/shared/index.ts'
import { SECOND_BATCH_MIN_OPS } from '../../../core/store/shared/pg.ts'
import type { CreditReservation } from '../../../core/store/types.ts'
import { freshPrefix, freshSchema, needServers, PG_URL, REDIS_URL } from '../../helpers/shared-servers.ts'

const reservation = (n: number): CreditReservation => ({
  id: `second-${n}-${randomBytes(3).toString('hex')}`,
  projectId: 'second',
  period: '2026-11',
  allocation: 100_000,
  amount: 1,
  apiType: 'PRIVNET_RPC',
})

t.test('a second batch goes out beside the one in flight only once enough draws are queued', async (t) => {
  if (!(await needServers(t))) return
  const schema = freshSchema(t)
  const store = await openSharedStore({ postgres: PG_URL, redis: REDIS_URL, schema, keyPrefix: freshPrefix(t), poolSize: 6, onBackgroundError: () => {} })
  t.teardown(() => store.close())

  const requests = Array.from({ length: 2 + SECOND_BATCH_MIN_OPS + 3 }, (_, n) => reservation(n))
  // The first reservation takes a lease; the others are admitted from it without a round trip.
  for (const r of requests) t.ok((await store.reserveCredits(r)).ok, `${r.id} admitted`)
  await store.idle()

  const outside = new pg.Client({ connectionString: PG_URL, options: `-c search_path="${schema}"` })
  await outside.connect()
  t.teardown(() => outside.end().catch(() => {}))
  const observer = new pg.Client({ connectionString: PG_URL })
  await observer.connect()
  t.teardown(() => observer.end().catch(() => {}))
  const waitingBatches = async (): Promise<number> => {
    const { rows } = await observer.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%tollgate_apply%' AND application_name = 'tollgate'",
    )
    return rows[0].n
  }
  const untilWaiting = async (n: number): Promise<void> => {
    const deadline = Date.now() + 10_000
    while ((await waitingBatches()) < n) {
      if (Date.now() > deadline) throw new Error(`fewer than ${n} batches waiting after 10 s`)
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  }

  await outside.query('BEGIN')
  const { rowCount } = await outside.query("SELECT 1 FROM credit_holds WHERE api_type = 'lease' AND state = 'pending' FOR UPDATE")
  t.equal(rowCount, 1, 'the lease row is held by the outside session')
  const before = store.writeStats()

  // One draw goes out and waits for the lease row.
  const committed: Promise<void>[] = [store.commitCredits(requests[0]!.id)]
  await untilWaiting(1)
  // A few more than one: they wait for the batch in flight instead of going out beside it.
  for (let i = 1; i < SECOND_BATCH_MIN_OPS; i++) committed.push(store.commitCredits(requests[i]!.id))
  await new Promise((resolve) => setTimeout(resolve, 150))
  t.equal(await waitingBatches(), 1, `${SECOND_BATCH_MIN_OPS - 1} queued draws did not go out as a second batch`)
  t.equal(store.writeStats().batches - before.batches, 0, 'no batch has returned yet')
  t.equal(store.writeStats().peakInFlight, 1, 'never more than one batch in flight so far')

  // Enough queued now: a second batch goes out beside the first (and waits for the same row).
  for (let i = SECOND_BATCH_MIN_OPS; i < requests.length; i++) committed.push(store.commitCredits(requests[i]!.id))
  await untilWaiting(2)
  t.equal(store.writeStats().peakInFlight, 2, 'two batches in flight')

  await outside.query('COMMIT')
  await Promise.all(committed)
  const after = store.writeStats()
  t.equal(after.batches - before.batches, 2, `${requests.length} charges in two batches`)
  t.equal(after.ops - before.ops, requests.length, 'one draw each')
  t.equal((await store.balance('second', '2026-11', 100_000)).used, requests.length, 'every charge is counted')
})
