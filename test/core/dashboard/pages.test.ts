/**
 * The dashboard's templates and server side without a browser: escaping of every interpolated
 * value, the chart and route aggregations, and a real gateway's /dashboard answers without a
 * session (sign-in redirect, 401 for live fragments, the CSP and security headers, no inline
 * script or style anywhere, the vendored uPlot served from the package).
 */
import t from 'tap'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { request } from 'undici'
import { escapeHtml, html } from '../../../core/dashboard/html.ts'
import { accountRow, chartOf, routeStats, WINDOW_HOURS } from '../../../core/dashboard/data.ts'
import { accountsPage } from '../../../core/dashboard/accounts-page.ts'
import { signInPage } from '../../../core/dashboard/pages.ts'
import { CONTENT_SECURITY_POLICY } from '../../../core/dashboard/index.ts'
import { startGatewayProcess } from '../../helpers/gateway-process.ts'

t.test('html escapes every value, keeps nested html', async (t) => {
  const name = `<img src=x onerror="alert(1)">&'`
  t.equal(html`<p title="${name}">${name}</p>`.text, `<p title="${escapeHtml(name)}">${escapeHtml(name)}</p>`)
  t.notMatch(html`<p>${name}</p>`.text, /<img/)
  t.equal(html`<ul>${['a<', 'b'].map((x) => html`<li>${x}</li>`)}</ul>`.text, '<ul><li>a&lt;</li><li>b</li></ul>')
  t.equal(html`${undefined}${null}${false}${0}`.text, '0')
})

t.test('chart: 24 zero-filled hours per API type; routes busiest first with mean latency', async (t) => {
  const now = Date.UTC(2026, 10, 24, 15, 20)
  const chart = chartOf(
    [
      { bucket: '2026-11-24T15:00:00.000Z', apiType: 'PRIVNET_RPC', requests: 5, credits: 5, errors: 0 },
      { bucket: '2026-11-24T13:00:00.000Z', apiType: 'MIRROR', requests: 2, credits: 1, errors: 1 },
      { bucket: '2026-11-20T13:00:00.000Z', apiType: 'MIRROR', requests: 99, credits: 1, errors: 1 },
    ],
    now,
  )
  t.equal(chart.x.length, WINDOW_HOURS)
  t.equal(chart.x.at(-1), Date.UTC(2026, 10, 24, 15) / 1000, 'the last point is the current hour')
  t.same(chart.series.map((s) => s.apiType), ['MIRROR', 'PRIVNET_RPC'])
  t.equal(chart.series[0]!.requests.at(-3), 2)
  t.equal(chart.series[0]!.requests.reduce((a, b) => a + b), 2, 'rows outside the window are left out')
  t.equal(chart.series[1]!.requests.at(-1), 5)
  const routes = routeStats([
    { bucket: 'b', apiType: 'MIRROR', route: 'a', statusClass: '2xx', requests: 1, credits: 1, errors: 0, latencyMsSum: 10, latencyMsMax: 10 },
    { bucket: 'b', apiType: 'MIRROR', route: 'b', statusClass: '2xx', requests: 3, credits: 3, errors: 0, latencyMsSum: 30, latencyMsMax: 20 },
    { bucket: 'b', apiType: 'MIRROR', route: 'b', statusClass: '5xx', requests: 1, credits: 0, errors: 1, latencyMsSum: 50, latencyMsMax: 50 },
  ])
  t.same(routes.map((r) => [r.route, r.requests, r.errors, r.meanLatencyMs, r.maxLatencyMs]), [['b', 4, 1, 20, 50], ['a', 1, 0, 10, 10]])
})

t.test('pages carry no inline script or style', async (t) => {
  const accounts = accountsPage({ user: 'ops@example.com', userId: 'u1', operator: true, csrfToken: 'c' }, [], ['acme'])
  for (const page of [signInPage(), accounts]) {
    t.notMatch(page, /<script(?![^>]*\bsrc=)[^>]*>/, 'every script has a src')
    t.notMatch(page, /\sstyle=/, 'no style attributes')
    t.notMatch(page, /\son[a-z]+=/, 'no inline event handlers')
  }
})

