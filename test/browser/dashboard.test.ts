/**
 * The dashboard in a real browser (Debian chromium via playwright-core) against a real gateway
 * process: sign in, create a key and call a route with it, rotate and disable keys, toggle ZK
 * Prove Batch through the password dialog (wrong, then right password) and see /prove-batch go
 * from 403 to 200 within 5 s, and watch the usage chart and the credits move after traffic.
 * Screenshots are saved under test-artifacts/dashboard-*.png. No CSP violation may be reported.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { spawn } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { request } from 'undici'
import type { Page } from 'playwright-core'
import { hashCredential } from '../../core/projects/projects.ts'
import { BIN, startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream, type TestUpstream } from '../helpers/upstream.ts'
import { ARTIFACTS, launchBrowser } from '../helpers/browser.ts'
import { tempDir } from '../helpers/temp.ts'
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.ts'

const KEY = `tk_dash_${randomBytes(12).toString('hex')}`
const ADMIN_TOKEN = `admin_${randomBytes(12).toString('hex')}`
const USER = 'olivia@example.com'
const PASSWORD = `pw-${randomBytes(9).toString('base64url')}`

function config(up: TestUpstream, hook: WebhookReceiver): string {
  return `
version: 1
server: { listen: { port: 0 } }
admin: { listen: { port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
log: { access: false }
watch: false
projects:
  - id: acme
    name: Acme Rollups
    plan: enterprise
    scopes: [zkpaas, rpc]
    credits: { allocation: 1000, period: month }
    keys: [{ label: seed, hash: ${hashCredential(KEY)} }]
    alerts: { url: '${hook.url}', secret: 'dashboard-test-secret-1234', thresholds: [{ percent: 95 }] }
alerts: { checkIntervalMs: 200 }
upstreams:
  echo: { url: '${up.url}' }
routes:
  - name: rpc
    path: /rpc/:apiKey/*rest
    rewrite: /*rest
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { scope: rpc } }
      - { name: credit-meter, config: { apiType: PRIVNET_RPC, cost: 2 } }
  - name: prove-batch
    methods: [POST]
    path: /zk/:apiKey/prove-batch
    rewrite: /prove-batch
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: zkpaas } }
      - { name: zk-features, config: { requireFeatures: [proveBatch] } }
      - { name: credit-meter, config: { apiType: PRIVNET_ZKPAAS, cost: 5 } }
`
}

/**
 * `tollgate user add` with the password on stdin (never an argument), before the gateway starts
 * (the embedded store is held exclusively by a running gateway).
 */
async function addOperator(configFile: string): Promise<void> {
  const child = spawn(process.execPath, [BIN, 'user', 'add', '--email', USER, '--role', 'operator', '-c', configFile], {
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout.on('data', (chunk) => (output += chunk))
  child.stderr.on('data', (chunk) => (output += chunk))
  child.stdin.end(PASSWORD + '\n')
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve))
  if (code !== 0) throw new Error(`tollgate user add failed (${code}): ${output}`)
}

async function call(gw: GatewayProcess, method: 'GET' | 'POST', path: string): Promise<number> {
  const res = await request(gw.url + path, { method, body: method === 'POST' ? JSON.stringify({ proofs: [] }) : undefined, headers: { 'content-type': 'application/json' } })
  await res.body.text()
  return res.statusCode
}

async function shot(page: Page, name: string, fullPage = true): Promise<void> {
  // A dialog's backdrop covers the viewport only: those are taken without scrolling.
  await page.screenshot({ path: join(ARTIFACTS, `dashboard-${name}.png`), fullPage })
}

async function until(what: string, probe: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 200))
  }
}

const number = (text: string | null) => Number((text ?? '').replace(/[^0-9]/g, ''))

