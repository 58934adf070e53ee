/**
 * The shared engine with real gateway processes on one real PostgreSQL + Redis (fresh schema and
 * key prefix per test). Outages are made with TCP relays between the gateway and the servers
 * (severed: connections reset, new ones refused), never by stopping servers other tests use.
 *
 * Every request carries its own x-request-id, which starts the id of its credit hold, so the ledger
 * (`credit_holds`) can be compared with what the client saw: every 2xx has exactly one committed
 * hold (0 lost, 0 doubled).
 */
import t, { type Test } from 'tap'
import { randomBytes } from 'node:crypto'
import { Pool } from 'undici'
import { hashCredential } from '../../core/projects.ts'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream, type TestUpstream } from '../helpers/upstream.ts'
import { deletePrefix, freshPrefix, freshSchema, needServers, PG_URL, REDIS_URL, sql } from '../helpers/shared-servers.ts'
import { startTcpRelay } from '../helpers/tcp-relay.ts'

const KEY = `tk_shared_${randomBytes(12).toString('hex')}`
const ADMIN_TOKEN = `admin_${randomBytes(12).toString('hex')}`

interface Setup {
  postgres: string
  redis: string
  schema: string
  prefix: string
  allocation: number
  up: TestUpstream
  rate?: { capacity: number; refillPerSecond: number }
}

function config(s: Setup): string {
  const rate = s.rate ?? { capacity: 1_000_000, refillPerSecond: 1_000_000 }
  return `
version: 1
server: { listen: { port: 0 }, drainTimeoutMs: 2000 }
admin: { listen: { port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { engine: shared, postgres: '${s.postgres}', redis: '${s.redis}', schema: ${s.schema}, keyPrefix: '${s.prefix}', instanceTimeoutMs: 1500 }
log: { access: false }
watch: false
projects:
  - id: p
    plan: enterprise
    scopes: [rpc]
    credits: { allocation: ${s.allocation}, period: month }
    keys: [{ hash: ${hashCredential(KEY)} }]
upstreams:
  echo: { url: '${s.up.url}', connections: 128 }
routes:
  - name: metered
    path: /rpc/:apiKey/*rest
    rewrite: /*rest
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { scope: rpc } }
      - { name: credit-meter, config: { apiType: PRIVNET_RPC, cost: 1 } }
  - name: limited-deny
    path: /deny/:apiKey/*rest
    rewrite: /*rest
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { scope: rpc } }
      - { name: rate-limit, config: { by: project, capacity: ${rate.capacity}, refillPerSecond: ${rate.refillPerSecond}, onStoreError: deny } }
      - { name: credit-meter, config: { apiType: PRIVNET_RPC, cost: 1 } }
  - name: limited-allow
    path: /allow/:apiKey/*rest
    rewrite: /*rest
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { scope: rpc } }
      - { name: rate-limit, config: { by: project, capacity: ${rate.capacity}, refillPerSecond: ${rate.refillPerSecond}, onStoreError: allow, bucket: allow } }
      - { name: credit-meter, config: { apiType: PRIVNET_RPC, cost: 1 } }
`
}

interface Answer {
  id: string
  status: number | 'error'
  code?: string
  /** When the request was sent and when its answer (or failure) came, epoch ms. */
  sentAt: number
  at: number
}

/** One request with its own request id; network failures are recorded, not thrown. */
async function send(pool: Pool, route: string, id: string, rest = 'call'): Promise<Answer> {
  const sentAt = Date.now()
  try {
    const res = await pool.request({ path: `/${route}/${KEY}/${rest}`, method: 'GET', headers: { 'x-request-id': id } })
    const body = await res.body.text()
    const code = res.statusCode >= 400 ? (JSON.parse(body) as { error?: { code?: string } }).error?.code : undefined
    return { id, status: res.statusCode, code, sentAt, at: Date.now() }
  } catch {
    return { id, status: 'error', sentAt, at: Date.now() }
  }
}

/** Committed holds per request id, and holds still pending. */
async function ledger(schema: string): Promise<{ committed: Map<string, number>; pending: number; used: number }> {
  const rows = await sql<{ id: string; state: string }>(schema, 'SELECT id, state FROM credit_holds')
  const committed = new Map<string, number>()
  let pending = 0
  for (const row of rows) {
    if (row.state === 'committed') {
      const requestId = row.id.split(':')[0]!
      committed.set(requestId, (committed.get(requestId) ?? 0) + 1)
    } else if (row.state === 'pending') pending++
  }
  const balance = await sql<{ used: string }>(schema, "SELECT coalesce(sum(used), 0) AS used FROM credit_balances WHERE project_id = 'p'")
  return { committed, pending, used: Number(balance[0]!.used) }
}

/** Waits until no hold is pending (the reaper or re-sent releases did their work). */
async function settled(schema: string, timeoutMs = 15_000): Promise<Awaited<ReturnType<typeof ledger>>> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const state = await ledger(schema)
    if (state.pending === 0 || Date.now() > deadline) return state
    await new Promise((r) => setTimeout(r, 200))
  }
}

