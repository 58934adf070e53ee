/**
 * The dashboard as a console, walked in Debian chromium against a real gateway process by an
 * operator and then by the owner the operator creates: a new project from the Projects page (its
 * rule shown under the field, cleared on input), an owner for it on the Accounts page, a key with
 * the one-time dialog's Copy button (the clipboard holds the key; the key leaves the DOM when the
 * dialog closes), refused traffic by reason (403 wrong_plan, 403 wrong_scope) in the answers table,
 * the tiles, the key's row and the CSV export, a plan change that lets the refused route through, a
 * top-up shown in the ledger's terms, rotation with its grace chosen in a confirmation (the leftover
 * row offers no Rotate), disabling after a confirmation, and the phone layout (390×844, no sideways
 * scroll). Screenshots: SHOTS_DIR (default a temp dir), console-*.png.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { mkdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { request as playwrightRequest, type Page } from 'playwright-core'
import type { Test } from 'tap'
import { hashCredential } from '../../core/projects/projects.ts'
import { startGatewayProcess } from '../helpers/gateway-process.ts'
import { send } from '../helpers/admin-client.ts'
import { launchBrowser } from '../helpers/browser.ts'
import { startTestUpstream } from '../helpers/upstream.ts'

const SHOTS = process.env.SHOTS_DIR ?? join(tmpdir(), 'tollgate-dashboard-shots')
const ADMIN_TOKEN = `admin_${randomBytes(12).toString('hex')}`
const OPERATOR = { email: 'ops@example.com', password: `op-${randomBytes(9).toString('base64url')}` }
const OWNER = { email: 'owner@walk.io', password: `own-${randomBytes(9).toString('base64url')}` }
const PHONE = { width: 390, height: 844 }

function config(upstream: string): string {
  return `
version: 1
server: { listen: { host: 127.0.0.1, port: 0 } }
admin: { listen: { host: 127.0.0.1, port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
log: { access: false }
watch: false
projects: []
upstreams:
  echo: { url: '${upstream}' }
routes:
  - name: rpc
    path: /rpc/:apiKey/*rest
    rewrite: /*rest
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { scope: rpc } }
      - { name: credit-meter, config: { apiType: PRIVNET_RPC, cost: 1 } }
  - name: premium
    path: /premium/:apiKey/*rest
    rewrite: /*rest
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { scope: rpc, plans: [enterprise] } }
      - { name: credit-meter, config: { apiType: PRIVNET_RPC, cost: 1 } }
  - name: zk
    path: /zk/:apiKey/*rest
    rewrite: /*rest
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { scope: zkpaas } }
      - { name: credit-meter, config: { apiType: PRIVNET_ZKPAAS, cost: 5 } }
`
}

async function until(what: string, probe: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 200))
  }
}

const number = (text: string | null) => Number((text ?? '').replace(/[^0-9]/g, ''))

function watch(page: Page): string[] {
  const problems: string[] = []
  page.on('console', (m) => {
    if (/Content Security Policy|Refused to/i.test(m.text())) problems.push(m.text())
  })
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`))
  return problems
}

async function signIn(page: Page, base: string, who: { email: string; password: string }): Promise<void> {
  await page.goto(base + '/dashboard/sign-in')
  await page.fill('input[name=email]', who.email)
  await page.fill('input[name=password]', who.password)
  await page.click('#sign-in button[type=submit]')
  await page.waitForURL(/\/dashboard\/projects$/)
}

async function noSidewaysScroll(page: Page): Promise<{ scrollWidth: number; width: number }> {
  return page.evaluate(() => ({ scrollWidth: (globalThis as any).document.documentElement.scrollWidth as number, width: (globalThis as any).innerWidth as number }))
}

/** Creates a key on the project page, copies it with the dialog's button, closes the dialog; returns the key. */
async function createAndCopyKey(t: Test, page: Page, label: string): Promise<string> {
  await page.fill('#create-key input[name=label]', label)
  await page.click('#create-key button[type=submit]')
  await page.waitForSelector('#key-dialog[open]')
  const key = (await page.textContent('#key-dialog [data-slot=key]'))!.trim()
  t.match(key, /^tg_/, `${label}: the new key is shown once`)
  await page.click('#key-dialog [data-action=copy-key]')
  await page.waitForSelector('#key-dialog [data-slot=copied]:has-text("Copied")')
  t.equal(await page.evaluate(() => (globalThis as any).navigator.clipboard.readText()), key, 'Copy put the key on the clipboard, with visible feedback')
  await page.click('#key-dialog [data-action=close-dialog]')
  t.notOk((await page.content()).includes(key), 'the key is gone from the DOM once the dialog closed')
  return key
}


