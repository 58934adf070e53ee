/**
 * Refused traffic over the admin API and on the operator page, against a real gateway process:
 * `GET /admin/projects/:id/usage?by=answer` gives answers by status and refusal code per bucket
 * (JSON, CSV, NDJSON), `?by=key` each key's requests, refusals and last use, an owner reaches only
 * their project, a bad query names its field; keys no project has are counted per route and code
 * under no project and listed on the operator page (escaped), never by the presented key.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { request } from 'undici'
import { hashPassword } from '../../core/accounts/password.ts'
import { hashCredential } from '../../core/projects/projects.ts'
import { openSqliteStore } from '../../core/store/sqlite.ts'
import { send, signIn } from '../helpers/admin-client.ts'
import { startGatewayProcess } from '../helpers/gateway-process.ts'
import { tempDir } from '../helpers/temp.ts'
import { startTestUpstream, type TestUpstream } from '../helpers/upstream.ts'

const ADMIN_TOKEN = `tk_admin_${randomBytes(12).toString('hex')}`
const bearer = { authorization: `Bearer ${ADMIN_TOKEN}` }
const KEY = `tk_a_${randomBytes(12).toString('hex')}`
const OTHER_KEY = `tk_o_${randomBytes(12).toString('hex')}`
const PASSWORD = 'correct horse battery staple'

function config(up: TestUpstream): string {
  return `
version: 1
server: { listen: { port: 0 } }
admin: { listen: { port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
log: { access: false }
watch: false
projects:
  - id: acme
    plan: standard
    scopes: [rpc]
    credits: { allocation: 100, period: month }
    keys: [{ label: main, hash: ${hashCredential(KEY)} }]
  - id: other
    scopes: [rpc]
    credits: { allocation: 100, period: month }
    keys: [{ label: main, hash: ${hashCredential(OTHER_KEY)} }]
upstreams:
  echo: { url: '${up.url}' }
routes:
  - name: rpc
    path: /rpc/:apiKey/*rest
    rewrite: /*rest
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { scope: rpc } }
      - { name: credit-meter, config: { apiType: PRIVNET_RPC, cost: 1 } }
  - name: pro
    path: /pro/:apiKey/*rest
    rewrite: /*rest
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { scope: rpc, plans: [enterprise] } }
`
}

t.test('refusals by status and code, and per key, over the admin API; keys of no project on the operator page', async (t) => {
  t.setTimeout(180_000)
  const up = await startTestUpstream()
  t.teardown(() => up.close())
  const dir = tempDir('tollgate-traffic-admin-')
  const store = openSqliteStore({ dataDir: join(dir, 'data') })
  const passwordHash = await hashPassword(PASSWORD)
  await store.accounts.createUser({ id: 'u-owner', email: 'owen@example.com', role: 'owner', passwordHash, projects: ['acme'] })
  await store.accounts.createUser({ id: 'u-op', email: 'opal@example.com', role: 'operator', passwordHash, projects: [] })
  await store.close()
  const gw = await startGatewayProcess(config(up), { dir, startTimeoutMs: 90_000 })
  t.teardown(() => gw.stop())

  const call = async (path: string) => (await (await request(gw.url + path)).body.dump(), undefined)
  const status = async (path: string) => {
    const res = await request(gw.url + path)
    await res.body.dump()
    return res.statusCode
  }
  t.equal(await status(`/rpc/${KEY}/a`), 200)
  await call(`/rpc/${KEY}/b`)
  for (let i = 0; i < 3; i++) t.equal(await status(`/pro/${KEY}/x`), 403, 'the plan refuses the standard project')
  await call(`/rpc/${OTHER_KEY}/x`)
  // Keys no project has: one on each route; one of them carries markup in the path, never stored.
  for (let i = 0; i < 2; i++) t.equal(await status(`/rpc/tk_unknown_${i}/x`), 401)
  t.equal(await status(`/pro/tk_%3Cb%3Eguess%3C%3E/x`), 401)

  const answers = await send(gw.adminUrl, 'GET', '/admin/projects/acme/usage?by=answer&granularity=hour', { headers: bearer })
  t.equal(answers.status, 200, answers.text)
  t.same(
    answers.json.rows.map((r: any) => [r.status, r.code, r.refusal, r.count]).sort(),
    [[200, '', false, 2], [403, 'wrong_plan', true, 3]].sort(),
    'answers of the project by status and refusal code',
  )
  t.match(answers.json.rows[0].bucket, /^\d{4}-\d{2}-\d{2}T\d{2}:00:00\.000Z$/, 'hourly buckets')
  t.same(answers.json.totals, { answers: 5, refusals: 3 })
  t.equal(answers.json.by, 'answer')

  const daily = await send(gw.adminUrl, 'GET', '/admin/projects/acme/usage?by=answer', { headers: bearer })
  t.match(daily.json.rows[0].bucket, /T00:00:00\.000Z$/, 'by day by default, as the usage route')
  const later = await send(gw.adminUrl, 'GET', `/admin/projects/acme/usage?by=answer&from=${new Date(Date.now() + 3_600_000).toISOString()}&to=${new Date(Date.now() + 7_200_000).toISOString()}`, { headers: bearer })
  t.same(later.json.rows, [], 'from/to select the buckets')

  const keys = await send(gw.adminUrl, 'GET', '/admin/projects/acme/usage?by=key', { headers: bearer })
  t.equal(keys.status, 200)
  t.equal(keys.json.rows.length, 1)
  t.match(keys.json.rows[0], { label: 'main', requests: 5, refusals: 3 })
  t.ok(Math.abs(Date.parse(keys.json.rows[0].lastUsed) - Date.now()) < 120_000, 'last use is now')

  const csv = await send(gw.adminUrl, 'GET', '/admin/projects/acme/usage?by=answer&format=csv&granularity=hour', { headers: bearer })
  t.match(csv.headers['content-type'], /text\/csv/)
  t.match(csv.headers['content-disposition'], /usage-acme-answer-hour\.csv/)
  const lines = csv.text.split('\r\n')
  t.equal(lines[0], 'bucket,status,code,refusal,count')
  t.ok(lines.some((l) => /,403,wrong_plan,true,3$/.test(l)), 'the refusal is a CSV row')
  const nd = await send(gw.adminUrl, 'GET', '/admin/projects/acme/usage?by=key&format=ndjson', { headers: bearer })
  t.match(JSON.parse(nd.text.split('\n')[0]!), { label: 'main', requests: 5, refusals: 3 })

  // The same numbers as the dashboard's own export of the page.
  const operator = await signIn(gw.adminUrl, 'opal@example.com', PASSWORD)
  const pageCsv = await operator.call('GET', '/dashboard/fragments/projects/acme/keys.csv')
  t.match(pageCsv.text, /^label,requests,refusals,lastUsed\nmain,5,3,/, "the dashboard's keys export agrees")

  const owner = await signIn(gw.adminUrl, 'owen@example.com', PASSWORD)
  t.equal((await owner.call('GET', '/admin/projects/acme/usage?by=key')).status, 200, 'an owner reads their project')
  const foreign = await owner.call('GET', '/admin/projects/other/usage?by=answer')
  t.equal(foreign.status, 404, "another owner's project is not found")
  t.equal(foreign.json.error.code, 'project_not_found')
  const bad = await send(gw.adminUrl, 'GET', '/admin/projects/acme/usage?by=answer&from=yesterday', { headers: bearer })
  t.equal(bad.status, 400)
  t.equal(bad.json.error.code, 'invalid_query')
  t.match(bad.json.error.message, /^from must be/, 'the message names the field')
  t.equal((await send(gw.adminUrl, 'GET', '/admin/projects/acme/usage?by=answer&format=xml', { headers: bearer })).json.error.message, 'format must be one of json, csv, ndjson')
  t.equal((await send(gw.adminUrl, 'GET', '/admin/projects/acme/usage', { headers: bearer })).json.rows[0].apiType, 'PRIVNET_RPC', 'by=apiType is still the metered usage')

  // Keys of no project: on the operator page, by route and code, escaped; not on any project.
  const page = await operator.call('GET', '/dashboard/operator')
  t.equal(page.status, 200)
  const section = /<section class="card" id="unattributed"[\s\S]*?<\/section>/.exec(page.text)?.[0] ?? ''
  t.match(section, /<h2 id="unattributed-title">Refused without a project<\/h2>/)
  t.match(section, /data-unattributed="rpc"><td><code>rpc<\/code><\/td>\s*<td class="code"><code>401 unknown_key<\/code> <span class="small why">No project has this key[^<]*<\/span><\/td>\s*<td class="r"><span class="phone-only muted small">Count <\/span>2<\/td>/, 'rpc: 2 refused as 401 unknown_key')
  t.match(section, /data-unattributed="pro"[\s\S]*?Count <\/span>1<\/td>/, 'pro: 1')
  t.notMatch(page.text, /tk_unknown|tk_&lt;|tk_<b|tk_%3C/, 'the presented keys are never shown')
  const fragment = await operator.call('GET', '/dashboard/fragments/operator')
  t.match(fragment.text, /id="unattributed"/, 'the live fragment carries the table too')
  t.notMatch((await owner.call('GET', '/dashboard/operator')).text, /unattributed/, 'owners do not see it')
})
