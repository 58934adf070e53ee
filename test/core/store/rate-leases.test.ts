/**
 * Rate-limit token leases of the shared engine (core/store/shared/redis-buckets.ts) on a real Redis:
 * most decisions of a roomy bucket need no Redis call, leased tokens expire, and no number of
 * instances admits more than the bucket holds.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { openSharedStore, type SharedStore } from '../../../core/store/shared/index.ts'
import { freshPrefix, freshSchema, needServers, PG_URL, REDIS_URL } from '../../helpers/shared-servers.ts'

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

t.test('rate-limit token leases', async (t) => {
  if (!(await needServers(t))) return
  const schema = freshSchema(t)
  const keyPrefix = freshPrefix(t)
  const open = async (rateLeaseTokens?: number): Promise<SharedStore> => {
    const store = await openSharedStore({ postgres: PG_URL, redis: REDIS_URL, schema, keyPrefix, poolSize: 2, rateLeaseTokens })
    t.teardown(() => store.close())
    return store
  }
  const [a, b] = await Promise.all([open(), open()])

  t.test('a roomy bucket: most decisions come from leased tokens, without a call', async (t) => {
    const key = `roomy-${randomBytes(3).toString('hex')}`
    const before = a.rateStats()
    for (let i = 0; i < 200; i++) t.ok((await a.takeToken(key, 100_000, 100_000)).allowed)
    const after = a.rateStats()
    t.ok(after.calls - before.calls <= 5, `200 decisions, ${after.calls - before.calls} script calls`)
    t.ok(after.leased - before.leased >= 190, `${after.leased - before.leased} decided from leased tokens`)
    const decision = await a.takeToken(key, 100_000, 100_000)
    t.ok(decision.remaining > 99_000 && decision.remaining < 100_000, `remaining is the bucket's, leased tokens counted as left (${decision.remaining})`)
  })

  t.test('store.quick decides from leased tokens at once, and takes nothing when it cannot', async (t) => {
    const key = `quick-${randomBytes(3).toString('hex')}`
    t.equal(a.quick.tryTakeToken(key, 100_000, 100_000), undefined, 'no lease yet: left to takeToken')
    await a.takeToken(key, 100_000, 100_000)
    await a.takeToken(key, 100_000, 100_000) // takes the lease
    const before = a.rateStats()
    const decision = a.quick.tryTakeToken(key, 100_000, 100_000)
    t.ok(decision?.allowed && decision.remaining > 99_000, `allowed from the lease, synchronously (remaining ${decision?.remaining})`)
    t.equal(a.quick.tryTakeToken(key, 100_000, 100_000, 1_000), undefined, 'a cost past the leased tokens: left to takeToken')
    t.equal(a.quick.tryTakeToken(key, 50_000, 100_000), undefined, 'another capacity: left to takeToken')
    t.equal(a.quick.tryTakeToken(key, 100_000, 100_000, Number.NaN), undefined, 'a bad cost: left to takeToken, which refuses it')
    const after = a.rateStats()
    t.same([after.calls - before.calls, after.leased - before.leased], [0, 1], 'no call; one decision from leased tokens')
  })

  t.test('leased tokens expire: after 250 ms the next decision asks Redis again', async (t) => {
    const key = `expiring-${randomBytes(3).toString('hex')}`
    await a.takeToken(key, 100_000, 100_000)
    await a.takeToken(key, 100_000, 100_000) // takes the lease
    await sleep(300)
    const before = a.rateStats()
    await a.takeToken(key, 100_000, 100_000)
    t.equal(a.rateStats().calls - before.calls, 1, 'one script call')
  })

  t.test('two instances never admit more than the bucket holds', async (t) => {
    const key = `tight-${randomBytes(3).toString('hex')}`
    const capacity = 200
    // A refill fast enough for leases (rate × 0.25 s >= 2 tokens) but counted: the bound is the
    // capacity plus what refilled while the test ran.
    const rate = 40
    const started = Date.now()
    const take = (store: SharedStore) => store.takeToken(key, capacity, rate).then((d) => d.allowed)
    let admitted = 0
    let refusedInARow = 0
    for (let round = 0; refusedInARow < 6 && round < 300; round++) {
      const answers = await Promise.all([take(a), take(b), take(a), take(b)])
      const passed = answers.filter(Boolean).length
      admitted += passed
      refusedInARow = passed === 0 ? refusedInARow + 1 : 0
    }
    const budget = capacity + (rate * (Date.now() - started)) / 1000
    t.ok(admitted <= budget, `admitted ${admitted} <= ${budget.toFixed(1)} (capacity + rate × elapsed)`)
    // Leased tokens an instance did not spend before the bucket ran dry are lost (at most an eighth
    // of what was left at each lease); the last tokens go one decision at a time.
    t.ok(admitted >= capacity * 0.9, `admitted ${admitted} >= 90% of ${capacity}`)
  })

  t.test('rateLeaseTokens 0: every decision is a Redis decision', async (t) => {
    const c = await open(0)
    const key = `unleased-${randomBytes(3).toString('hex')}`
    const before = c.rateStats()
    for (let i = 0; i < 20; i++) await c.takeToken(key, 100_000, 100_000)
    t.equal(c.rateStats().calls - before.calls, 20)
    t.equal(c.rateStats().leased - before.leased, 0)
  })
})
