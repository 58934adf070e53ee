/**
 * The dashboard's pages against a real gateway process with real sessions (users made in the store
 * before the gateway starts, as `tollgate user add` would; sessions by signing in): an owner sees their own
 * project only (another one answers 404 like a missing one, in pages and fragments), the operator
 * view is for operators, the page carries the session's CSRF token, live fragments reflect traffic,
 * and a revoked or forged cookie gets the sign-in page.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { request } from 'undici'
import { hashPassword } from '../../core/accounts/password.ts'
import { SESSION_COOKIE } from '../../core/accounts/authenticate.ts'
import { hashCredential } from '../../core/projects/projects.ts'
import { openSqliteStore } from '../../core/store/sqlite.ts'
import { startGatewayProcess } from '../helpers/gateway-process.ts'
import { tempDir } from '../helpers/temp.ts'
import { startTestUpstream, type TestUpstream } from '../helpers/upstream.ts'
import { meteredRpcYaml } from '../helpers/metered-rpc-yaml.ts'

const KEY = { acme: `tk_a_${randomBytes(12).toString('hex')}`, beta: `tk_b_${randomBytes(12).toString('hex')}` }

function config(up: TestUpstream): string {
  return `
version: 1
server: { listen: { port: 0 } }
admin: { listen: { port: 0 }, tokenHash: ${hashCredential('admin-' + randomBytes(8).toString('hex'))} }
store: { dataDir: '{{DIR}}/data' }
log: { access: false }
watch: false
projects:
  - id: acme
    name: 'Acme <Rollups>'
    scopes: [rpc]
    credits: { allocation: 100, period: month }
    keys: [{ label: main, hash: ${hashCredential(KEY.acme)} }]
  - id: beta
    scopes: [rpc]
    credits: { allocation: 50, period: day }
    keys: [{ label: main, hash: ${hashCredential(KEY.beta)} }]
` + meteredRpcYaml({ upstreamUrl: up.url, cost: 3 })
}

t.test('dashboard pages with real sessions: who sees what', async (t) => {
  t.setTimeout(180_000)
  const up = await startTestUpstream()
  t.teardown(() => up.close())
  const dir = tempDir('tollgate-dash-access-')
  // Users and sessions go in before the start: the running gateway holds the database exclusively.
  const store = openSqliteStore({ dataDir: join(dir, 'data') })
  const passwordHash = await hashPassword('correct horse battery staple')
  await store.accounts.createUser({ id: 'u-owner', email: 'owen@example.com', role: 'owner', passwordHash, projects: ['acme'] })
  await store.accounts.createUser({ id: 'u-op', email: 'opal@example.com', role: 'operator', passwordHash, projects: [] })
  await store.close()
  writeFileSync(join(dir, 'gateway.yaml'), config(up).replaceAll('{{DIR}}', dir))
  const gw = await startGatewayProcess(config(up), { dir, startTimeoutMs: 90_000 })
  t.teardown(() => gw.stop())
  /** Signs in through the admin API: the session token (from Set-Cookie) and its CSRF token. */
  const signIn = async (email: string) => {
    const res = await request(gw.adminUrl + '/admin/session', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password: 'correct horse battery staple' }) })
    const body = (await res.body.json()) as { session: { csrfToken?: string }; csrfToken?: string }
    const cookie = String(res.headers['set-cookie'] ?? '')
    const token = new RegExp(`${SESSION_COOKIE}=([^;]+)`).exec(cookie)?.[1]
    if (res.statusCode !== 200 || !token) throw new Error(`sign-in of ${email} answered ${res.statusCode}`)
    return { token, csrfToken: body.csrfToken ?? body.session.csrfToken ?? '' }
  }
  const ownerSession = await signIn('owen@example.com')
  const operatorSession = await signIn('opal@example.com')
  const revoked = await signIn('owen@example.com')
  const signOut = await request(gw.adminUrl + '/admin/session', { method: 'DELETE', headers: { cookie: `${SESSION_COOKIE}=${revoked.token}`, 'x-csrf-token': revoked.csrfToken } })
  await signOut.body.dump()
  t.equal(signOut.statusCode, 200, 'signed out: that session is revoked')

  const get = async (path: string, token?: string) => {
    const res = await request(gw.adminUrl + path, { headers: token ? { cookie: `${SESSION_COOKIE}=${token}` } : {} })
    return { status: res.statusCode, headers: res.headers, body: await res.body.text() }
  }

  const ownerList = await get('/dashboard/projects', ownerSession.token)
  t.equal(ownerList.status, 200)
  t.match(ownerList.body, /data-project="acme"/)
  t.notMatch(ownerList.body, /data-project="beta"/, "an owner's list has only their projects")
  t.match(ownerList.body, /Acme &lt;Rollups&gt;/, 'names are escaped')
  t.match(ownerList.body, new RegExp(`<meta name="csrf-token" content="${ownerSession.csrfToken}">`), "the page carries the session's CSRF token")
  t.match(ownerList.body, /owen@example\.com/)
  t.notMatch(ownerList.body, /href="\/dashboard\/operator"/, 'no operator link for an owner')
  t.match(ownerList.headers['content-security-policy'], /script-src 'self'/)

  const other = await get('/dashboard/projects/beta', ownerSession.token)
  const missing = await get('/dashboard/projects/nope', ownerSession.token)
  t.equal(other.status, 404, "another user's project is not found")
  t.equal(other.body.replace(/beta/g, 'X'), missing.body.replace(/nope/g, 'X'), 'exactly like a missing one')
  t.equal((await get('/dashboard/fragments/projects/beta', ownerSession.token)).status, 404)
  t.equal((await get('/dashboard/fragments/projects/beta/chart.json', ownerSession.token)).status, 404)
  t.equal((await get('/dashboard/operator', ownerSession.token)).status, 403, 'the operator view is for operators')

  // Traffic shows up in the live fragment and the chart data.
  for (let i = 0; i < 4; i++) await (await request(`${gw.url}/rpc/${KEY.acme}/x${i}`)).body.text()
  await (await request(`${gw.url}/rpc/${KEY.acme}/status/500`)).body.text()
  const live = await get('/dashboard/fragments/projects/acme', ownerSession.token)
  t.equal(live.status, 200)
  t.match(live.body, /data-field="credits-left">88</, '4 answered requests at 3 credits (the upstream 500 is refunded): 88 of 100 left')
  t.match(live.body, /data-field="requests">5</)
  t.match(live.body, /<code>rpc<\/code>/, 'the busiest routes list the route')
  t.match(live.body, /s5xx/, 'the 500 is in the status breakdown')
  const chart = JSON.parse((await get('/dashboard/fragments/projects/acme/chart.json', ownerSession.token)).body)
  t.equal(chart.x.length, 24)
  t.same(chart.series.map((s: { apiType: string }) => s.apiType), ['PRIVNET_RPC'])
  t.equal(chart.series[0].requests.at(-1), 5, 'the current hour holds the 5 requests')

  const operatorView = await get('/dashboard/operator', operatorSession.token)
  t.equal(operatorView.status, 200)
  t.match(operatorView.body, /href="\/dashboard\/projects\/acme"/)
  t.match(operatorView.body, /href="\/dashboard\/projects\/beta"/, 'an operator sees every project')
  t.equal((await get('/dashboard/projects/beta', operatorSession.token)).status, 200)

  for (const [what, token] of [['revoked', revoked.token], ['forged', randomBytes(32).toString('base64url')]] as const) {
    const page = await get('/dashboard/projects', token)
    t.equal(page.status, 303, `a ${what} session is sent to sign in`)
    t.equal(page.headers.location, '/dashboard/sign-in')
    t.notMatch(page.body, /acme/)
    t.equal((await get('/dashboard/fragments/projects/acme', token)).status, 401)
  }
})
