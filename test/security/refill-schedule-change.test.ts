/**
 * Issue 25, finding 3: README's own example, `PATCH /admin/projects/:id {"credits":{"refill":
 * {"interval":"month","day":31}}}`, moved the balance from `{"granted":500,"used":23}` (period
 * `2026-11`) to `{"granted":0,"used":0}` (period `2026-10-31/P1M`): the 500 credits paid for were
 * gone, and after a reset the charges made in between were in no current balance. Rule: a change of
 * refill schedule or period never drops grants or charges. Unspent granted credits carry into the
 * new period, charges stay in the period they were made in, and both periods' ledgers list the
 * carried amount as an entry of its own. A real gateway process, on both engines.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { request } from 'undici'
import { hashCredential } from '../../core/projects/projects.ts'
import { scheduleBounds } from '../../core/store/periods.ts'
import { startGatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream } from '../helpers/upstream.ts'
import { tempDir } from '../helpers/temp.ts'
import { freshPrefix, freshSchema, needServers, PG_URL, REDIS_URL } from '../helpers/shared-servers.ts'

t.setTimeout(600_000)

const KEY = `tk_refill_${randomBytes(12).toString('hex')}`
const ADMIN_TOKEN = `admin_${randomBytes(12).toString('hex')}`

const config = (upstream: string, store: string) => `
version: 1
server: { listen: { port: 0 } }
admin: { listen: { port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: ${store}
watch: false
projects:
  - id: acme
    scopes: [zkpaas]
    credits: { allocation: 100, period: month }
    keys: [{ label: main, hash: ${hashCredential(KEY)} }]
upstreams:
  echo: { url: '${upstream}' }
routes:
  - name: metered
    path: /zk/:apiKey/prove
    rewrite: /prove
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: zkpaas } }
      - { name: credit-meter, config: { apiType: PRIVNET_ZKPAAS, cost: 1 } }
`

async function send(base: string, method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await request(base + path, {
    method: method as 'GET',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.body.text()
  return { status: res.statusCode, json: text ? JSON.parse(text) : undefined }
}

const sum = (entries: { amount: number }[]) => entries.reduce((total, entry) => total + entry.amount, 0)

const engines = [
  { name: 'sqlite', store: async () => "{ dataDir: '{{DIR}}/data' }" },
  {
    name: 'shared',
    store: async (t: Parameters<typeof needServers>[0] & { teardown(fn: () => unknown): void }) =>
      (await needServers(t)) ? `{ engine: shared, postgres: '${PG_URL}', redis: '${REDIS_URL}', schema: ${freshSchema(t)}, keyPrefix: '${freshPrefix(t)}' }` : undefined,
  },
]

for (const engine of engines) {
  t.test(`${engine.name}: README's refill example keeps the 500 credits paid for, and every charge`, async (t) => {
    const store = await engine.store(t)
    if (store === undefined) return
    const up = await startTestUpstream()
    const gw = await startGatewayProcess(config(up.url, store), { dir: tempDir('tollgate-refill-'), startTimeoutMs: 90_000 })
    t.teardown(async () => {
      await gw.stop()
      await up.close()
    })
    const admin = (method: string, path: string, body?: unknown) => send(gw.adminUrl, method, path, body)
    const prove = async (n: number) => {
      for (let i = 0; i < n; i++) t.equal((await request(`${gw.url}/zk/${KEY}/prove`).then(async (r) => (await r.body.text(), r.statusCode))), 200)
    }
    const now = Date.now()
    const month = scheduleBounds({ period: 'month' }, now).key
    const day31 = scheduleBounds({ period: 'month', refill: { interval: 'month', day: 31 } }, now).key

    t.equal((await admin('POST', '/admin/projects/acme/credits/top-up', { amount: 500, idempotencyKey: 'paid' })).status, 201)
    await prove(23)
    t.same((await admin('GET', '/admin/projects/acme/credits')).json.balance, { allocation: 100, granted: 500, used: 23, remaining: 577 })

    const patched = await admin('PATCH', '/admin/projects/acme', { credits: { refill: { interval: 'month', day: 31 } } })
    t.equal(patched.status, 200)
    t.same(patched.json.carried, { from: month, to: day31, amount: 500 }, 'the answer says what moved where')
    const moved = (await admin('GET', '/admin/projects/acme/credits')).json
    t.equal(moved.period, day31)
    t.same(moved.balance, { allocation: 100, granted: 500, used: 0, remaining: 600 }, 'the 500 credits paid for are in the new period')

    const newLedger = (await admin('GET', `/admin/projects/acme/credits/ledger?period=${encodeURIComponent(day31)}`)).json
    t.match(newLedger.entries, [{ kind: 'allocation', amount: 100 }, { kind: 'carry', from: month, to: day31, amount: 500 }])
    t.equal(sum(newLedger.entries), 600, "the new period's entries add up to its balance")
    const oldLedger = (await admin('GET', `/admin/projects/acme/credits/ledger?period=${month}`)).json
    t.same(oldLedger.balance, { allocation: 100, granted: 0, used: 23, remaining: 77 }, 'the charges stay in the old period')
    t.ok(oldLedger.entries.some((e: any) => e.kind === 'carry' && e.from === month && e.to === day31 && e.amount === -500), 'which lists what left it')
    t.equal(sum(oldLedger.entries), 77, "the old period's entries add up to its balance")

    await prove(4)
    const reset = await admin('POST', '/admin/projects/acme/reset')
    t.equal(reset.status, 200)
    t.same(reset.json.carried, { from: day31, to: month, amount: 500 }, 'a reset carries back what is unspent')
    const back = (await admin('GET', '/admin/projects/acme/credits')).json
    t.equal(back.period, month)
    t.same(back.balance, { allocation: 100, granted: 500, used: 23, remaining: 577 }, 'nothing paid for is lost')
    const between = (await admin('GET', `/admin/projects/acme/credits/ledger?period=${encodeURIComponent(day31)}`)).json
    t.same(between.balance, { allocation: 100, granted: 0, used: 4, remaining: 96 }, 'the charges made in between stay in their period')
    t.equal(sum(between.entries.filter((e: any) => e.kind === 'charge')), -4, 'every one of them in its ledger')
    const current = (await admin('GET', `/admin/projects/acme/credits/ledger?period=${month}`)).json
    t.ok(current.entries.some((e: any) => e.kind === 'carry' && e.from === day31 && e.amount === 500), "the current period's ledger names the period in between")
    t.equal(sum(current.entries), 577)
  })
}

for (const engine of engines) {
  t.test(`${engine.name}: a schedule changed in gateway.yaml (a reload) carries the credits paid for too`, async (t) => {
    const store = await engine.store(t)
    if (store === undefined) return
    const up = await startTestUpstream()
    const text = config(up.url, store)
    const gw = await startGatewayProcess(text, { dir: tempDir('tollgate-refill-reload-'), startTimeoutMs: 90_000 })
    t.teardown(async () => {
      await gw.stop()
      await up.close()
    })
    const admin = (method: string, path: string, body?: unknown) => send(gw.adminUrl, method, path, body)
    const now = Date.now()
    const month = scheduleBounds({ period: 'month' }, now).key
    const day31 = scheduleBounds({ period: 'month', refill: { interval: 'month', day: 31 } }, now).key

    t.equal((await admin('POST', '/admin/projects/acme/credits/top-up', { amount: 300, idempotencyKey: 'paid-reload' })).status, 201)
    for (let i = 0; i < 7; i++) t.equal((await request(`${gw.url}/zk/${KEY}/prove`).then(async (r) => (await r.body.text(), r.statusCode))), 200)

    gw.writeConfig(text.replace('credits: { allocation: 100, period: month }', 'credits: { allocation: 100, period: month, refill: { interval: month, day: 31 } }'))
    t.equal((await admin('POST', '/admin/reload')).status, 200)
    let moved: any
    for (let i = 0; i < 100; i++) {
      moved = (await admin('GET', '/admin/projects/acme/credits')).json
      if (moved.period === day31 && moved.balance.granted === 300) break
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    t.equal(moved.period, day31, 'the reload put the project in the new period')
    t.same(moved.balance, { allocation: 100, granted: 300, used: 0, remaining: 400 }, 'the 300 credits paid for moved with it')
    const oldLedger = (await admin('GET', `/admin/projects/acme/credits/ledger?period=${month}`)).json
    t.same(oldLedger.balance, { allocation: 100, granted: 0, used: 7, remaining: 93 }, 'the charges stay where they were made')
    t.ok(oldLedger.entries.some((e: any) => e.kind === 'carry' && e.to === day31 && e.amount === -300 && e.actor === 'config-reload'), 'the old ledger names the reload as the carry')
  })
}