t.test('accounts page: no hash, emails escaped, your own row cannot be deleted', async (t) => {
  const viewer = { user: 'ops@example.com', userId: 'u1', operator: true, csrfToken: 'c' }
  const markup = '<img/src=x/onerror=alert(1)>@x.io'
  const rows = [
    accountRow({ id: 'u1', email: 'ops@example.com', role: 'operator', passwordHash: 'scrypt$16384$8$1$salt$secret-hash', projects: [], createdAt: 0, updatedAt: 0 }),
    accountRow({ id: 'u2', email: markup, role: 'owner', passwordHash: 'scrypt$16384$8$1$salt$other-hash', projects: ['acme'], createdAt: 0, updatedAt: 0 }),
  ]
  t.notOk('passwordHash' in rows[0]!, 'an account row has no hash')
  const page = accountsPage(viewer, rows, ['acme'])
  t.notMatch(page, /scrypt|secret-hash|other-hash/, 'no hash on the page')
  t.notMatch(page, /<img/, 'the email is escaped')
  t.match(page, escapeHtml(markup))
  t.match(page, /<tr data-user="u1"[^>]*data-self="true"[\s\S]*?data-action="delete-user" disabled/, 'your own Delete is disabled')
  t.match(page, /<tr data-user="u2"[^>]*data-self="false"[\s\S]*?data-action="delete-user" >Delete/, "another's is not")
})

