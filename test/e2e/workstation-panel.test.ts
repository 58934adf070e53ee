/**
 * The workstation panel in a real browser (playwright-core + Debian chromium) against a real gateway
 * process and the local OpenID provider: provision from the panel, watch the state refresh to
 * ready, Open in a new tab, sign in as the linked account on the provider's page, type into the
 * terminal and see the shell's answer. Screenshots go to test-artifacts/.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { mkdirSync, readdirSync, readFileSync } from 'node:fs'
import { createServer } from 'node:net'
// Functions passed to waitForFunction run in the page; this file has no DOM types, hence globalThis.
import { chromium } from 'playwright-core'
import { hashCredential } from '../../core/projects/projects.ts'
import { startLocalOidcProvider } from '../../examples/oidc-provider.ts'
import { startGatewayProcess } from '../helpers/gateway-process.ts'
import { tempDir } from '../helpers/temp.ts'

const ADMIN_TOKEN = `admin_${randomBytes(12).toString('hex')}`
const ARTIFACTS = new URL('../../test-artifacts/', import.meta.url).pathname


/** A port free right now (the panel's Open button needs the public listener's address in the config). */
async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise((resolve) => server.close(resolve))
  return port
}

t.test('panel: provision, state refreshes to ready, Open signs in and reaches the terminal', async (t) => {
  t.setTimeout(300_000)
  mkdirSync(ARTIFACTS, { recursive: true })
  const idp = await startLocalOidcProvider()
  t.teardown(() => idp.close())
  const port = await freePort()
  const dir = tempDir('tollgate-ws-panel-')
  const gw = await startGatewayProcess(`
version: 1
server: { listen: { host: 127.0.0.1, port: ${port} } }
admin: { listen: { host: 127.0.0.1, port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
log: { access: false }
watch: false
workstations:
  dir: '{{DIR}}/workstations'
  publicUrl: 'http://127.0.0.1:${port}'
  oidc: { issuer: '${idp.issuer}', clientId: tollgate-workstations }
projects:
  - id: demo
    plan: enterprise
    credits: { allocation: 1000, period: month }
    features: { workstation: true }
    settings: { workstationOwner: { issuer: '${idp.issuer}', subject: demo-user } }
    keys: [{ hash: ${hashCredential('tk_panel_demo')} }]
routes: []
`, { dir, startTimeoutMs: 90_000 })
  idp.register({ clientId: 'tollgate-workstations', redirectUris: [`http://127.0.0.1:${port}/workstations/_auth/callback`] })
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--headless'] })
  t.teardown(async () => {
    await browser.close()
    await gw.stop()
    for (const entry of readdirSync('/proc')) {
      try {
        if (/^\d+$/.test(entry) && readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(`${dir}/workstations`)) process.kill(Number(entry), 'SIGKILL')
      } catch { /* gone */ }
    }
  })
  const context = await browser.newContext({ viewport: { width: 900, height: 640 } })
  const page = await context.newPage()
  await page.goto(`${gw.adminUrl}/workstation-panel/demo#token=${ADMIN_TOKEN}`)
  await page.waitForFunction(() => (globalThis as any).document.getElementById('state')?.textContent === 'absent')
  t.equal(await page.locator('#open').isDisabled(), true, 'Open is disabled while there is no workstation')
  t.notMatch(page.url(), /token=/, 'the token left the address bar')

  await page.click('button[data-action="provision"]')
  await page.waitForFunction(() => (globalThis as any).document.getElementById('state')?.textContent === 'ready', undefined, { timeout: 90_000 })
  t.pass('the panel refreshed by itself to ready')
  t.equal(await page.locator('button[data-action="provision"]').isDisabled(), true, 'provision is not offered when ready')
  await page.screenshot({ path: `${ARTIFACTS}workstation-panel-ready.png` })

  const [tab] = await Promise.all([context.waitForEvent('page'), page.click('#open')])
  await tab.waitForURL(/\/interaction\//, { timeout: 30_000 })
  t.match(tab.url(), new RegExp(`^${idp.issuer}/interaction/`), 'Open went to the identity provider to sign in')
  await tab.fill('input[name="login"]', 'demo-user')
  await tab.fill('input[name="password"]', 'any')
  await tab.click('button[type="submit"]')
  await tab.waitForSelector('button[autofocus]', { timeout: 30_000 })
  await tab.click('button[autofocus]') // consent
  await tab.waitForURL(`http://127.0.0.1:${port}/workstations/demo/`, { timeout: 30_000 })
  await tab.waitForSelector('.xterm', { timeout: 30_000 })
  await tab.waitForFunction(() => (globalThis as any).workstationSocket?.readyState === 1, undefined, { timeout: 30_000 })
  await tab.locator('.xterm').click()
  await tab.keyboard.type('echo panel-$((40+2))\n')
  await tab.waitForFunction(() => (globalThis as any).document.querySelector('.xterm-rows')?.textContent?.includes('panel-42'), undefined, { timeout: 20_000 })
  t.pass('typed into the terminal in the new tab; the shell answered')
  t.match(await tab.locator('.xterm-rows').textContent(), /echo panel-\$\(\(40\+2\)\)/, 'what was typed is echoed on the terminal')
  await tab.screenshot({ path: `${ARTIFACTS}workstation-terminal.png` })

  await page.click('button[data-action="stop"]')
  await page.waitForFunction(() => (globalThis as any).document.getElementById('state')?.textContent === 'stopped', undefined, { timeout: 60_000 })
  await page.screenshot({ path: `${ARTIFACTS}workstation-panel-stopped.png` })
  t.pass('stopped from the panel')
})
