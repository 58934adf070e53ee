/**
 * The shared engine with two real gateway processes on one real PostgreSQL + Redis (fresh schema
 * and key prefix per test): one balance and one rate limit across both instances.
 */
import t from 'tap'
import { Pool } from 'undici'
import { startGatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream } from '../helpers/upstream.ts'
import { freshPrefix, freshSchema, needServers, PG_URL, REDIS_URL } from '../helpers/shared-servers.ts'
import { ADMIN_TOKEN, compare, config, dumpOnFailure, ledger, load, send } from '../helpers/shared-gateway.ts'

// Gateway processes start slowly on a busy 2-core machine: more than the runner's default per file.
t.setTimeout(360_000)
/** Gateway start: tsx compiles on a loaded machine; more than the helper's default 20 s. */
const START = { startTimeoutMs: 90_000 }

t.test('shared engine, two instances', async (t) => {
  if (!(await needServers(t))) return
  const up = await startTestUpstream()
  t.teardown(() => up.close())

  t.test('two gateways, 1,000 concurrent requests on 100 credits: exactly 100 served, the ledger says 100', async (t) => {
    const schema = freshSchema(t)
    const prefix = freshPrefix(t)
    const text = config({ postgres: PG_URL, redis: REDIS_URL, schema, prefix, allocation: 100, up })
    // One after the other: two tsx starts at once can exceed the helper's start timeout on a busy machine.
    const a = await startGatewayProcess(text, START)
    const b = await startGatewayProcess(text, START)
    dumpOnFailure(t, a, b)
    const pools = [new Pool(a.url, { connections: 100 }), new Pool(b.url, { connections: 100 })]
    t.teardown(async () => {
      await Promise.all(pools.map((p) => p.destroy()))
      await Promise.all([a.stop(), b.stop()])
    })
    const answers = await Promise.all(Array.from({ length: 1000 }, (_, i) => send(pools[i % 2]!, 'rpc', `c-${i}`)))
    const served = answers.filter((r) => r.status === 200)
    t.equal(served.length, 100, '100 served across both instances')
    t.equal(answers.filter((r) => r.status === 402 && r.code === 'credits_exhausted').length, 900, `900 refused with 402 credits_exhausted (others: ${JSON.stringify(answers.filter((r) => r.status !== 200 && r.status !== 402).map((r) => [r.status, r.code]).slice(0, 5))})`)
    t.ok(served.some((r) => Number(r.id.slice(2)) % 2 === 0) && served.some((r) => Number(r.id.slice(2)) % 2 === 1), 'both instances served some')
    const state = await ledger(schema)
    t.equal(state.used, 100, 'the balance row says 100')
    t.same(compare(answers, state.committed), { served: 100, lost: [], doubled: [], unserved: [] }, 'one committed hold per 2xx, nothing else')
    const usage = await fetch(`${a.adminUrl}/admin/projects/p/usage`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    t.equal(((await usage.json()) as { balance: { used: number } }).balance.used, 100, 'the admin API of either instance reads the shared balance')
  })

  t.test('rate limit across two gateways: the total admitted stays within capacity + rate × elapsed', async (t) => {
    const schema = freshSchema(t)
    const prefix = freshPrefix(t)
    const rate = { capacity: 20, refillPerSecond: 10 }
    const text = config({ postgres: PG_URL, redis: REDIS_URL, schema, prefix, allocation: 1_000_000, up, rate })
    // One after the other: two tsx starts at once can exceed the helper's start timeout on a busy machine.
    const a = await startGatewayProcess(text, START)
    const b = await startGatewayProcess(text, START)
    dumpOnFailure(t, a, b)
    const pools = [new Pool(a.url, { connections: 20 }), new Pool(b.url, { connections: 20 })]
    t.teardown(async () => {
      await Promise.all(pools.map((p) => p.destroy()))
      await Promise.all([a.stop(), b.stop()])
    })
    const started = Date.now()
    const stopAt = started + 2000
    const answers = await load(pools, 'deny', 'rl', 20, 5000, () => Date.now() > stopAt)
    const elapsedSeconds = (Math.max(...answers.map((a) => a.at)) - started) / 1000
    const admitted = answers.filter((a) => a.status === 200).length
    const budget = rate.capacity + rate.refillPerSecond * elapsedSeconds
    t.ok(answers.every((a) => a.status === 200 || (a.status === 429 && a.code === 'rate_limited')), 'only 200 and 429 rate_limited')
    t.ok(admitted <= Math.floor(budget), `admitted ${admitted} <= budget ${budget.toFixed(1)} (capacity + rate × ${elapsedSeconds.toFixed(2)} s)`)
    t.ok(admitted >= rate.capacity + Math.floor(rate.refillPerSecond * 1.5), `admitted ${admitted}: the burst and the refill were granted`)
    t.comment(`rate limit across 2 instances: ${admitted} admitted of ${answers.length}, budget ${budget.toFixed(1)}`)
  })
})
