/**
 * The group commit keeps its PostgreSQL connection between batches. When the server drops that
 * connection while no batch runs, the store must neither crash (an unhandled 'error' event on the
 * held client) nor keep using it: the next batch fails with 503 or goes out on a fresh connection.
 * Leases are off so that every reservation is a batch (with them, a reservation may need none).
 */
import t from 'tap'
import { openSharedStore } from '../../../core/store/shared/index.ts'
import { startTcpRelay } from '../../helpers/tcp-relay.ts'
import { freshPrefix, freshSchema, needServers, PG_URL, REDIS_URL } from '../../helpers/shared-servers.ts'

t.test('a dropped idle batch connection is replaced, the process survives', async (t) => {
  if (!(await needServers(t))) return
  t.setTimeout(60_000)
  const target = new URL(PG_URL)
  const relay = await startTcpRelay(target.hostname, Number(target.port || 5432))
  t.teardown(() => relay.close())
  const store = await openSharedStore({ postgres: relay.url(PG_URL), redis: REDIS_URL, schema: freshSchema(t), keyPrefix: freshPrefix(t), onBackgroundError: () => {}, leaseCredits: 0 })
  t.teardown(() => store.close())
  const reserve = (id: string) => store.reserveCredits({ id, projectId: 'p', period: '2026-11', allocation: 100, amount: 1, apiType: 'MIRROR' })
  t.match(await reserve('before'), { ok: true })
  const connections = relay.accepted

  await relay.sever() // every relayed connection reset, the batch one included, while it is idle
  await new Promise((resolve) => setTimeout(resolve, 200))
  await relay.restore()

  let outcome: unknown
  for (let attempt = 0; attempt < 20; attempt++) {
    try {
      outcome = await reserve(`after-${attempt}`)
      break
    } catch (error) {
      t.match(error, { status: 503, code: 'store_unavailable' }, 'a failed batch is a 503, never another error')
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }
  t.match(outcome, { ok: true, balance: { used: 2 } }, 'the next batch went out on a fresh connection')
  t.ok(relay.accepted > connections, 'a new connection was opened')
  await store.commitCredits('before')
  t.equal((await store.balance('p', '2026-11', 100)).used, 2, 'the hold made before the reset is still there and committed')
})
