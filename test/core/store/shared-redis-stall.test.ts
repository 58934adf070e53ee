/**
 * A Redis that stops answering (connection open, no replies) must not hold rate-limit decisions:
 * the turn's script call fails with 503 `store_unavailable` after the call timeout, and decisions
 * work again once Redis answers. Real Redis behind a relay that can stall its answers.
 */
import t from 'tap'
import { openSharedStore } from '../../../core/store/shared/index.ts'
import { GatewayError } from '../../../core/proxy/errors.ts'
import { startTcpRelay } from '../../helpers/tcp-relay.ts'
import { freshPrefix, freshSchema, needServers, PG_URL, REDIS_URL } from '../../helpers/shared-servers.ts'

t.test('a stalled Redis fails the decisions of the turn with store_unavailable, then recovers', async (t) => {
  if (!(await needServers(t))) return
  t.setTimeout(60_000)
  const target = new URL(REDIS_URL)
  const relay = await startTcpRelay(target.hostname, Number(target.port || 6379))
  t.teardown(() => relay.close())
  const store = await openSharedStore({ postgres: PG_URL, redis: relay.url(REDIS_URL), schema: freshSchema(t), keyPrefix: freshPrefix(t), redisTimeoutMs: 300 })
  t.teardown(() => store.close())
  t.ok((await store.takeToken('stall', 5, 0.01)).allowed, 'answered before the stall')

  relay.stall()
  const started = Date.now()
  const outcomes = await Promise.allSettled([store.takeToken('stall', 5, 0.01), store.takeToken('other', 5, 0.01)])
  const waited = Date.now() - started
  for (const outcome of outcomes) {
    t.equal(outcome.status, 'rejected')
    const error = (outcome as PromiseRejectedResult).reason as GatewayError
    t.match(error, { status: 503, code: 'store_unavailable' }, 'a 503 the rate-limit plugin maps to its onStoreError')
  }
  t.ok(waited >= 250 && waited < 5000, `failed after the call timeout, not Redis's silence (${waited} ms)`)

  relay.unstall()
  // The stalled call's late answer is dropped; the next turn's call is answered.
  const after = await store.takeToken('stall', 5, 0.01)
  t.equal(after.allowed, true, 'answered again once Redis answers')
  t.ok(after.remaining <= 3, `the stalled call's take happened in Redis too (remaining ${after.remaining})`)
})
