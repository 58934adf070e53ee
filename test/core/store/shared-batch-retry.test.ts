/**
 * A write batch that PostgreSQL rolls back for a deadlock is sent again (pg.ts): its requests see
 * their result, not a 503, and the retry is counted. The deadlock is a real one, made by an outside
 * session that locks two balance rows in the opposite order to the batch (PostgreSQL aborts the
 * batch, which waited first).
 */
import t from 'tap'
import pg from 'pg'
import { openSharedStore } from '../../../core/store/shared/index.ts'
import { storeRetryCounts } from '../../../core/proxy/resilience.ts'
import { freshPrefix, freshSchema, needServers, PG_URL, REDIS_URL } from '../../helpers/shared-servers.ts'

t.test('a batch rolled back by a deadlock is retried and succeeds', async (t) => {
  if (!(await needServers(t))) return
  const schema = freshSchema(t)
  const store = await openSharedStore({ postgres: PG_URL, redis: REDIS_URL, schema, keyPrefix: freshPrefix(t), leaseCredits: 0 })
  t.teardown(() => store.close())
  const reservation = (id: string, projectId: string) => ({ id, projectId, period: '2026-11', allocation: 100, amount: 1, apiType: 'X' })
  await Promise.all([store.reserveCredits(reservation('seed-a', 'a')), store.reserveCredits(reservation('seed-b', 'b'))])

  const outside = new pg.Client({ connectionString: PG_URL, options: `-c search_path="${schema}" -c deadlock_timeout=10s` })
  await outside.connect()
  t.teardown(() => outside.end().catch(() => {}))
  await outside.query('BEGIN')
  await outside.query("SELECT 1 FROM credit_balances WHERE project_id = 'b' FOR UPDATE")
  const before = storeRetryCounts()['40P01'] ?? 0
  // One batch: it locks a's row, then waits for b's.
  const reserved = Promise.all([store.reserveCredits(reservation('one', 'a')), store.reserveCredits(reservation('two', 'b'))])
  const observer = new pg.Client({ connectionString: PG_URL })
  await observer.connect()
  t.teardown(() => observer.end().catch(() => {}))
  for (let waiting = false; !waiting; ) {
    const { rows } = await observer.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%tollgate_apply%' AND application_name = 'tollgate'")
    waiting = rows[0].n > 0
    if (!waiting) await new Promise((resolve) => setTimeout(resolve, 10))
  }
  // The outside session now waits for a's row, which the batch holds: a cycle, which PostgreSQL
  // breaks by aborting the batch (it waited first, and the outside session's deadlock_timeout is long).
  await outside.query("SELECT 1 FROM credit_balances WHERE project_id = 'a' FOR UPDATE")
  await outside.query('COMMIT')
  t.match(await reserved, [{ ok: true, balance: { used: 2 } }, { ok: true, balance: { used: 2 } }], 'both reservations went through on the retry')
  t.equal(store.writeStats().retries, 1, 'one batch sent again')
  t.equal(storeRetryCounts()['40P01'], before + 1, 'counted for tollgate_store_batch_retries_total')
})
