/**
 * The operator page's Upstream targets panel in chromium at desktop (1320×900) and phone (390×844)
 * sizes, against a real gateway whose pool has a dead target and a live one: axe-core (from
 * node_modules, as in dashboard-a11y.test.ts) finds no serious or critical violation, the page
 * does not scroll sideways, every figure of a target is visible on the phone (label and value),
 * and the live fragment redraws it. Screenshots: test-artifacts/dashboard-upstreams-*.png.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import type { Page } from 'playwright-core'
import { hashCredential } from '../../core/projects/projects.ts'
import { send } from '../helpers/admin-client.ts'
import { ARTIFACTS, launchBrowser } from '../helpers/browser.ts'
import { startGatewayProcess } from '../helpers/gateway-process.ts'
import { closedPort, startTestUpstream } from '../helpers/upstream.ts'

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')
const SIZES = { desktop: { width: 1320, height: 900 }, phone: { width: 390, height: 844 } } as const

async function audit(page: Page) {
  await page.evaluate(AXE_SOURCE)
  const result = (await page.evaluate(() =>
    (globalThis as any).axe.run((globalThis as any).document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa'] } }),
  )) as { violations: { id: string; impact: string | null; nodes: { target: unknown[] }[] }[] }
  const serious = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id}: ${JSON.stringify(v.nodes.slice(0, 3).map((n) => n.target))}`)
  const { scrollWidth, width } = await page.evaluate(() => ({ scrollWidth: (globalThis as any).document.documentElement.scrollWidth as number, width: (globalThis as any).innerWidth as number }))
  return { serious, scrollWidth, width }
}

t.test('Upstream targets panel: accessible, no sideways scroll, readable on a phone', async (t) => {
  t.setTimeout(300_000)
  const browser = await launchBrowser(t)
  if (!browser) return
  const up = await startTestUpstream()
  t.teardown(() => up.close())
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
  base-sepolia-rpc-with-a-long-name:
    targets:
      - { name: dead-node-in-frankfurt, url: 'http://127.0.0.1:${await closedPort()}', weight: 100, zone: eu-central-1 }
      - { name: live, url: '${up.url}', zone: us-east-1 }
    timeouts: { connectMs: 500 }
    health: { consecutiveFailures: 1, baseEjectionMs: 60000, maxEjectionMs: 60000 }
routes:
  - name: rpc
    path: /rpc/:apiKey/*rest
    rewrite: /*rest
    upstream: base-sepolia-rpc-with-a-long-name
    plugins:
      - { name: key-in-path-auth, config: { scope: rpc } }
`, { startTimeoutMs: 90_000 })
  t.teardown(() => gw.stop())
  const password = `pw-${randomBytes(9).toString('base64url')}`
  t.equal((await send(gw.adminUrl, 'POST', '/admin/users', { body: { email: 'ops@example.com', password, role: 'operator' }, headers: { authorization: `Bearer ${admin}` } })).status, 201)
  for (let i = 0; i < 3; i++) await send(gw.url, 'GET', `/rpc/${key}/x-${i}`)

  for (const [size, viewport] of Object.entries(SIZES)) {
    const context = await browser.newContext({ viewport })
    const page = await context.newPage()
    await page.goto(gw.adminUrl + '/dashboard/sign-in')
    await page.fill('input[name=email]', 'ops@example.com')
    await page.fill('input[name=password]', password)
    await page.click('#sign-in button[type=submit]')
    await page.waitForURL(/\/dashboard\/projects$/)
    await page.goto(gw.adminUrl + '/dashboard/operator')
    await page.waitForLoadState('networkidle')
    const result = await audit(page)
    await page.screenshot({ path: join(ARTIFACTS, `dashboard-upstreams-${size}.png`), fullPage: true })
    t.same(result.serious, [], `${size}: no serious or critical axe violation`)
    t.ok(result.scrollWidth <= result.width, `${size}: no sideways scroll (${result.scrollWidth} px in ${result.width} px)`)
    const table = page.getByRole('table', { name: /base-sepolia-rpc-with-a-long-name/ })
    await t.resolves(table.waitFor(), `${size}: the table is named by its caption`)
    const live = table.getByRole('row', { name: /live/ })
    t.match(await live.innerText(), /healthy/)
    const requests = live.locator('td[data-label="Requests"]')
    t.ok(await requests.isVisible(), `${size}: the figures are visible`)
    if (size === 'phone') {
      const box = await requests.boundingBox()
      t.ok(box && box.x >= 0 && box.x + box.width <= viewport.width, 'a figure lies within the phone screen')
      const label = await requests.evaluate((el) => (globalThis as any).getComputedStyle(el, '::before').content as string)
      t.equal(label, '"Requests"', 'with its label beside it')
    }
    // The live region redraws the panel with new figures.
    const before = Number((await requests.textContent())?.replace(/\D/g, ''))
    await send(gw.url, 'GET', `/rpc/${key}/more`)
    await page.waitForFunction((n) => Number((globalThis as any).document.querySelector('tr:has(span[title$="/live"]) td[data-label="Requests"]')?.textContent?.replace(/\D/g, '')) === n + 1, before, { timeout: 15_000 })
    t.pass(`${size}: the live fragment refreshed the figures`)
    await context.close()
  }
})
