/**
 * Run-time settings and workers on the shared engine, with real gateway processes on one real
 * PostgreSQL + Redis (fresh schema and key prefix per test):
 * - a change made through instance A's admin API is enforced by instance B within 5 s
 *   (LISTEN/NOTIFY, with the periodic re-read as backstop);
 * - `--workers 2` on the shared engine: 1,000 concurrent requests on 100 credits serve exactly 100.
 */
import t from 'tap'
import { Pool } from 'undici'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream } from '../helpers/upstream.ts'
import { freshPrefix, freshSchema, needServers, PG_URL, REDIS_URL } from '../helpers/shared-servers.ts'
import { ADMIN_TOKEN, compare, config, dumpOnFailure, KEY, ledger, send } from '../helpers/shared-gateway.ts'

t.setTimeout(360_000)
const START = { startTimeoutMs: 90_000 }
/** The bound: a change on any instance is in force on every instance within 5 s. */
const PROPAGATION_BOUND_MS = 5000

async function admin(gw: GatewayProcess, method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${gw.adminUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json', 'x-admin-actor': 'shared-settings-test' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  return { status: res.status, json: await res.json() }
}

async function status(gw: GatewayProcess, key: string): Promise<number> {
  const res = await fetch(`${gw.url}/rpc/${key}/call`)
  await res.arrayBuffer()
  return res.status
}

/** Polls `probe` every 25 ms until it returns `want`; the time it took, or Infinity past the bound. */
async function timeUntil(probe: () => Promise<number>, want: number, boundMs = PROPAGATION_BOUND_MS * 2): Promise<number> {
  const started = Date.now()
  while (Date.now() - started < boundMs) {
    if ((await probe()) === want) return Date.now() - started
    await new Promise((r) => setTimeout(r, 25))
  }
  return Infinity
}

t.test('shared engine: settings and workers', async (t) => {
  if (!(await needServers(t))) return
  const up = await startTestUpstream()
  t.teardown(() => up.close())

  t.test('a change on instance A is enforced on instance B within 5 s', async (t) => {
    const schema = freshSchema(t)
    const prefix = freshPrefix(t)
    const text = config({ postgres: PG_URL, redis: REDIS_URL, schema, prefix, allocation: 1_000_000, up })
    const a = await startGatewayProcess(text, START)
    const b = await startGatewayProcess(text, START)
    dumpOnFailure(t, a, b)
    t.teardown(() => Promise.all([a.stop(), b.stop()]))
    const timings: string[] = []

    const created = await admin(a, 'POST', '/admin/projects/p/keys', { label: 'rotated' })
    t.equal(created.status, 201, 'A creates a key')
    const newKey = created.json.key as string
    const keyMs = await timeUntil(() => status(b, newKey), 200)
    t.ok(keyMs <= PROPAGATION_BOUND_MS, `B accepts the key created on A after ${keyMs} ms`)
    timings.push(`key added ${keyMs} ms`)

    t.equal((await admin(a, 'POST', '/admin/projects/p/keys/rotated/disable')).status, 200, 'A disables it')
    const disableMs = await timeUntil(() => status(b, newKey), 401)
    t.ok(disableMs <= PROPAGATION_BOUND_MS, `B refuses the disabled key after ${disableMs} ms`)
    timings.push(`key disabled ${disableMs} ms`)

    t.equal((await admin(a, 'PATCH', '/admin/projects/p', { scopes: ['zkpaas'] })).status, 200, 'A drops the rpc scope')
    const scopeMs = await timeUntil(() => status(b, KEY), 403)
    t.ok(scopeMs <= PROPAGATION_BOUND_MS, `B refuses the rpc route after ${scopeMs} ms`)
    timings.push(`scope removed ${scopeMs} ms`)

    t.equal((await admin(b, 'PATCH', '/admin/projects/p', { scopes: ['rpc'] })).status, 200, 'B gives it back')
    const backMs = await timeUntil(() => status(a, KEY), 200)
    t.ok(backMs <= PROPAGATION_BOUND_MS, `A serves the rpc route again after ${backMs} ms`)
    timings.push(`scope restored (B to A) ${backMs} ms`)

    const audit = await admin(b, 'GET', '/admin/projects/p/audit')
    t.equal(audit.status, 200, 'either instance reads the one audit trail')
    t.notOk(JSON.stringify(audit.json).includes(newKey), 'the audit trail never holds a clear key')
    t.comment(`propagation across two instances: ${timings.join(', ')}`)
  })

  t.test('--workers 2 on the shared engine: 1,000 concurrent requests on 100 credits serve exactly 100', async (t) => {
    const schema = freshSchema(t)
    const prefix = freshPrefix(t)
    const text = config({ postgres: PG_URL, redis: REDIS_URL, schema, prefix, allocation: 100, up })
    const gw = await startGatewayProcess(text, { ...START, args: ['--workers', '2'] })
    dumpOnFailure(t, gw)
    const pool = new Pool(gw.url, { connections: 100 })
    t.teardown(async () => {
      await pool.destroy()
      await gw.stop()
    })
    const answers = await Promise.all(Array.from({ length: 1000 }, (_, i) => send(pool, 'rpc', `w-${i}`)))
    t.equal(answers.filter((r) => r.status === 200).length, 100, '100 served')
    t.equal(answers.filter((r) => r.status === 402 && r.code === 'credits_exhausted').length, 900, '900 refused with 402 credits_exhausted')
    const state = await ledger(schema)
    t.equal(state.used, 100, 'the ledger says 100')
    t.same(compare(answers, state.committed), { served: 100, lost: [], doubled: [], unserved: [] }, 'one committed hold per 2xx')
  })
})
