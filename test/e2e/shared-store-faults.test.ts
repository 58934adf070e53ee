/**
 * Failures of the shared engine, with real gateway processes on one real PostgreSQL + Redis (fresh
 * schema and key prefix per test): kill -9 of an instance, PostgreSQL unreachable, Redis unreachable
 * and flushed, each mid-load, each compared with the ledger: every 2xx has exactly one committed
 * hold (0 lost, 0 doubled). Outages are made with TCP relays between the gateway and the servers
 * (severed: connections reset, new ones refused), never by stopping servers other tests use.
 */
import t from 'tap'
import { TOKEN_LEASE_MS } from '../../core/store/shared/redis-buckets.ts'
import { Pool } from 'undici'
import { startGatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream } from '../helpers/upstream.ts'
import { deletePrefix, freshPrefix, freshSchema, needServers, PG_URL, REDIS_URL, sql } from '../helpers/shared-servers.ts'
import { startTcpRelay } from '../helpers/tcp-relay.ts'
import { compare, config, dumpOnFailure, histogram, load, readyz, settled, type Answer } from '../helpers/shared-gateway.ts'

// Gateway processes start slowly on a busy 2-core machine: more than the runner's default per file.
t.setTimeout(360_000)
/** Gateway start: tsx compiles on a loaded machine; more than the helper's default 20 s. */
const START = { startTimeoutMs: 90_000 }

