/**
 * Accessibility and phone layout of every dashboard page, in both roles (operator, owner) and at
 * both sizes (desktop 1320×900, phone 390×844), in Debian chromium against a real gateway process.
 * axe-core (the devDependency, read from node_modules and evaluated in the page: never a CDN) must
 * report no serious or critical violation (WCAG 2.0–2.2 A/AA rules), and no page may scroll
 * sideways. Per-page counts go to the test's output and to axe-counts.json beside the
 * screenshots (SHOTS_DIR, default a temp dir).
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Browser, Page } from 'playwright-core'
import { hashCredential } from '../../core/projects/projects.ts'
import { startGatewayProcess } from '../helpers/gateway-process.ts'
import { send } from '../helpers/admin-client.ts'
import { launchBrowser } from '../helpers/browser.ts'
import { startTestUpstream } from '../helpers/upstream.ts'
import { createServer } from 'node:http'
import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import { linkedPage, publicAsset, sendRefusal } from '../../core/workstations/sign-in-cookies.ts'
import { ProcessDriver } from '../../core/workstations/process-driver.ts'
import { tempDir } from '../helpers/temp.ts'
import { killAllUnder, relayToTarget } from '../helpers/terminal-servers.ts'

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')
const SHOTS = process.env.SHOTS_DIR ?? join(tmpdir(), 'tollgate-dashboard-shots')
const ADMIN_TOKEN = `admin_${randomBytes(12).toString('hex')}`
const KEY = `tk_a11y_${randomBytes(12).toString('hex')}`
const bearer = { authorization: `Bearer ${ADMIN_TOKEN}` }
const OPERATOR = { email: 'ops@example.com', password: `op-${randomBytes(9).toString('base64url')}` }
const OWNER = { email: 'dev@acme.io', password: `dev-${randomBytes(9).toString('base64url')}` }
const LONG_NAME = 'Long'.repeat(50)
const SIZES = { desktop: { width: 1320, height: 900 }, phone: { width: 390, height: 844 } } as const

function config(upstream: string): string {
  return `
version: 1
server: { listen: { host: 127.0.0.1, port: 0 } }
admin: { listen: { host: 127.0.0.1, port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
log: { access: false }
watch: false
projects:
  - id: acme
    name: Acme Rollups
    plan: enterprise
    scopes: [rpc]
    credits: { allocation: 1000, period: month }
    keys: [{ label: seed, hash: ${hashCredential(KEY)} }]
    alerts: { url: 'http://127.0.0.1:9/hook', secret: a11y-webhook-secret-0123, thresholds: [{ percent: 20 }, { remaining: 100 }] }
  - { id: ${'long-'.repeat(12)}x, name: ${LONG_NAME}, plan: standard, scopes: [zkpaas], credits: { allocation: 500, period: month }, keys: [] }
upstreams:
  echo: { url: '${upstream}' }
routes:
  - name: rpc
    path: /rpc/:apiKey/*rest
    rewrite: /*rest
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { scope: rpc } }
      - { name: credit-meter, config: { apiType: PRIVNET_RPC, cost: 2 } }
  - name: zk
    path: /zk/:apiKey/*rest
    rewrite: /*rest
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { scope: zkpaas } }
      - { name: credit-meter, config: { apiType: PRIVNET_ZKPAAS, cost: 5 } }
`
}

interface AxeResult {
  violations: { id: string; impact: string | null; nodes: { target: unknown[] }[] }[]
}

/** axe on the page as it is: serious and critical violations, and the width the page scrolls to. */
async function audit(page: Page): Promise<{ serious: string[]; all: number; scrollWidth: number; width: number }> {
  await page.evaluate(AXE_SOURCE)
  const result = (await page.evaluate(() =>
    (globalThis as any).axe.run((globalThis as any).document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa'] } }),
  )) as AxeResult
  const serious = result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}, ${v.nodes.length} nodes: ${v.nodes.slice(0, 3).map((n) => JSON.stringify(n.target)).join(' ')})`)
  const all = result.violations.reduce((sum, v) => sum + v.nodes.length, 0)
  const { scrollWidth, width } = await page.evaluate(() => ({ scrollWidth: (globalThis as any).document.documentElement.scrollWidth as number, width: (globalThis as any).innerWidth as number }))
  return { serious, all, scrollWidth, width }
}

async function signIn(page: Page, base: string, who: { email: string; password: string }): Promise<void> {
  await page.goto(base + '/dashboard/sign-in')
  await page.fill('input[name=email]', who.email)
  await page.fill('input[name=password]', who.password)
  await page.click('#sign-in button[type=submit]')
  await page.waitForURL(/\/dashboard\/projects$/)
}

t.test('every dashboard page: axe finds no serious or critical violation, no sideways scroll', async (t) => {
  t.setTimeout(300_000)
  const browser = await launchBrowser(t)
  if (!browser) return
  mkdirSync(SHOTS, { recursive: true })
  const up = await startTestUpstream()
  t.teardown(() => up.close())
  const gw = await startGatewayProcess(config(up.url), { startTimeoutMs: 90_000 })
  t.teardown(() => gw.stop())
  const admin = (method: string, path: string, body?: unknown) => send(gw.adminUrl, method, path, { body, headers: bearer })
  t.equal((await admin('POST', '/admin/users', { ...OPERATOR, role: 'operator' })).status, 201)
  t.equal((await admin('POST', '/admin/users', { ...OWNER, role: 'owner', projects: ['acme'] })).status, 201)
  // Traffic (answers and refusals) so the tables and the chart have rows.
  for (let i = 0; i < 6; i++) await send(gw.url, 'GET', `/rpc/${KEY}/ok-${i}`)
  for (let i = 0; i < 3; i++) await send(gw.url, 'GET', `/rpc/${KEY}/status/404`)
  for (let i = 0; i < 3; i++) await send(gw.url, 'GET', `/zk/${KEY}/refused`)
  await send(gw.url, 'GET', `/rpc/tk_unknown_key/x`)
  t.equal((await admin('POST', '/admin/projects/acme/keys/seed/rotate', { graceSeconds: 3600 })).status, 200, 'a rotation leaves a row in its grace')

  const counts: Record<string, { serious: number; all: number; scrollWidth: number }> = {}
  const pages: Record<'operator' | 'owner', string[]> = {
    operator: ['/dashboard/projects', '/dashboard/projects/acme', `/dashboard/projects/${'long-'.repeat(12)}x`, '/dashboard/operator', '/dashboard/alerts', '/dashboard/accounts', '/dashboard/no-such-page'],
    owner: ['/dashboard/projects', '/dashboard/projects/acme', '/dashboard/alerts', '/dashboard/accounts', '/dashboard/operator'],
  }
  const check = async (page: Page, name: string) => {
    // The live regions and the chart have drawn.
    await page.waitForLoadState('networkidle')
    const result = await audit(page)
    counts[name] = { serious: result.serious.length, all: result.all, scrollWidth: result.scrollWidth }
    await page.screenshot({ path: join(SHOTS, `a11y-${name.replaceAll('/', '_')}.png`), fullPage: true })
    if (result.serious.length) t.comment(`${name}: ${result.serious.join('; ')}`)
    t.same(result.serious, [], `${name}: no serious or critical axe violation`)
    t.ok(result.scrollWidth <= result.width, `${name}: no sideways scroll (${result.scrollWidth} px in ${result.width} px)`)
  }
  for (const [size, viewport] of Object.entries(SIZES)) {
    const context = await (browser as Browser).newContext({ viewport })
    const page = await context.newPage()
    await page.goto(gw.adminUrl + '/dashboard/sign-in')
    await check(page, `${size} signed-out /dashboard/sign-in`)
    for (const role of ['operator', 'owner'] as const) {
      await signIn(page, gw.adminUrl, role === 'operator' ? OPERATOR : OWNER)
      for (const path of pages[role]) {
        await page.goto(gw.adminUrl + path)
        await check(page, `${size} ${role} ${path}`)
        if (role === 'operator' && path === '/dashboard/projects/acme') {
          // The settings card open, and the alert-threshold form showing a refusal under its field.
          await page.click('#project-settings > summary')
          await page.fill('#thresholds-form input[name=thresholds]', '20%, lots')
          await page.click('#thresholds-form button[type=submit]')
          await page.locator('#thresholds-form [data-error-for=thresholds]').waitFor({ state: 'visible' })
          await check(page, `${size} ${role} ${path} settings+thresholds`)
        }
      }
      await page.click('[data-action=sign-out]')
      await page.waitForURL(/sign-in$/)
    }
    await context.close()
  }
  writeFileSync(join(SHOTS, 'axe-counts.json'), JSON.stringify(counts, null, 2))
  t.comment(JSON.stringify(counts, null, 1))
})

/**
 * The pages outside the dashboard a person meets: the workstation terminal (a real terminal server
 * started by the process driver, relayed to a port), a workstation tab's refusal as a page, and the "Identity linked" page with the
 * stylesheet the public listener serves (a server answering with the public routes' own functions).
 * Same rules: no serious or critical axe finding, no sideways scroll, no CSP violation.
 */
t.test('terminal and Identity linked pages: axe, phone width, stylesheet under the CSP', async (t) => {
  t.setTimeout(180_000)
  const browser = await launchBrowser(t)
  if (!browser) return
  mkdirSync(SHOTS, { recursive: true })
  const linked = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname
    if (path === '/workstations/_auth/linked') return linkedPage(res)
    if (publicAsset(res, path)) return
    // What a workstation tab shows when the workstation is not running (a refusal, as a page).
    sendRefusal(res, 409, 'workstation_not_running', 'the workstation of acme is stopped: start it first')
  }).listen(0, '127.0.0.1')
  await once(linked, 'listening')
  t.teardown(() => linked.close())
  const linkedUrl = `http://127.0.0.1:${(linked.address() as AddressInfo).port}/workstations/_auth/linked`
  const root = tempDir('tollgate-a11y-term-')
  const driver = new ProcessDriver({ root, stopGraceMs: 2_000 })
  await driver.provision('a11y')
  const handle = await driver.start('a11y')
  t.teardown(async () => {
    await driver.stop(handle)
    killAllUnder(root)
  })
  const relay = await relayToTarget(handle.target!)
  t.teardown(() => relay.close())

  const file = join(SHOTS, 'axe-counts.json')
  let counts: Record<string, { serious: number; all: number; scrollWidth: number }> = {}
  try {
    counts = JSON.parse(readFileSync(file, 'utf8'))
  } catch {}
  for (const [size, viewport] of Object.entries(SIZES)) {
    const context = await (browser as Browser).newContext({ viewport })
    const page = await context.newPage()
    const violations: string[] = []
    page.on('console', (m) => { if (/Content Security Policy|Refused to/.test(m.text())) violations.push(m.text()) })
    const pages: [string, string][] = [['workstation terminal', `${relay.url}/`], ['workstation refusal', linkedUrl.replace('_auth/linked', 'acme/')], ['Identity linked', linkedUrl]]
    for (const [name, url] of pages) {
      await page.goto(url)
      if (name === 'workstation terminal') await page.waitForFunction(() => (globalThis as any).workstationSocket?.readyState === 1, undefined, { timeout: 30_000 })
      await page.waitForLoadState('networkidle')
      const result = await audit(page)
      counts[`${size} ${name}`] = { serious: result.serious.length, all: result.all, scrollWidth: result.scrollWidth }
      await page.screenshot({ path: join(SHOTS, `a11y-${size}-${name.replaceAll(' ', '-')}.png`), fullPage: true })
      if (result.serious.length) t.comment(`${size} ${name}: ${result.serious.join('; ')}`)
      t.same(result.serious, [], `${size} ${name}: no serious or critical axe violation`)
      t.ok(result.scrollWidth <= result.width, `${size} ${name}: no sideways scroll (${result.scrollWidth} px in ${result.width} px)`)
    }
    // The linked page is the dashboard's look: its stylesheet applied (the card), under its CSP.
    const styled = await page.evaluate(() => {
      const doc = (globalThis as any).document
      const card = doc.querySelector('section.card')
      return { lang: doc.documentElement.lang, sheets: doc.styleSheets.length, radius: (globalThis as any).getComputedStyle(card).borderTopLeftRadius, next: doc.querySelector('form[action="/workstations/_auth/login"] button')?.textContent }
    })
    t.equal(styled.lang, 'en')
    t.equal(styled.sheets, 1, 'the dashboard stylesheet loaded')
    t.not(styled.radius, '0px', 'the card is styled')
    t.equal(styled.next, 'Open its workstation', 'a next step')
    t.same(violations, [], `${size}: no CSP violation`)
    await context.close()
  }
  writeFileSync(file, JSON.stringify(counts, null, 2))
  t.comment(JSON.stringify(counts, null, 1))
})
