/**
 * Issue 25, finding 4: on the shared engine a top-up answered `"used":105` while `GET
 * /admin/projects/:id/credits` said `"used":6` just before and just after. The `grant` op reported
 * `used + pending` of the period row, where `pending` also holds the credits an instance parked in a
 * lease (no request took them); the balance read leaves those out. Rule: every answer that reports a
 * balance reads it from one place. A real gateway process on the shared engine, leases on (the default).
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { request } from 'undici'
import { hashCredential } from '../../core/projects/projects.ts'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream } from '../helpers/upstream.ts'
import { tempDir } from '../helpers/temp.ts'
import { freshPrefix, freshSchema, needServers, PG_URL, REDIS_URL } from '../helpers/shared-servers.ts'

t.setTimeout(600_000)

const KEY = `tk_onesource_${randomBytes(12).toString('hex')}`
const ADMIN_TOKEN = `admin_${randomBytes(12).toString('hex')}`

async function send(base: string, method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await request(base + path, {
    method: method as 'GET',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.body.text()
  return { status: res.statusCode, json: text ? JSON.parse(text) : undefined }
}

t.test('a top-up answers the balance GET /credits answers, before and after it', async (t) => {
  if (!(await needServers(t))) return
  const up = await startTestUpstream()
  const store = `{ engine: shared, postgres: '${PG_URL}', redis: '${REDIS_URL}', schema: ${freshSchema(t)}, keyPrefix: '${freshPrefix(t)}' }`
  const gw: GatewayProcess = await startGatewayProcess(
    `
version: 1
server: { listen: { port: 0 } }
admin: { listen: { port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: ${store}
watch: false
projects:
  - id: acme
    scopes: [zkpaas]
    credits: { allocation: 1000, period: month }
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
`,
    { dir: tempDir('tollgate-one-source-'), startTimeoutMs: 90_000 },
  )
  t.teardown(async () => {
    await gw.stop()
    await up.close()
  })
  for (let i = 0; i < 6; i++) t.equal((await request(`${gw.url}/zk/${KEY}/prove`).then(async (r) => (await r.body.text(), r.statusCode))), 200)
  const before = await send(gw.adminUrl, 'GET', '/admin/projects/acme/credits')
  t.equal(before.json.balance.used, 6, 'six charges, nothing in flight')
  const topUp = await send(gw.adminUrl, 'POST', '/admin/projects/acme/credits/top-up', { amount: 5, idempotencyKey: 'one-source' })
  t.equal(topUp.status, 201)
  const after = await send(gw.adminUrl, 'GET', '/admin/projects/acme/credits')
  t.same(topUp.json.balance, after.json.balance, 'the top-up answers the balance GET answers right after')
  t.same(topUp.json.balance, { allocation: 1000, granted: 5, used: before.json.balance.used, remaining: 1000 + 5 - before.json.balance.used })
  const again = await send(gw.adminUrl, 'POST', '/admin/projects/acme/credits/top-up', { amount: 5, idempotencyKey: 'one-source' })
  t.equal(again.status, 200, 'the same key again grants nothing')
  t.same(again.json.balance, after.json.balance, 'and answers the same balance')
})