/** The comparison the issue asks for: 2xx seen by the client vs committed holds in the ledger. */
function compare(answers: Answer[], committed: Map<string, number>) {
  const served = new Set(answers.filter((a) => a.status === 200).map((a) => a.id))
  const lost = [...served].filter((id) => !committed.has(id))
  const doubled = [...committed].filter(([, n]) => n > 1).map(([id]) => id)
  const unserved = [...committed.keys()].filter((id) => !served.has(id))
  return { served: served.size, lost, doubled, unserved }
}

/** `workers` loops sending requests until `until()` or `maxRequests`; a short pause after a refusal. */
async function load(pools: Pool[], route: string, prefix: string, workers: number, maxRequests: number, until: () => boolean): Promise<Answer[]> {
  const answers: Answer[] = []
  let next = 0
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      while (!until() && next < maxRequests) {
        const i = next++
        const answer = await send(pools[(i + w) % pools.length]!, route, `${prefix}-${i}`, i % 3 === 0 ? 'slow-headers?ms=20' : 'call')
        answers.push(answer)
        if (answer.status !== 200) await new Promise((r) => setTimeout(r, 10))
      }
    }),
  )
  return answers
}

function histogram(answers: Answer[]): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const a of answers) counts[`${a.status} ${a.code ?? ''}`.trim()] = (counts[`${a.status} ${a.code ?? ''}`.trim()] ?? 0) + 1
  return counts
}

/** The gateway's last log lines when the test failed (why a process died or refused). */
function dumpOnFailure(t: Test, ...gateways: GatewayProcess[]): void {
  t.teardown(() => {
    if (t.passing()) return
    for (const gw of gateways) t.comment(gw.output.slice(-15).join('\n'))
  })
}

async function readyz(gw: GatewayProcess): Promise<number> {
  const res = await fetch(`${gw.adminUrl}/readyz`)
  await res.arrayBuffer()
  return res.status
}

t.test('shared engine end to end', async (t) => {
  if (!(await needServers(t))) return
  const up = await startTestUpstream()
  t.teardown(() => up.close())

  t.test('two gateways, 1,000 concurrent requests on 100 credits: exactly 100 served, the ledger says 100', async (t) => {
    const schema = freshSchema(t)
    const prefix = freshPrefix(t)
    const text = config({ postgres: PG_URL, redis: REDIS_URL, schema, prefix, allocation: 100, up })
    // One after the other: two tsx starts at once can exceed the helper's start timeout on a busy machine.
    const a = await startGatewayProcess(text)
    const b = await startGatewayProcess(text)
    dumpOnFailure(t, a, b)
    const pools = [new Pool(a.url, { connections: 100 }), new Pool(b.url, { connections: 100 })]
    t.teardown(async () => {
      await Promise.all(pools.map((p) => p.destroy()))
      await Promise.all([a.stop(), b.stop()])
    })
    const answers = await Promise.all(Array.from({ length: 1000 }, (_, i) => send(pools[i % 2]!, 'rpc', `c-${i}`)))
    const served = answers.filter((r) => r.status === 200)
    t.equal(served.length, 100, '100 served across both instances')
    t.equal(answers.filter((r) => r.status === 402 && r.code === 'credits_exhausted').length, 900, '900 refused with 402 credits_exhausted')
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
    const a = await startGatewayProcess(text)
    const b = await startGatewayProcess(text)
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

  t.test('kill -9 of one gateway under load: its reservations are released by the other, 0 lost, 0 doubled', async (t) => {
    const schema = freshSchema(t)
    const prefix = freshPrefix(t)
    const text = config({ postgres: PG_URL, redis: REDIS_URL, schema, prefix, allocation: 1_000_000_000, up })
    // One after the other: two tsx starts at once can exceed the helper's start timeout on a busy machine.
    const a = await startGatewayProcess(text)
    const b = await startGatewayProcess(text)
    dumpOnFailure(t, a, b)
    const pools = [new Pool(a.url, { connections: 30 }), new Pool(b.url, { connections: 30 })]
    t.teardown(async () => {
      await Promise.all(pools.map((p) => p.destroy()))
      await Promise.all([a.stop('SIGKILL'), b.stop()])
    })
    let killedAt = 0
    const killer = (async () => {
      await new Promise((r) => setTimeout(r, 700))
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
    const gw = await startGatewayProcess(config({ postgres: relay.url(PG_URL), redis: REDIS_URL, schema, prefix, allocation: 1_000_000_000, up }))
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
    const gw = await startGatewayProcess(config({ postgres: PG_URL, redis: relay.url(REDIS_URL), schema, prefix, allocation: 1_000_000_000, up }))
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
    const during = (answers: Answer[]) => answers.filter((a) => a.sentAt > severedAt + 100 && a.at < restoredAt)
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
