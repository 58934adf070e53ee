/**
 * The credit admin API of a real gateway process (embedded engine): the balance with its period and
 * next refill, a top-up that lets requests through that were refused (once per idempotency key,
 * also after a kill -9 right after its answer), the ledger that explains the balance entry by entry,
 * bad input refused naming the field, a changed refill schedule in force on the next request (its
 * unspent grants carried along), and
 * a top-up through `--workers 2` (the worker reaches the primary's store over IPC).
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { request } from 'undici'
import { hashCredential } from '../../core/projects/projects.ts'
import { periodBounds, scheduleBounds } from '../../core/store/periods.ts'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream, type TestUpstream } from '../helpers/upstream.ts'
import { tempDir } from '../helpers/temp.ts'
import { freshPrefix, freshSchema, needServers, PG_URL, REDIS_URL } from '../helpers/shared-servers.ts'

// Gateway processes start slowly on a busy 2-core machine: more than the runner's default per file.
t.setTimeout(600_000)

const KEY = `tk_credits_${randomBytes(12).toString('hex')}`
const ADMIN_TOKEN = `admin_${randomBytes(12).toString('hex')}`
const START = { startTimeoutMs: 90_000 }

function config(up: TestUpstream, store = "{ dataDir: '{{DIR}}/data' }"): string {
  return `
version: 1
server: { listen: { port: 0 } }
admin: { listen: { port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: ${store}
watch: false
projects:
  - id: acme
    scopes: [zkpaas]
    credits: { allocation: 2, period: month }
    keys: [{ label: main, hash: ${hashCredential(KEY)} }]
upstreams:
  echo: { url: '${up.url}' }
routes:
  - name: metered
    path: /zk/:apiKey/prove
    rewrite: /prove
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: zkpaas } }
      - { name: credit-meter, config: { apiType: PRIVNET_ZKPAAS, cost: 1 } }
`
}

interface Answer {
  status: number
  json: any
}

async function send(base: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await request(base + path, {
    method: method as 'GET',
    headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  })
  const text = await res.body.text()
  let json: any
  try {
    json = JSON.parse(text)
  } catch {
    json = text
  }
  return { status: res.statusCode, json }
}

const admin = (gw: GatewayProcess, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
  send(gw.adminUrl, method, path, body, { authorization: `Bearer ${ADMIN_TOKEN}`, ...headers })
const prove = async (gw: GatewayProcess) => (await send(gw.url, 'GET', `/zk/${KEY}/prove`)).status

t.test('credits: balance, top-up, ledger, refill schedule', async (t) => {
  t.setTimeout(300_000)
  const up = await startTestUpstream()
  const dir = tempDir('tollgate-credits-')
  let gw = await startGatewayProcess(config(up), { dir, ...START })
  t.teardown(async () => {
    await gw.stop()
    await up.close()
  })

  await t.test('the balance, its period and the next refill', async (t) => {
    const month = periodBounds('month', Date.now())
    const answer = await admin(gw, 'GET', '/admin/projects/acme/credits')
    t.equal(answer.status, 200)
    t.same(answer.json, {
      project: 'acme',
      period: month.key,
      periodStart: new Date(month.startMs).toISOString(),
      nextRefill: new Date(month.endMs).toISOString(),
      schedule: { period: 'month', refill: null },
      balance: { allocation: 2, granted: 0, used: 0, remaining: 2 },
    })
    t.equal((await admin(gw, 'GET', '/admin/projects/nobody/credits')).json.error.code, 'project_not_found')
    t.equal((await send(gw.adminUrl, 'GET', '/admin/projects/acme/credits')).status, 401, 'the admin token is required')
  })

  await t.test('a top-up lets through what the allocation refused, once per idempotency key', async (t) => {
    t.same([await prove(gw), await prove(gw), await prove(gw)], [200, 200, 402], 'the allocation of 2 is spent')
    const body = { amount: 3, idempotencyKey: 'invoice-17' }
    const first = await admin(gw, 'POST', '/admin/projects/acme/credits/top-up', body, { 'x-admin-actor': 'alice@ops' })
    t.equal(first.status, 201)
    t.same(first.json, {
      created: true,
      grant: { id: 'topup:acme:invoice-17', amount: 3, reason: 'top_up', actor: 'admin-token' },
      period: periodBounds('month', Date.now()).key,
      balance: { allocation: 2, granted: 3, used: 2, remaining: 3 },
    })
    const again = await admin(gw, 'POST', '/admin/projects/acme/credits/top-up', body, { 'x-admin-actor': 'bob' })
    t.equal(again.status, 200, 'the same key again: 200, nothing granted')
    t.equal(again.json.created, false)
    t.same(again.json.balance, first.json.balance)
    t.same([await prove(gw), await prove(gw), await prove(gw), await prove(gw)], [200, 200, 200, 402], 'exactly the 3 granted credits')
    const audit = (await admin(gw, 'GET', '/admin/projects/acme/audit')).json.changes.filter((c: any) => c.action === 'credits.top_up')
    t.equal(audit.length, 1, 'the top-up is audited once')
    t.match(audit[0], { actor: 'admin-token', actorNote: 'alice@ops', projectId: 'acme', detail: { grant: 'topup:acme:invoice-17', amount: 3, reason: 'top_up' } })
    const unkeyed = await admin(gw, 'POST', '/admin/projects/acme/credits/top-up', { amount: 1, reason: 'goodwill' })
    t.equal(unkeyed.status, 201)
    t.match(unkeyed.json.grant, { amount: 1, reason: 'goodwill', actor: 'admin-token' })
    t.match(unkeyed.json.grant.id, /^topup:acme:[0-9a-f-]{36}$/, 'without a key: a random one')
  })

  await t.test('the ledger explains the balance entry by entry', async (t) => {
    const answer = await admin(gw, 'GET', '/admin/projects/acme/credits/ledger')
    t.equal(answer.status, 200)
    const { balance, entries } = answer.json
    t.same(balance, { allocation: 2, granted: 4, used: 5, remaining: 1 })
    t.same(entries.map((e: any) => e.kind), ['allocation', 'grant', 'grant', 'charge'])
    t.match(entries[1], { kind: 'grant', id: 'topup:acme:invoice-17', reason: 'top_up', actor: 'admin-token', amount: 3 })
    t.match(entries[3], { kind: 'charge', apiType: 'PRIVNET_ZKPAAS', amount: -5 })
    t.match(entries[3].hour, /^\d{4}-\d{2}-\d{2}T\d{2}:00:00\.000Z$/, 'charges are per UTC hour')
    t.equal(entries.reduce((sum: number, e: any) => sum + e.amount, 0), balance.remaining, 'the entries add up to what remains')
    const old = await admin(gw, 'GET', '/admin/projects/acme/credits/ledger?period=2020-01')
    t.same(old.json.entries, [{ kind: 'allocation', amount: 2 }], 'another period: only its allocation')
    const bad = await admin(gw, 'GET', '/admin/projects/acme/credits/ledger?period=last-month')
    t.same([bad.status, bad.json.error.code], [400, 'invalid_query'])
    t.match(bad.json.error.message, /^period must be/)
  })

  await t.test('bad input is refused naming the field', async (t) => {
    const cases: [unknown, RegExp][] = [
      [{}, /^amount must be an integer/],
      [{ amount: 0 }, /^amount must be an integer from 1/],
      [{ amount: 1.5 }, /^amount must be an integer/],
      [{ amount: '5' }, /^amount must be an integer/],
      [{ amount: 1, reason: 7 }, /^reason must be/],
      [{ amount: 1, idempotencyKey: 'has space' }, /^idempotencyKey must be/],
      [{ amount: 1, project: 'x' }, /^unknown field project/],
      [[1], /^the body must be a JSON object/],
    ]
    for (const [body, message] of cases) {
      const answer = await admin(gw, 'POST', '/admin/projects/acme/credits/top-up', body)
      t.same([answer.status, answer.json.error?.code], [400, 'invalid_body'], JSON.stringify(body))
      t.match(answer.json.error.message, message)
    }
    const notJson = await admin(gw, 'POST', '/admin/projects/acme/credits/top-up', '{amount:')
    t.same([notJson.status, notJson.json.error.code], [400, 'invalid_json'])
    const badActor = await admin(gw, 'POST', '/admin/projects/acme/credits/top-up', { amount: 1 }, { 'x-admin-actor': ' ' })
    t.same([badActor.status, badActor.json.error.code], [400, 'invalid_header'])
    t.equal((await admin(gw, 'POST', '/admin/projects/nobody/credits/top-up', { amount: 1 })).status, 404)
    t.equal((await admin(gw, 'GET', '/admin/projects/acme/credits')).json.balance.granted, 4, 'nothing refused was granted')
  })

  await t.test('a top-up answered before a kill -9 is kept', async (t) => {
    const answer = await admin(gw, 'POST', '/admin/projects/acme/credits/top-up', { amount: 10, idempotencyKey: 'before-kill' })
    t.equal(answer.status, 201)
    gw.child.kill('SIGKILL')
    await gw.exited
    gw = await startGatewayProcess(config(up), { dir, ...START })
    t.same((await admin(gw, 'GET', '/admin/projects/acme/credits')).json.balance, { allocation: 2, granted: 14, used: 5, remaining: 11 })
    const replay = await admin(gw, 'POST', '/admin/projects/acme/credits/top-up', { amount: 10, idempotencyKey: 'before-kill' })
    t.same([replay.status, replay.json.created], [200, false], 'its key is still known after the restart')
  })

  await t.test('a changed refill schedule is in force on the next request', async (t) => {
    const today = new Date().getUTCDate()
    // A monthly refill on a day other than the 1st: the period now is a new one, with its own balance.
    const day = today === 1 ? 2 : today
    const before = (await admin(gw, 'GET', '/admin/projects/acme/credits')).json.balance
    const patched = await admin(gw, 'PATCH', '/admin/projects/acme', { credits: { refill: { interval: 'month', day } } })
    t.equal(patched.status, 200)
    // The grants not yet spent carry into the new period (the allocation is spent first).
    const carried = Math.min(before.granted, before.remaining)
    t.ok(carried > 0, `the top-ups above left ${carried} credits unspent`)
    t.equal(patched.json.carried.amount, carried, 'the unspent grants carry into the new period')
    const expected = scheduleBounds({ period: 'month', refill: { interval: 'month', day } }, Date.now())
    const credits = await admin(gw, 'GET', '/admin/projects/acme/credits')
    t.same(credits.json.schedule, { period: 'month', refill: { interval: 'month', day } })
    t.equal(credits.json.period, expected.key)
    t.match(credits.json.period, /^\d{4}-\d{2}-\d{2}\/P1M$/)
    t.equal(credits.json.nextRefill, new Date(expected.endMs).toISOString())
    t.same(credits.json.balance, { allocation: 2, granted: carried, used: 0, remaining: 2 + carried }, 'the new period starts from the allocation, plus the carried grants')
    const served: number[] = []
    for (let i = 0; i <= 2 + carried; i++) served.push(await prove(gw))
    t.same(served, [...Array(2 + carried).fill(200), 402], 'requests are charged to the new period')
    const ledger = await admin(gw, 'GET', `/admin/projects/acme/credits/ledger?period=${encodeURIComponent(expected.key)}`)
    t.same(ledger.json.balance, { allocation: 2, granted: carried, used: 2 + carried, remaining: 0 })

    const bad = await admin(gw, 'PATCH', '/admin/projects/acme', { credits: { refill: { interval: 'month', day: 32 } } })
    t.same([bad.status, bad.json.error.code, bad.json.error.message], [400, 'invalid_body', 'credits.refill.day must be an integer from 1 to 31'])
    const badInterval = await admin(gw, 'PATCH', '/admin/projects/acme', { credits: { refill: { interval: 'week' } } })
    t.match(badInterval.json.error.message, /^credits\.refill\.interval must be day or month/)

    await admin(gw, 'PATCH', '/admin/projects/acme', { credits: { period: 'day' } })
    const daily = await admin(gw, 'GET', '/admin/projects/acme/credits')
    t.same(daily.json.schedule, { period: 'day', refill: null }, 'a calendar period set alone replaces the schedule')
    t.equal(daily.json.period, periodBounds('day', Date.now()).key)
    t.equal(await prove(gw), 200, 'a fresh daily period')
  })
})

t.test('a top-up through --workers 2 reaches the primary store over IPC', async (t) => {
  t.setTimeout(300_000)
  const up = await startTestUpstream()
  const gw = await startGatewayProcess(config(up), { args: ['--workers', '2'], ...START })
  t.teardown(async () => {
    await gw.stop()
    await up.close()
  })
  t.same([await prove(gw), await prove(gw), await prove(gw)], [200, 200, 402])
  const topUps = await Promise.all([1, 2, 3, 4].map(() => admin(gw, 'POST', '/admin/projects/acme/credits/top-up', { amount: 5, idempotencyKey: 'same' })))
  t.same(topUps.map((a) => a.status).sort(), [200, 200, 200, 201], 'four concurrent top-ups of one key: one grant')
  const statuses = []
  for (let i = 0; i < 6; i++) statuses.push(await prove(gw))
  t.same(statuses, [200, 200, 200, 200, 200, 402], 'every worker sees the 5 granted credits, exactly')
  const ledger = await admin(gw, 'GET', '/admin/projects/acme/credits/ledger')
  t.same(ledger.json.balance, { allocation: 2, granted: 5, used: 7, remaining: 0 })
  t.equal(ledger.json.entries.reduce((sum: number, e: any) => sum + e.amount, 0), 0)
})

t.test('shared engine: two instances, one balance; concurrent top-ups of one key on both grant once', async (t) => {
  if (!(await needServers(t))) return
  t.setTimeout(300_000)
  const up = await startTestUpstream()
  const store = `{ engine: shared, postgres: '${PG_URL}', redis: '${REDIS_URL}', schema: ${freshSchema(t)}, keyPrefix: '${freshPrefix(t)}' }`
  const a = await startGatewayProcess(config(up, store), START)
  const b = await startGatewayProcess(config(up, store), START)
  t.teardown(async () => {
    await Promise.all([a.stop(), b.stop()])
    await up.close()
  })
  t.same([await prove(a), await prove(b), await prove(a)], [200, 200, 402], 'the allocation of 2 is shared')
  const topUp = (gw: GatewayProcess) => admin(gw, 'POST', '/admin/projects/acme/credits/top-up', { amount: 4, idempotencyKey: 'po-99' }, { 'x-admin-actor': 'carol' })
  const answers = await Promise.all([topUp(a), topUp(b), topUp(a), topUp(b)])
  t.same(answers.map((x) => x.status).sort(), [200, 200, 200, 201], 'one grant across both instances')
  const statuses = []
  for (let i = 0; i < 5; i++) statuses.push(await prove(i % 2 === 0 ? a : b))
  t.same(statuses, [200, 200, 200, 200, 402], 'exactly the 4 granted credits, on either instance')
  const ledger = await admin(b, 'GET', '/admin/projects/acme/credits/ledger')
  t.same(ledger.json.balance, { allocation: 2, granted: 4, used: 6, remaining: 0 })
  t.same(ledger.json.entries.map((e: any) => e.kind), ['allocation', 'grant', 'charge'])
  t.match(ledger.json.entries[1], { id: 'topup:acme:po-99', actor: 'admin-token', amount: 4 })
  t.match(ledger.json.entries[2], { apiType: 'PRIVNET_ZKPAAS', amount: -6 })
})
