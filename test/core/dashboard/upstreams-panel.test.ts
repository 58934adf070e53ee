/**
 * The operator page's Upstream targets panel (core/dashboard/upstreams-panel.ts): rendered from
 * real pools (core/proxy/upstream/) driven into each state, and through a real gateway process
 * whose pool has a dead target and a live one: the operator sees per-target requests, errors,
 * ejections, retries and latency on the page and its live fragment; an owner does not; no target
 * URL (which may hold a key) and no unescaped label ever reaches the page.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { request } from 'undici'
import { createUpstream } from '../../../core/proxy/http/upstreams.ts'
import { normaliseUpstream } from '../../../core/proxy/upstream/config.ts'
import { hashCredential } from '../../../core/projects/projects.ts'
import { SESSION_COOKIE } from '../../../core/accounts/authenticate.ts'
import { upstreamsFragment, upstreamsSection } from '../../../core/dashboard/upstreams-panel.ts'
import { send } from '../../helpers/admin-client.ts'
import { startGatewayProcess } from '../../helpers/gateway-process.ts'
import { closedPort, startTestUpstream } from '../../helpers/upstream.ts'

const base = { connections: 4, timeouts: { connectMs: 500, headersMs: 5000, bodyMs: 5000 }, keepAliveTimeoutMs: 1000 }

t.test('one table per pool with caption and headers; each state in words; labels escaped; no URL', async (t) => {
  const now = Date.now()
  const pool = createUpstream('chain-rpc', normaliseUpstream({
    ...base,
    targets: [
      { url: 'http://127.0.0.1:1/v2/SECRETKEY', name: 'alchemy', zone: '<img src=x onerror=alert(1)>' },
      { url: 'http://127.0.0.1:2', name: 'public' },
      { url: 'http://127.0.0.1:3', name: 'limited' },
      { url: 'http://127.0.0.1:4' },
    ],
    health: { consecutiveFailures: 2, baseEjectionMs: 30_000 },
  }))
  const mirror = createUpstream('mirror', normaliseUpstream({ ...base, url: 'http://127.0.0.1:5' }))
  t.teardown(() => Promise.all([pool.destroy(), mirror.destroy()]))
  const [alchemy, pub, limited, fourth] = pool.targets
  // Real target bookkeeping: two attempts answered, one ejected after two failures, one 429, one probe-down.
  for (const ms of [10, 30]) {
    alchemy.started()
    alchemy.answered(200, ms)
    alchemy.ended()
  }
  alchemy.counters.retries = 3
  alchemy.counters.hedges = 2
  for (let i = 0; i < 2; i++) {
    pub.started()
    pub.failed(now)
    pub.ended()
  }
  limited.started()
  limited.answered(429, 5)
  limited.throttle(4000, now)
  limited.ended()
  fourth.probeDown = true

  const text = upstreamsFragment([pool, mirror], now).text
  t.equal((text.match(/<table /g) ?? []).length, 2, 'one table per upstream')
  t.ok(text.indexOf('<caption>chain-rpc') < text.indexOf('<caption>mirror'), 'in name order, each with a caption')
  t.match(text, /chain-rpc <span class="muted small">· 1 of 4 healthy/)
  for (const header of ['Target', 'State', 'Requests', 'Errors', 'Mean latency', 'Recent latency', 'Ejections', 'In flight', 'Retries', 'Hedges', '429 answers']) {
    t.match(text, new RegExp(`<th scope="col"[^>]*>${header}</th>`), `header ${header}`)
  }
  const rowOf = (name: string) => text.split('<tr>').find((r) => r.includes(`title="chain-rpc/${name}"`)) ?? ''
  t.match(rowOf('alchemy'), /data-label="State" class="state ">healthy</)
  t.match(rowOf('alchemy'), /data-label="Requests" class="r">2</)
  t.match(rowOf('alchemy'), /data-label="Mean latency" class="r">20 ms</, 'mean of 10 and 30 ms')
  t.match(rowOf('alchemy'), /data-label="Retries" class="r">3</)
  t.match(rowOf('alchemy'), /data-label="Hedges" class="r">2</)
  t.notMatch(text, /data-label="Coalesced"/, 'coalesced requests reach no target: no per-target column')
  t.match(text, /chain-rpc <span class="muted small">[^<]*· 0 coalesced \(answered from an identical request in flight, reaching no target\)/, 'the pool counts them in its caption')
  pool.coalesced = 7
  t.match(upstreamsFragment([pool], now).text, /· 7 coalesced/, 'the pool\'s own count')
  t.match(rowOf('public'), /ejected, 30 s left/)
  t.match(rowOf('public'), /data-label="Errors" class="r bad">2 \(100\.0%\)</)
  t.match(rowOf('public'), /data-label="Ejections" class="r">1</)
  t.match(rowOf('limited'), /429 back-off, 4 s left/)
  t.match(rowOf('limited'), /data-label="429 answers" class="r bad">1</)
  t.match(rowOf('3'), /down \(probe\)/, 'an unnamed target is labelled by its index')
  t.notMatch(text, /<img/, 'the zone label is escaped')
  t.match(text, /&lt;img src=x onerror=alert\(1\)&gt;/)
  t.notMatch(text, /SECRETKEY|127\.0\.0\.1/, 'no URL on the page')
  t.notMatch(text, /\sstyle=|<script/, 'no inline style or script (CSP)')

  t.match(upstreamsFragment([]).text, /No upstreams configured/)
  t.match(upstreamsSection([mirror]).text, /<section class="card" aria-labelledby="upstreams-title"><h2 id="upstreams-title">Upstream targets<\/h2>[\s\S]*data-live="\/dashboard\/fragments\/upstreams"/)
})

t.test('through a gateway: the operator sees a dead target ejected and the live one carrying the traffic', async (t) => {
  t.setTimeout(180_000)
  const up = await startTestUpstream()
  t.teardown(() => up.close())
  const dead = await closedPort()
  const admin = `admin_${randomBytes(10).toString('hex')}`
  const key = `tk_up_${randomBytes(10).toString('hex')}`
  const gw = await startGatewayProcess(`
version: 1
server: { listen: { host: 127.0.0.1, port: 0 } }
admin: { listen: { host: 127.0.0.1, port: 0 }, tokenHash: ${hashCredential(admin)} }
store: { dataDir: '{{DIR}}/data' }
log: { access: false }
watch: false
projects:
  - { id: acme, scopes: [rpc], credits: { allocation: 1000, period: month }, keys: [{ label: main, hash: ${hashCredential(key)} }] }
upstreams:
  echo:
    targets:
      - { name: dead, url: 'http://127.0.0.1:${dead}/key/SECRET', weight: 100, zone: eu-1 }
      - { name: live, url: '${up.url}/key/SECRET', zone: us-1 }
    timeouts: { connectMs: 500 }
    health: { consecutiveFailures: 1, baseEjectionMs: 60000, maxEjectionMs: 60000 }
routes:
  - name: rpc
    path: /rpc/:apiKey/*rest
    rewrite: /*rest
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { scope: rpc } }
`, { startTimeoutMs: 90_000 })
  t.teardown(() => gw.stop())
  const bearer = { authorization: `Bearer ${admin}` }
  const password = `pw-${randomBytes(9).toString('base64url')}`
  t.equal((await send(gw.adminUrl, 'POST', '/admin/users', { body: { email: 'ops@example.com', password, role: 'operator' }, headers: bearer })).status, 201)
  t.equal((await send(gw.adminUrl, 'POST', '/admin/users', { body: { email: 'dev@example.com', password, role: 'owner', projects: ['acme'] }, headers: bearer })).status, 201)
  for (let i = 0; i < 5; i++) t.equal((await send(gw.url, 'GET', `/rpc/${key}/item-${i}`)).status, 200, 'GETs fail over to the live target')

  const session = async (email: string) => {
    const res = await send(gw.adminUrl, 'POST', '/admin/session', { body: { email, password } })
    return new RegExp(`${SESSION_COOKIE}=([^;]+)`).exec(String(res.headers['set-cookie']))![1]
  }
  const get = async (path: string, token: string) => {
    const res = await request(gw.adminUrl + path, { headers: { cookie: `${SESSION_COOKIE}=${token}` } })
    return { status: res.statusCode, body: await res.body.text() }
  }
  const operator = await session('ops@example.com')
  const page = await get('/dashboard/operator', operator)
  t.equal(page.status, 200)
  t.match(page.body, /<h2 id="upstreams-title">Upstream targets<\/h2>/)
  const fragment = await get('/dashboard/fragments/upstreams', operator)
  t.equal(fragment.status, 200)
  for (const body of [page.body, fragment.body]) {
    const row = (name: string) => body.split('<tr>').find((r) => r.includes(`title="echo/${name}"`)) ?? ''
    t.match(row('dead'), /ejected, \d+ s left/)
    t.match(row('dead'), /data-label="Errors" class="r bad">1 \(100\.0%\)</)
    t.match(row('dead'), /data-label="Ejections" class="r">1</)
    t.match(row('dead'), /<span class="chip" title="zone">eu-1</)
    t.match(row('live'), /data-label="State" class="state ">healthy</)
    t.match(row('live'), /data-label="Requests" class="r">5</)
    t.match(row('live'), /data-label="Retries" class="r">1</, 'the first GET was retried on live')
    t.match(row('live'), /data-label="Mean latency" class="r">[\d.]+ m?s</)
    t.match(body, /echo <span class="muted small">· 1 of 2 healthy/)
    t.notMatch(body, /SECRET|127\.0\.0\.1/, 'no target URL')
  }
  const owner = await session('dev@example.com')
  t.equal((await get('/dashboard/operator', owner)).status, 403, 'the operator view is for operators')
  const refused = await get('/dashboard/fragments/upstreams', owner)
  t.equal(refused.status, 404, 'an owner gets no upstream fragment')
  t.notMatch(refused.body, /echo\/dead/)
})