t.test('a real gateway: /dashboard without a session', async (t) => {
  t.setTimeout(120_000)
  const gw = await startGatewayProcess(`
version: 1
server: { listen: { port: 0 } }
admin: { listen: { port: 0 } }
store: { dataDir: '{{DIR}}/data' }
watch: false
routes: []
`, { startTimeoutMs: 90_000 })
  t.teardown(() => gw.stop())
  const get = async (path: string) => {
    const res = await request(gw.adminUrl + path)
    return { status: res.statusCode, headers: res.headers, body: await res.body.text() }
  }
  const root = await get('/dashboard')
  t.equal(root.status, 303)
  t.equal(root.headers.location, '/dashboard/sign-in', 'a page without a session goes to sign-in')
  t.equal((await get('/dashboard/projects/acme')).headers.location, '/dashboard/sign-in')
  const fragment = await get('/dashboard/fragments/projects')
  t.equal(fragment.status, 401, 'a live fragment tells the island to sign in again')
  t.match(JSON.parse(fragment.body), { error: { code: 'session_required' } })
  const signIn = await get('/dashboard/sign-in')
  t.equal(signIn.status, 200)
  t.equal(signIn.headers['content-security-policy'], CONTENT_SECURITY_POLICY)
  t.match(CONTENT_SECURITY_POLICY, /script-src 'self';/)
  t.notMatch(CONTENT_SECURITY_POLICY, /unsafe-inline|unsafe-eval/)
  t.equal(signIn.headers['x-content-type-options'], 'nosniff')
  t.equal(signIn.headers['x-frame-options'], 'DENY')
  t.match(signIn.body, /<form id="sign-in"/)
  const uplot = await get('/dashboard/assets/uPlot.iife.min.js')
  t.equal(uplot.status, 200)
  t.match(uplot.headers['content-type'], /^text\/javascript/)
  const dist = dirname(createRequire(import.meta.url).resolve('uplot'))
  t.equal(uplot.body, readFileSync(join(dist, 'uPlot.iife.min.js'), 'utf8'), 'uPlot is served from the installed package')
  t.equal((await get('/dashboard/assets/uPlot.min.css')).status, 200)
  const app = await get('/dashboard/assets/app.js')
  t.equal(app.status, 200)
  t.notMatch(app.body, /\beval\(|new Function\(/, 'the islands use no eval')
  const again = await request(gw.adminUrl + '/dashboard/assets/app.js', { headers: { 'if-none-match': String(app.headers.etag) } })
  await again.body.text()
  t.equal(again.statusCode, 304, 'assets are revalidated by ETag')
  t.equal((await get('/dashboard/assets/..%2Fgateway.ts')).status, 404, 'only the named files are served')
  t.equal((await get('/dashboard/assets/nope.js')).status, 404)

  // A browser opening an API URL gets a page with the next step; clients keep the JSON.
  const navigated = await request(gw.adminUrl + '/admin/projects', { headers: { 'sec-fetch-mode': 'navigate', accept: 'text/html' } })
  const page = await navigated.body.text()
  t.equal(navigated.statusCode, 401)
  t.match(navigated.headers['content-type'], /^text\/html/)
  t.equal(navigated.headers['content-security-policy'], CONTENT_SECURITY_POLICY)
  t.match(page, /<html lang="en">[\s\S]*Sign in required[\s\S]*href="\/dashboard\/sign-in"/)
  const plainHtml = await request(gw.adminUrl + '/admin/projects', { headers: { accept: 'text/html' } })
  t.match(plainHtml.headers['content-type'], /^text\/html/, 'negotiated on Accept too (a browser without Fetch Metadata)')
  await plainHtml.body.dump()
  const api = await request(gw.adminUrl + '/admin/projects')
  t.match(JSON.parse(await api.body.text()), { error: { code: String } }, 'the API answers JSON to a client')
  t.match(api.headers['content-type'], /^application\/json/)
})

t.test('pages: lang, skip link, no empty header; a key in its grace offers no Rotate or Disable', async (t) => {
  const { keysFragment, projectPage, projectsPage, messagePage } = await import('../../../core/dashboard/pages.ts')
  const viewer = { user: 'ops@example.com', userId: 'u1', operator: true, csrfToken: 'c' }
  const now = Date.now()
  const project = {
    id: 'acme', name: 'Acme', plan: 'standard', scopes: new Set(['rpc']), features: {}, credits: { allocation: 100, period: 'month' },
    keys: [
      { label: 'app.rotated-abc', hash: 'h1', disabled: false, expiresAt: now + 60_000 },
      { label: 'app', hash: 'h2', disabled: false },
    ],
  } as any
  const summary = {
    project, balance: { period: '2026-11', allocation: 100, granted: 50, used: 10, pending: 0, remaining: 140, total: 150, percentLeft: 93 },
    window: { requests: 0, credits: 0, errors: 0, workstationMinutes: 0 }, statusClasses: {}, routes: [],
    chart: { x: [], series: [], workstationMinutes: [], refusals: [] }, alerts: [],
    traffic: { answers: [{ answer: '403 wrong_plan', count: 3, refusal: true }], total: 3, failed: 3, refusals: 3, keys: { app: { requests: 3, refusals: 3, lastUsed: now } } },
  } as any
  for (const page of [projectPage(viewer, summary), projectsPage(viewer, [summary]), messagePage(viewer, 'Not found', 'x'), signInPage()]) {
    t.match(page, /<html lang="en">/)
    t.match(page, /<a class="skip" href="#main">/)
    t.notMatch(page, /<th(?: class="[^"]*")?><\/th>/, 'no empty table header')
  }
  const keys = keysFragment(summary).text
  t.match(keys, /<tr data-key="app">[\s\S]*data-action="rotate-key"/)
  const leftover = keys.slice(keys.indexOf('data-key="app.rotated-abc"'))
  t.notMatch(leftover, /data-action="(?:rotate|disable)-key"/, 'the leftover offers neither')
  t.ok(keys.indexOf('data-key="app"') < keys.indexOf('data-key="app.rotated-abc"'), 'sorted by label: the leftover after its successor')
  t.match(projectPage(viewer, summary), /this project is on standard/, 'the page says which plan refused')
  t.match(projectPage(viewer, summary), /Granted<\/dt><dd>50</)
  // Browsers compile `pattern` with the v flag: an invalid one is ignored (with a console error), so the rule would not hold.
  const { newProjectCard } = await import('../../../core/dashboard/operator-forms.ts')
  const { accountsPage } = await import('../../../core/dashboard/accounts-page.ts')
  const forms = [projectPage(viewer, summary), signInPage(), newProjectCard().text, accountsPage(viewer, [], ['acme'])].join('')
  const patterns = [...forms.matchAll(/pattern="([^"]*)"/g)].map((m) => m[1]!.replaceAll('&amp;', '&'))
  t.ok(patterns.length > 0)
  for (const pattern of patterns) t.doesNotThrow(() => new RegExp(`^(?:${pattern})$`, 'v'), `pattern ${pattern} is valid with the v flag`)
})
