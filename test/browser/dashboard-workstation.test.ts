/**
 * The dashboard's Workstation card in a real browser (Debian chromium via playwright-core) against a
 * real gateway process, the local OpenID provider and real workstation processes: an owner signs in,
 * links their identity from the card (an OIDC sign-in on the provider's pages, back to the project
 * page), provisions from the card and watches the state refresh to ready, then Open opens the
 * terminal in a new tab without another sign-in. Stop from the card. No CSP violation may be
 * reported. Screenshots: test-artifacts/dashboard-workstation-*.png.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { hashCredential } from '../../core/projects/projects.ts'
import { startLocalOidcProvider } from '../../examples/oidc-provider.ts'
import { startGatewayProcess } from '../helpers/gateway-process.ts'
import { userCli } from '../helpers/admin-client.ts'
import { ARTIFACTS, launchBrowser } from '../helpers/browser.ts'
import { tempDir } from '../helpers/temp.ts'

const ADMIN_TOKEN = `admin_${randomBytes(12).toString('hex')}`
const USER = 'wendy@example.com'
const PASSWORD = `pw-${randomBytes(9).toString('base64url')}`

function config(issuer: string, dir: string): string {
  return `
version: 1
server: { listen: { host: 127.0.0.1, port: 0 } }
admin: { listen: { host: 127.0.0.1, port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '${dir}/data' }
log: { access: false }
watch: false
workstations:
  dir: '${dir}/workstations'
  oidc: { issuer: '${issuer}', clientId: tollgate-workstations }
projects:
  - id: studio
    name: Studio
    plan: enterprise
    credits: { allocation: 1000, period: month }
    features: { workstation: true }
    keys: [{ hash: ${hashCredential(`tk_${randomBytes(8).toString('hex')}`)} }]
  - id: plain
    name: Plain
    plan: enterprise
    credits: { allocation: 1000, period: month }
    keys: [{ hash: ${hashCredential(`tk_${randomBytes(8).toString('hex')}`)} }]
routes: []
`
}


t.test('dashboard Workstation card: link identity, provision to ready, Open in a new tab, stop', async (t) => {
  t.setTimeout(300_000)
  const browser = await launchBrowser(t)
  if (!browser) return
  const idp = await startLocalOidcProvider()
  t.teardown(() => idp.close())
  const dir = tempDir('tollgate-dash-ws-')
  writeFileSync(`${dir}/gateway.yaml`, config(idp.issuer, dir))
  const added = await userCli(`${dir}/gateway.yaml`, ['add', '--email', USER, '--role', 'owner', '--project', 'studio', '--project', 'plain'], `${PASSWORD}\n`)
  t.equal(added.code, 0, added.stderr)
  const gw = await startGatewayProcess(config(idp.issuer, dir), { dir, startTimeoutMs: 90_000 })
  idp.register({ clientId: 'tollgate-workstations', redirectUris: [`${gw.url}/workstations/_auth/callback`] })
  t.teardown(async () => {
    await gw.stop()
    for (const entry of readdirSync('/proc')) {
      try {
        if (/^\d+$/.test(entry) && readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(`${dir}/workstations`)) process.kill(Number(entry), 'SIGKILL')
      } catch { /* gone */ }
    }
  })

  const context = await browser.newContext({ viewport: { width: 1320, height: 1100 } })
  const page = await context.newPage()
  const violations: string[] = []
  page.on('console', (message) => {
    if (/Content Security Policy|Refused to/i.test(message.text())) violations.push(message.text())
  })
  page.on('pageerror', (error) => violations.push(`page error: ${error.message}`))
  await page.goto(`${gw.adminUrl}/dashboard/sign-in`)
  await page.fill('input[name=email]', USER)
  await page.fill('input[name=password]', PASSWORD)
  await page.click('#sign-in button[type=submit]')
  await page.waitForURL(/\/dashboard\/projects$/)

  // No card where the feature is off.
  await page.goto(`${gw.adminUrl}/dashboard/projects/plain`)
  t.equal(await page.locator('#workstation').count(), 0, 'no Workstation card when the feature is off')

  await page.goto(`${gw.adminUrl}/dashboard/projects/studio`)
  await page.waitForFunction(() => (globalThis as any).document.querySelector('#workstation')?.dataset.state === 'absent')
  t.equal(await page.textContent('#workstation [data-slot="state"]'), 'absent')
  t.equal(await page.locator('#workstation [data-verb="start"]').isDisabled(), true, 'Start is not offered without a workstation')
  t.equal(await page.locator('#workstation [data-slot="open"]').isHidden(), true, 'no Open before it is ready')
  await page.waitForSelector('#workstation [data-action="link-identity"]:not([hidden])')
  t.pass('Link your identity is offered to a user without a link')

  // Link: the provider's login and consent pages, then back on this project page.
  await page.click('#workstation [data-action="link-identity"]')
  await page.waitForURL(/\/interaction\//, { timeout: 30_000 })
  t.match(page.url(), new RegExp(`^${idp.issuer}/interaction/`), 'the button went to the identity provider')
  await page.fill('input[name="login"]', 'wendy-idp')
  await page.fill('input[name="password"]', 'any')
  await page.click('button[type="submit"]')
  await page.waitForSelector('button[autofocus]', { timeout: 30_000 })
  await page.click('button[autofocus]') // consent
  await page.waitForURL(`${gw.adminUrl}/dashboard/projects/studio`, { timeout: 30_000 })
  await page.waitForFunction(() => /linked identity/.test((globalThis as any).document.querySelector('#workstation [data-slot="identity"]')?.textContent ?? ''))
  t.equal(await page.locator('#workstation [data-action="link-identity"]').isHidden(), true, 'the link button is gone once linked')
  t.match(await page.textContent('#workstation [data-slot="identity"]'), /wendy-idp/)

  // Provision from the card; the card refreshes by itself to ready.
  const provisionAt = performance.now()
  await page.click('#workstation [data-verb="provision"]')
  await page.waitForFunction(() => (globalThis as any).document.querySelector('#workstation')?.dataset.state === 'ready', undefined, { timeout: 90_000 })
  t.comment(`card: provision → ready shown in ${(performance.now() - provisionAt).toFixed(0)} ms`)
  t.equal(await page.locator('#workstation [data-verb="provision"]').isDisabled(), true, 'Provision is not offered when ready')
  const open = page.locator('#workstation [data-slot="open"]')
  t.equal(await open.getAttribute('target'), '_blank')
  t.equal(await open.getAttribute('rel'), 'noopener')
  t.equal(await open.getAttribute('href'), `${gw.url}/workstations/studio/`)
  await page.locator('#workstation').scrollIntoViewIfNeeded()
  await page.screenshot({ path: `${ARTIFACTS}dashboard-workstation-ready.png`, fullPage: true })

  // Open: a new tab with the terminal; the link sign-in's session lets it straight in.
  const [tab] = await Promise.all([context.waitForEvent('page'), open.click()])
  await tab.waitForURL(`${gw.url}/workstations/studio/`, { timeout: 30_000 })
  await tab.waitForSelector('.xterm', { timeout: 30_000 })
  await tab.waitForFunction(() => (globalThis as any).workstationSocket?.readyState === 1, undefined, { timeout: 30_000 })
  await tab.locator('.xterm').click()
  await tab.keyboard.type('echo card-$((40+2))\n')
  await tab.waitForFunction(() => (globalThis as any).document.querySelector('.xterm-rows')?.textContent?.includes('card-42'), undefined, { timeout: 20_000 })
  t.pass('Open opened the terminal in a new tab and the shell answered')
  await tab.screenshot({ path: `${ARTIFACTS}dashboard-workstation-terminal.png` })
  await tab.close()

  await page.click('#workstation [data-verb="stop"]')
  await page.waitForFunction(() => (globalThis as any).document.querySelector('#workstation')?.dataset.state === 'stopped', undefined, { timeout: 60_000 })
  t.equal(await open.isHidden(), true, 'no Open once stopped')
  t.equal(await page.locator('#workstation [data-verb="start"]').isDisabled(), false, 'Start is offered when stopped')
  await page.screenshot({ path: `${ARTIFACTS}dashboard-workstation-stopped.png`, fullPage: true })

  // Delete means typing the project's name: a wrong one deletes nothing.
  await page.click('#workstation [data-verb="delete"]')
  await page.waitForSelector('#confirm-dialog[open]')
  await page.fill('#confirm-form input[name=typed]', 'studi')
  await page.click('#confirm-form button[type=submit]')
  await page.waitForSelector('#confirm-form [data-error-for=typed]:not([hidden])')
  t.match(await page.textContent('#confirm-form [data-error-for=typed]'), /Type studio exactly/)
  await page.screenshot({ path: `${ARTIFACTS}dashboard-workstation-delete-confirm.png` })
  t.equal(await page.getAttribute('#workstation', 'data-state'), 'stopped', 'a mistyped name deletes nothing')
  await page.fill('#confirm-form input[name=typed]', 'studio')
  await page.click('#confirm-form button[type=submit]')
  await page.waitForFunction(() => ['deleting', 'absent'].includes((globalThis as any).document.querySelector('#workstation')?.dataset.state), undefined, { timeout: 60_000 })
  t.pass('deleted after typing the name')
  t.same(violations, [], 'no CSP violation or page error')
})