t.test('shared engine failures', async (t) => {
  if (!(await needServers(t))) return
  const up = await startTestUpstream()
  t.teardown(() => up.close())

  t.test('kill -9 of one gateway under load: its reservations are released by the other, 0 lost, 0 doubled', async (t) => {
    const schema = freshSchema(t)
    const prefix = freshPrefix(t)
    const text = config({ postgres: PG_URL, redis: REDIS_URL, schema, prefix, allocation: 1_000_000_000, up })
    // One after the other: two tsx starts at once can exceed the helper's start timeout on a busy machine.
    const a = await startGatewayProcess(text, START)
    const b = await startGatewayProcess(text, START)
    dumpOnFailure(t, a, b)
    const pools = [new Pool(a.url, { connections: 30 }), new Pool(b.url, { connections: 30 })]
    t.teardown(async () => {
      await Promise.all(pools.map((p) => p.destroy()))
      await Promise.all([a.stop('SIGKILL'), b.stop()])
    })
    let killedAt = 0
    const killer = (async () => {
      await new Promise((r) => setTimeout(r, 700))
      // Kill while both instances hold pending reservations, so the reaper has something of the
      // killed one's to release (a kill between two of its batches would leave nothing pending).
      // Bounded: 30 s, for a machine so busy that the instances serve a few requests a second.
      for (const deadline = Date.now() + 30_000; Date.now() < deadline; ) {
        const owners = await sql<{ n: string }>(schema, "SELECT count(DISTINCT owner) AS n FROM credit_holds WHERE state = 'pending'")
        if (Number(owners[0]!.n) >= 2) break
        await new Promise((r) => setTimeout(r, 10))
      }
      a.child.kill('SIGKILL')
      killedAt = Date.now()
    })()
    const answers = await load(pools, 'rpc', 'k9', 40, 6000, () => killedAt > 0 && Date.now() > killedAt + 1000)
    await killer
    await a.exited
    const state = await settled(schema)
    t.equal(state.pending, 0, "no hold left pending")
    const released = await sql<{ n: string }>(schema, "SELECT count(*) AS n FROM credit_holds WHERE state = 'released'")
    t.ok(Number(released[0]!.n) > 0, `the reaper of the live instance released the killed one's pending holds (${released[0]!.n})`)
    const result = compare(answers, state.committed)
    t.same(result.lost, [], '0 lost: every 2xx has its committed charge')
    t.same(result.doubled, [], '0 doubled')
    t.ok(result.unserved.length <= 40, `charged without a 2xx: ${result.unserved.length}, at most the requests in flight at the kill`)
    t.equal(state.used, [...state.committed.values()].reduce((s, n) => s + n, 0), 'the balance equals the sum of committed holds')
    t.ok(answers.some((a) => a.status === 'error'), 'requests to the killed instance failed')
    t.ok(answers.filter((a) => a.at > killedAt && a.status === 200).length > 0, 'the live instance kept serving')
    t.comment(JSON.stringify(histogram(answers)))
    t.comment(`kill -9: ${result.served} served, lost 0, doubled 0, charged-but-unanswered ${result.unserved.length}`)
  })

  t.test('PostgreSQL unreachable mid-load: 503 store_unavailable (never 500, never unmetered), /readyz 503, resumes by itself', async (t) => {
    const schema = freshSchema(t)
    const prefix = freshPrefix(t)
    const pgUrl = new URL(PG_URL)
    const relay = await startTcpRelay(pgUrl.hostname, Number(pgUrl.port || 5432))
    const gw = await startGatewayProcess(config({ postgres: relay.url(PG_URL), redis: REDIS_URL, schema, prefix, allocation: 1_000_000_000, up }), START)
    dumpOnFailure(t, gw)
    const pool = new Pool(gw.url, { connections: 30 })
    t.teardown(async () => {
      await pool.destroy()
      await gw.stop()
      await relay.close()
    })
    t.equal(await readyz(gw), 200, 'ready before the outage')
    let phase: 'before' | 'outage' | 'after' = 'before'
    let stop = false
    const upstreamBefore = up.received.length
    const running = load([pool], 'rpc', 'pg', 30, 20_000, () => stop)
    await new Promise((r) => setTimeout(r, 700))
    await relay.sever()
    phase = 'outage'
    await new Promise((r) => setTimeout(r, 800))
    const readyDuring = await readyz(gw)
    const outageSeen = up.received.length
    await new Promise((r) => setTimeout(r, 700))
    await relay.restore()
    phase = 'after'
    const restoredAt = Date.now()
    let readyAfter = 0
    for (let i = 0; i < 50 && readyAfter !== 200; i++) {
      await new Promise((r) => setTimeout(r, 100))
      readyAfter = await readyz(gw)
    }
    await new Promise((r) => setTimeout(r, 1000))
    stop = true
    const answers = await running
    t.equal(phase, 'after')
    t.equal(readyDuring, 503, '/readyz is 503 while PostgreSQL is unreachable')
    t.equal(readyAfter, 200, '/readyz is 200 again once it is back')
    const statuses = new Set(answers.map((a) => `${a.status} ${a.code ?? ''}`.trim()))
    t.same([...statuses].sort(), ['200', '503 store_unavailable'], 'only 200 and 503 store_unavailable: never a 500, never another error')
    t.ok(answers.filter((a) => a.status === 503).length > 0, 'requests during the outage were refused')
    t.ok(answers.filter((a) => a.status === 200 && a.at > restoredAt + 500).length > 0, 'service resumed by itself')
    t.ok(up.received.length - upstreamBefore >= answers.filter((a) => a.status === 200).length, 'upstream saw the served requests')
    t.ok(outageSeen >= 0)
    const state = await settled(schema)
    t.equal(state.pending, 0, 'no hold left pending')
    const result = compare(answers, state.committed)
    t.same(result.lost, [], '0 lost')
    t.same(result.doubled, [], '0 doubled')
    t.same(result.unserved, [], 'nothing charged that was not answered 2xx: unknown commits were released once PostgreSQL was back')
    t.comment(`PostgreSQL outage: ${result.served} served, ${answers.filter((a) => a.status === 503).length} refused with 503, lost 0, doubled 0`)
  })

  t.test('Redis unreachable, then flushed, mid-load: onStoreError deny and allow, credits stay exact', async (t) => {
    const schema = freshSchema(t)
    const prefix = freshPrefix(t)
    const redisUrl = new URL(REDIS_URL)
    const relay = await startTcpRelay(redisUrl.hostname, Number(redisUrl.port || 6379))
    const gw = await startGatewayProcess(config({ postgres: PG_URL, redis: relay.url(REDIS_URL), schema, prefix, allocation: 1_000_000_000, up }), START)
    dumpOnFailure(t, gw)
    const pool = new Pool(gw.url, { connections: 40 })
    t.teardown(async () => {
      await pool.destroy()
      await gw.stop()
      await relay.close()
    })
    let stop = false
    const running = Promise.all([load([pool], 'deny', 'rd', 15, 20_000, () => stop), load([pool], 'allow', 'ra', 15, 20_000, () => stop)])
    await new Promise((r) => setTimeout(r, 500))
    await relay.sever()
    const severedAt = Date.now()
    await new Promise((r) => setTimeout(r, 1500))
    const readyDuring = await readyz(gw)
    await relay.restore()
    const restoredAt = Date.now()
    await new Promise((r) => setTimeout(r, 1500))
    const flushed = await deletePrefix(prefix)
    const flushedAt = Date.now()
    await new Promise((r) => setTimeout(r, 700))
    stop = true
    const [deny, allow] = await running
    // Sent while Redis was cut off (the client reconnects with a backoff, so the last 300 ms before the
    // restore still fail on the deny route; on a loaded machine an answer may come after the restore).
    // Tokens leased before the cut (token leases) are spent for up to TOKEN_LEASE_MS after it: those
    // decisions need no Redis, so they are not store errors and are left out here.
    const during = (answers: Answer[]) => answers.filter((a) => a.sentAt > severedAt + 100 + TOKEN_LEASE_MS && a.sentAt < restoredAt - 300)
    t.ok(during(deny).length > 0 && during(deny).every((a) => a.status === 503 && a.code === 'store_unavailable'), `deny: 503 store_unavailable while Redis is unreachable ${JSON.stringify(histogram(during(deny)))}`)
    t.ok(during(allow).length > 0 && during(allow).every((a) => a.status === 200), `allow: served (and metered) while Redis is unreachable ${JSON.stringify(histogram(during(allow)))}`)
    t.equal(readyDuring, 200, '/readyz stays 200: PostgreSQL, the source of truth, answers')
    t.ok(deny.some((a) => a.status === 200 && a.at > restoredAt + 1000), 'deny: served again after Redis came back')
    t.ok(flushed > 0, `the test's Redis keys were deleted mid-load (${flushed})`)
    t.ok(deny.some((a) => a.status === 200 && a.at > flushedAt + 100), 'served after the flush')
    const all = [...deny, ...allow]
    t.ok(all.every((a) => a.status === 200 || (a.status === 503 && a.code === 'store_unavailable')), 'never a 500')
    const state = await settled(schema)
    const result = compare(all, state.committed)
    t.same(result.lost, [], '0 lost')
    t.same(result.doubled, [], '0 doubled')
    t.same(result.unserved, [], 'nothing charged without a 2xx')
    t.equal(state.used, result.served, 'the balance equals the 2xx count')
    t.comment(`Redis outage + flush: ${result.served} served, lost 0, doubled 0`)
  })
})