t.test('operator and owner walk the dashboard as a console', async (t) => {
  t.setTimeout(300_000)
  const browser = await launchBrowser(t)
  if (!browser) return
  mkdirSync(SHOTS, { recursive: true })
  const up = await startTestUpstream()
  t.teardown(() => up.close())
  const gw = await startGatewayProcess(config(up.url), { startTimeoutMs: 90_000 })
  t.teardown(() => gw.stop())
  t.equal((await send(gw.adminUrl, 'POST', '/admin/users', { body: { ...OPERATOR, role: 'operator' }, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).status, 201)
  const call = async (path: string) => (await send(gw.url, 'GET', path)).status
  const shot = (page: Page, name: string, fullPage = true) => page.screenshot({ path: join(SHOTS, `console-${name}.png`), fullPage })

  const context = await browser.newContext({ viewport: { width: 1320, height: 900 } })
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: gw.adminUrl })
  const page = await context.newPage()
  const problems = watch(page)

  // ---- operator: a new project, its rule under the field, cleared on input -----------------
  await signIn(page, gw.adminUrl, OPERATOR)
  t.match(await page.textContent('.empty'), /New project/, 'the empty state points at the form, not at curl')
  await page.click('#new-project summary')
  await page.fill('#create-project input[name=id]', 'bad id!')
  await page.click('#create-project button[type=submit]')
  await page.waitForSelector('#create-project [data-error-for=id]:not([hidden])')
  t.match(await page.textContent('#create-project [data-error-for=id]'), /1 to 64 letters, digits/, 'the message names the rule')
  await page.fill('#create-project input[name=id]', 'walk')
  t.ok(await page.isHidden('#create-project [data-error-for=id]'), 'and goes away when the input changes')
  await page.fill('#create-project input[name=name]', 'Walk Rollups')
  await page.fill('#create-project input[name=plan]', 'standard')
  await page.check('#create-project input[name=scopes][value=rpc]')
  await page.fill('#create-project input[name=allocation]', '100')
  await shot(page, '1-new-project')
  await page.click('#create-project button[type=submit]')
  await page.waitForSelector('.project-card[data-project=walk]')
  t.match(await page.textContent('#action-notice'), /Project walk created/)

  // ---- operator: the owner, on the Accounts page -------------------------------------------
  await page.click('nav a[href="/dashboard/accounts"]')
  await page.fill('#create-user input[name=email]', OWNER.email)
  await page.fill('#create-user input[name=password]', OWNER.password)
  await page.fill('#create-user input[name=confirm]', OWNER.password)
  await page.check('#create-user input[name=projects][value=walk]')
  await page.click('#create-user button[type=submit]')
  await page.waitForSelector(`tr[data-email="${OWNER.email}"]`)
  t.pass('the owner of walk is created')

  // ---- operator: a key, copied ---------------------------------------------------------------
  await page.goto(gw.adminUrl + '/dashboard/projects/walk')
  await page.waitForSelector('#usage-chart .uplot')
  const appKey = await createAndCopyKey(t, page, 'app')

  // ---- refused traffic by reason ---------------------------------------------------------------
  for (let i = 0; i < 3; i++) t.equal(await call(`/rpc/${appKey}/ok-${i}`), 200)
  for (let i = 0; i < 4; i++) t.equal(await call(`/premium/${appKey}/p-${i}`), 403, 'the premium route is for enterprise')
  for (let i = 0; i < 2; i++) t.equal(await call(`/zk/${appKey}/z-${i}`), 403, 'walk has no zkpaas scope')
  await until('the refusals to show by reason', async () => number(await page.textContent('tr[data-answer="403 wrong_plan"] td.r')) === 4)
  t.match(await page.textContent('tr[data-answer="403 wrong_plan"]'), /another plan \(this project is on standard\)/, 'the page says which plan')
  t.match(await page.textContent('tr[data-answer="403 wrong_scope"]'), /scope this project lacks \(its scopes: rpc\)/, 'and which scope')
  t.equal(number(await page.textContent('tr[data-answer="403 wrong_scope"] td.r')), 2)
  t.equal(number(await page.textContent('[data-field=refusals]')), 6, 'the Refused tile counts both')
  await until('the key row to count its refusals', async () => number(await page.textContent('tr[data-key=app] [data-field=key-refusals]')) === 6)
  t.equal(number(await page.textContent('tr[data-key=app] [data-field=key-requests]')), 9, 'the key row counts every request')
  t.match(await page.getAttribute('tr[data-key=app] time', 'title'), /\d{4}/, 'last used: the full timestamp in the title')
  await until('the chart to draw the refusals', async () => /403 wrong_plan/.test((await page.getAttribute('#usage-chart', 'data-refused')) ?? ''))
  const csv = await page.context().request.get(gw.adminUrl + '/dashboard/fragments/projects/walk/traffic.csv')
  t.equal(csv.status(), 200)
  t.match(await csv.text(), /,403,wrong_plan,true,4\n/, 'the CSV export has the refusals by reason')
  const keysNdjson = await page.context().request.get(gw.adminUrl + '/dashboard/fragments/projects/walk/keys.ndjson')
  t.match(JSON.parse((await keysNdjson.text()).trim()), { label: 'app', requests: 9, refusals: 6 }, 'and the keys export its tally')
  await shot(page, '2-refused-traffic')

  // The 3-second refresh keeps keyboard focus on the same control and announces changed figures.
  await page.focus('button[data-action=rotate-key][data-label=app]')
  t.equal(await call(`/premium/${appKey}/again`), 403)
  await until('the key row to redraw with the new request', async () => number(await page.textContent('tr[data-key=app] [data-field=key-requests]')) === 10)
  t.same(await page.evaluate(() => {
    const el = (globalThis as any).document.activeElement
    return [el?.dataset?.action, el?.dataset?.label]
  }), ['rotate-key', 'app'], 'focus survived the refresh of its region')
  await until('the refusal to be announced', async () => /Refused in 24 hours: 7/.test((await page.textContent('#announcer')) ?? ''))
  t.equal(await page.getAttribute('#announcer', 'aria-live'), 'polite')

  // ---- plan change and top-up ------------------------------------------------------------------
  const leftBefore = number(await page.textContent('.tile.credits [data-field=credits-left]'))
  t.equal(leftBefore, 97, '100 allocated, 3 answered requests at 1 credit')
  await page.click('#project-settings summary')
  await page.fill('#project-form input[name=plan]', 'enterprise')
  await page.click('#project-form button[type=submit]')
  await page.waitForSelector('#action-notice:has-text("plan enterprise")')
  t.equal(await page.textContent('.page-head h1 .chip'), 'enterprise', 'the heading shows the new plan')
  await until('the premium route to let enterprise through', async () => (await call(`/premium/${appKey}/after`)) === 200)
  await page.fill('#top-up-form input[name=amount]', '0')
  await page.click('#top-up-form button[type=submit]')
  t.match(await page.textContent('#top-up-form [data-error-for=amount]'), /whole number/, 'a bad amount is refused under its field')
  await page.fill('#top-up-form input[name=amount]', '500')
  await page.fill('#top-up-form input[name=reason]', 'walk-test')
  await page.click('#top-up-form button[type=submit]')
  await page.waitForSelector('#action-notice:has-text("500 credits granted")')
  await until('the tile to show the grant', async () => /Granted\s*500/.test((await page.textContent('.tile.credits')) ?? ''))
  const tile = (await page.textContent('.tile.credits'))!.replace(/\s+/g, ' ')
  t.match(tile, /Allocation ?100 ?Granted ?500 ?Used ?4 ?Pending ?0 ?Left ?596/, `credits in the ledger's terms add up: ${tile}`)
  await shot(page, '3-plan-and-top-up')

  // ---- rotation with the grace chosen, disable after confirming -------------------------------
  await page.click('button[data-action=rotate-key][data-label=app]')
  await page.waitForSelector('#confirm-dialog[open]')
  t.ok(await page.isVisible('#confirm-form select[name=grace]'), 'rotation asks for the grace period')
  await page.selectOption('#confirm-form select[name=grace]', '300')
  await shot(page, '4-rotate-confirm', false)
  await page.click('#confirm-form button[type=submit]')
  await page.waitForSelector('#key-dialog[open]')
  const rotated = (await page.textContent('#key-dialog [data-slot=key]'))!.trim()
  t.match(await page.textContent('#key-dialog [data-slot=note]'), /keeps working until .*\(in 5 minutes\)/, 'the note says until when, relative too')
  await page.click('#key-dialog [data-action=copy-key]')
  await page.waitForSelector('#key-dialog [data-slot=copied]:has-text("Copied")')
  await page.click('#key-dialog [data-action=close-dialog]')
  t.equal(await call(`/rpc/${rotated}/r`), 200, 'the rotated key works')
  t.equal(await call(`/rpc/${appKey}/r`), 200, 'the old one during its grace')
  const leftover = page.locator('tr[data-key^="app.rotated-"]')
  await leftover.waitFor()
  t.match(await leftover.textContent(), /grace period/)
  t.equal(await leftover.locator('[data-action=rotate-key], [data-action=disable-key]').count(), 0, 'no Rotate or Disable on a key in its grace')
  const rows = await page.locator('table.keys tbody tr').evaluateAll((trs) => trs.map((tr) => (tr as any).dataset.key))
  t.same(rows.slice(0, 2), ['app', rows[1]], 'the leftover sorts right after its successor')
  await page.click('button[data-action=disable-key][data-label=app]')
  await page.waitForSelector('#confirm-dialog[open]')
  await page.click('#confirm-dialog [data-action=close-dialog]')
  t.equal(await call(`/rpc/${rotated}/c`), 200, 'Cancel disables nothing')
  await page.click('button[data-action=disable-key][data-label=app]')
  await page.waitForSelector('#confirm-dialog[open]')
  await page.click('#confirm-form button[type=submit]')
  await page.waitForSelector('tr[data-key=app] [data-action=enable-key]')
  t.equal(await call(`/rpc/${rotated}/d`), 401, 'disabled after confirming')
  await page.click('tr[data-key=app] [data-action=enable-key]')
  await page.waitForSelector('tr[data-key=app] [data-action=disable-key]')

  // A person opening a fragment URL gets a page with a next step, not the island's JSON.
  const missing = await page.goto(gw.adminUrl + '/dashboard/fragments/projects/nope')
  t.equal(missing?.status(), 404)
  t.match(await page.textContent('main'), /Project not found[\s\S]*Back to projects/)
  // A fresh request context: reusing the page's kept-alive connection raced the server closing it
  // once under CI load (ECONNRESET before any answer).
  const api = await playwrightRequest.newContext({ extraHTTPHeaders: { cookie: (await page.context().cookies()).map((c) => `${c.name}=${c.value}`).join('; ') } })
  t.equal((await api.get(gw.adminUrl + '/dashboard/fragments/projects/nope', { headers: { accept: 'application/json' } })).headers()['content-type'], 'application/json; charset=utf-8', 'the island still gets JSON')
  await api.dispose()

  // ---- operator on a phone ------------------------------------------------------------------
  await page.setViewportSize(PHONE)
  for (const path of ['/dashboard/projects', '/dashboard/projects/walk', '/dashboard/operator', '/dashboard/accounts']) {
    await page.goto(gw.adminUrl + path)
    await page.waitForLoadState('networkidle')
    const { scrollWidth, width } = await noSidewaysScroll(page)
    t.ok(scrollWidth <= width, `operator phone ${path}: ${scrollWidth} px in ${width} px`)
    await shot(page, `5-operator-phone${path.replaceAll('/', '_')}`)
  }
  t.same(problems, [], 'operator: no CSP violation or page error')

  // ---- the owner ------------------------------------------------------------------------------
  const ownerContext = await browser.newContext({ viewport: { width: 1320, height: 900 } })
  await ownerContext.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: gw.adminUrl })
  const owner = await ownerContext.newPage()
  const ownerProblems = watch(owner)
  await signIn(owner, gw.adminUrl, OWNER)
  t.equal(await owner.locator('.project-card').count(), 1, 'the owner sees their one project')
  t.match((await owner.textContent('.project-card[data-project=walk]'))!.replace(/\s+/g, ' '), /left of 600 credits/, 'the card counts the grant: no "more left than allocated"')
  t.equal(await owner.locator('#new-project').count(), 0, 'no New project form for an owner')
  await owner.click('.project-card[data-project=walk]')
  await owner.waitForURL(/\/dashboard\/projects\/walk$/)
  t.equal(await owner.locator('#project-settings').count(), 0, 'no operator settings for an owner')
  t.equal(await owner.textContent('.page-head h1 .chip'), 'enterprise', 'the owner sees the plan change')
  t.match(await owner.textContent('tr[data-answer="403 wrong_plan"]'), /another plan/, 'and the refusals by reason')
  const ownerKey = await createAndCopyKey(t, owner, 'owner-key')
  t.equal(await call(`/rpc/${ownerKey}/o`), 200)
  await owner.click('button[data-action=rotate-key][data-label=owner-key]')
  await owner.waitForSelector('#confirm-dialog[open]')
  await owner.selectOption('#confirm-form select[name=grace]', '0')
  await owner.click('#confirm-form button[type=submit]')
  await owner.waitForSelector('#key-dialog[open]')
  t.match(await owner.textContent('#key-dialog [data-slot=note]'), /refused at once/)
  await owner.click('#key-dialog [data-action=close-dialog]')
  t.equal(await call(`/rpc/${ownerKey}/o`), 401, 'no grace: the old key is refused at once')
  await owner.setViewportSize(PHONE)
  for (const path of ['/dashboard/projects', '/dashboard/projects/walk', '/dashboard/alerts']) {
    await owner.goto(gw.adminUrl + path)
    await owner.waitForLoadState('networkidle')
    const { scrollWidth, width } = await noSidewaysScroll(owner)
    t.ok(scrollWidth <= width, `owner phone ${path}: ${scrollWidth} px in ${width} px`)
    await owner.screenshot({ path: join(SHOTS, `console-6-owner-phone${path.replaceAll('/', '_')}.png`), fullPage: true })
  }
  t.same(ownerProblems, [], 'owner: no CSP violation or page error')
  await ownerContext.close()
  await context.close()
})