t.test('dashboard in chromium: sign in, keys, feature toggle with password, live usage', async (t) => {
  t.setTimeout(240_000)
  const browser = await launchBrowser(t)
  if (!browser) return
  const up = await startTestUpstream()
  const hook = await startWebhookReceiver()
  t.teardown(() => Promise.all([up.close(), hook.close()]))
  const dir = tempDir('tollgate-dashboard-')
  const configFile = join(dir, 'gateway.yaml')
  writeFileSync(configFile, config(up, hook).replaceAll('{{DIR}}', dir))
  await addOperator(configFile)
  const gw = await startGatewayProcess(config(up, hook), { dir, startTimeoutMs: 90_000 })
  t.teardown(() => gw.stop())

  const page = await browser.newPage({ viewport: { width: 1320, height: 1000 } })
  const violations: string[] = []
  page.on('console', (message) => {
    if (/Content Security Policy|Refused to/i.test(message.text())) violations.push(message.text())
  })
  page.on('pageerror', (error) => violations.push(`page error: ${error.message}`))

  // Sign in: a wrong password first.
  await page.goto(gw.adminUrl + '/dashboard')
  t.match(page.url(), /\/dashboard\/sign-in$/, 'no session: the sign-in page')
  await page.fill('input[name=email]', USER)
  await page.fill('input[name=password]', 'not-the-password')
  await page.click('#sign-in button[type=submit]')
  await page.waitForSelector('#sign-in .error:not([hidden])')
  t.ok((await page.textContent('#sign-in .error'))!.length > 0, 'a wrong password is refused with a message')
  await page.fill('input[name=password]', PASSWORD)
  await page.click('#sign-in button[type=submit]')
  await page.waitForURL(/\/dashboard\/projects$/)
  await page.waitForSelector('.project-card')
  await shot(page, '1-projects')

  // The project page.
  await page.click('.project-card[data-project=acme]')
  await page.waitForURL(/\/dashboard\/projects\/acme$/)
  await page.waitForSelector('#usage-chart .uplot')
  const creditsBefore = number(await page.textContent('.tile.credits [data-field=credits-left]'))
  t.equal(creditsBefore, 1000, 'all credits left before any traffic')

  // Create a key, read it from the dialog (shown once), call a route with it.
  await page.fill('#create-key input[name=label]', 'browser')
  await page.click('#create-key button[type=submit]')
  await page.waitForSelector('#key-dialog[open]')
  const created = (await page.textContent('#key-dialog [data-slot=key]'))!.trim()
  t.match(created, /^tg_/, 'the new key is shown')
  await shot(page, '2-new-key', false)
  await page.click('#key-dialog [data-action=close-dialog]')
  t.equal(await call(gw, 'GET', `/rpc/${created}/hello`), 200, 'the new key calls a route')
  await page.waitForSelector('tr[data-key=browser]')

  // ZK Prove Batch: off, so 403; the toggle asks for the password.
  t.equal(await call(gw, 'POST', `/zk/${created}/prove-batch`), 403, 'prove-batch is off')
  await page.click('button[data-feature=proveBatch]')
  await page.waitForSelector('#password-dialog[open]')
  await page.fill('#password-form input[name=password]', 'wrong-password')
  await page.click('#password-form button[type=submit]')
  await page.waitForSelector('#password-form .error:not([hidden])')
  const refusal = (await page.textContent('#password-form .error'))!
  t.match(refusal, /password/i, `the API's message is shown: ${refusal}`)
  await shot(page, '3-wrong-password', false)
  t.equal(await call(gw, 'POST', `/zk/${created}/prove-batch`), 403, 'a wrong password changed nothing')
  await page.fill('#password-form input[name=password]', PASSWORD)
  const clicked = Date.now()
  await page.click('#password-form button[type=submit]')
  await page.waitForSelector('#password-dialog', { state: 'hidden' })
  let status = 0
  while (Date.now() - clicked < 5000 && (status = await call(gw, 'POST', `/zk/${created}/prove-batch`)) !== 200) await new Promise((r) => setTimeout(r, 100))
  t.equal(status, 200, `prove-batch answers 200 ${Date.now() - clicked} ms after the confirmation`)
  await page.waitForSelector('button[data-feature=proveBatch].on')

  // Traffic: the chart and the credits move by themselves.
  const totalBefore = Number(await page.getAttribute('#usage-chart', 'data-total'))
  for (let i = 0; i < 25; i++) await call(gw, 'GET', `/rpc/${KEY}/tick-${i}`)
  for (let i = 0; i < 5; i++) await call(gw, 'GET', `/rpc/${KEY}/status/404`)
  // Polled from here: string predicates would need 'unsafe-eval', which the page's CSP refuses.
  const chartTotal = async () => Number(await page.getAttribute('#usage-chart', 'data-total'))
  const creditsLeft = async () => number(await page.textContent('.tile.credits [data-field=credits-left]'))
  // 1 (new key) + 25 + 5 requests at 2 credits, one prove-batch at 5.
  const expected = 1000 - 2 * 31 - 5
  await until('the chart to count the traffic', async () => (await chartTotal()) >= totalBefore + 30)
  await until(`the credits left to show ${expected}`, async () => (await creditsLeft()) === expected)
  t.pass('the chart total and the credits left moved without a reload')
  t.match(await page.getAttribute('#usage-chart', 'data-types'), /PRIVNET_RPC/)
  await page.waitForSelector('ul.bars .s4xx')
  await until('the credit ledger to list the charges', async () => /charge/.test((await page.textContent('#credit-ledger')) ?? ''))
  t.match(await page.textContent('#credit-ledger'), /PRIVNET_RPC/, 'the ledger explains the balance by API type')
  await shot(page, '4-after-traffic')

  // Rotate the new key, then disable the seed key.
  await page.click('button[data-action=rotate-key][data-label=browser]')
  // Rotation asks for the grace period first.
  await page.waitForSelector('#confirm-dialog[open]')
  await page.selectOption('#confirm-form select[name=grace]', '3600')
  await page.click('#confirm-form button[type=submit]')
  await page.waitForSelector('#key-dialog[open]')
  const rotated = (await page.textContent('#key-dialog [data-slot=key]'))!.trim()
  t.not(rotated, created, 'rotation shows a new key')
  t.match(await page.textContent('#key-dialog'), /keeps working until/, 'the dialog says how long the old key works')
  await shot(page, '4b-rotated-key', false)
  await page.click('#key-dialog [data-action=close-dialog]')
  t.equal(await call(gw, 'GET', `/rpc/${rotated}/r`), 200, 'the rotated key works')
  t.equal(await call(gw, 'GET', `/rpc/${created}/r`), 200, 'the old key works during the grace period')
  await page.click('button[data-action=disable-key][data-label=seed]')
  // Disabling asks first.
  await page.waitForSelector('#confirm-dialog[open]')
  t.match(await page.textContent('#confirm-dialog'), /refused/, 'the confirmation says what disabling does')
  await page.click('#confirm-form button[type=submit]')
  await page.waitForSelector('tr[data-key=seed] button[data-action=enable-key]')
  t.equal(await call(gw, 'GET', `/rpc/${KEY}/x`), 401, 'a disabled key is refused')

  // The operator view and the alerts page.
  await page.click('nav a[href="/dashboard/operator"]')
  await page.waitForSelector('table.table')
  await shot(page, '5-operator')
  await page.click('nav a[href="/dashboard/alerts"]')
  // 67 of 1,000 credits spent: the 95% threshold fired once, delivered to the local receiver.
  await page.waitForSelector('table.alerts .chip.on')
  t.match(await page.textContent('table.alerts'), /95% left/)
  t.equal(hook.received.length, 1, 'the webhook was delivered once')
  await shot(page, '6-alerts')

  // Sign out: the pages ask to sign in again.
  await page.click('[data-action=sign-out]')
  await page.waitForURL(/\/dashboard\/sign-in$/)
  await page.goto(gw.adminUrl + '/dashboard/projects/acme')
  t.match(page.url(), /\/dashboard\/sign-in$/, 'signed out')
  t.same(violations, [], 'no CSP violation or page error')
})
