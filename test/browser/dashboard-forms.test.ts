/**
 * The form messages issue 27 named, in Debian chromium against a real gateway process: a sign-in
 * error goes away as soon as the input changes; the password fields stop at the server's limit
 * (maxlength, so no "request body exceeds" message can be reached by typing); an empty account form
 * names every empty field under itself, not only the password; an owner created with no projects
 * gets a notice saying it will see nothing, with the way out.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { hashCredential } from '../../core/projects/projects.ts'
import { MAX_PASSWORD_LENGTH } from '../../core/accounts/password.ts'
import { startGatewayProcess } from '../helpers/gateway-process.ts'
import { send } from '../helpers/admin-client.ts'
import { launchBrowser } from '../helpers/browser.ts'

const ADMIN_TOKEN = `admin_${randomBytes(12).toString('hex')}`
const OPERATOR = { email: 'ops@example.com', password: `op-${randomBytes(9).toString('base64url')}` }

const CONFIG = `
version: 1
server: { listen: { host: 127.0.0.1, port: 0 } }
admin: { listen: { host: 127.0.0.1, port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
log: { access: false }
watch: false
projects:
  - { id: acme, scopes: [rpc], credits: { allocation: 10, period: month }, keys: [] }
routes: []
`

t.test('form messages: cleared on input, server limits, every empty field, no-project warning', async (t) => {
  t.setTimeout(180_000)
  const browser = await launchBrowser(t)
  if (!browser) return
  const gw = await startGatewayProcess(CONFIG, { startTimeoutMs: 90_000 })
  t.teardown(() => gw.stop())
  t.equal((await send(gw.adminUrl, 'POST', '/admin/users', { body: { ...OPERATOR, role: 'operator' }, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).status, 201)
  const page = await browser.newPage()

  await page.goto(gw.adminUrl + '/dashboard/sign-in')
  await page.fill('input[name=email]', OPERATOR.email)
  await page.fill('input[name=password]', 'not the password')
  await page.click('#sign-in button[type=submit]')
  await page.waitForSelector('#sign-in-error:not([hidden])')
  t.ok((await page.textContent('#sign-in-error'))!.length > 0, 'a wrong password is refused with a message')
  await page.type('input[name=password]', 'x')
  t.equal(await page.isHidden('#sign-in-error'), true, 'the old error goes away once the input changes')
  t.equal(await page.getAttribute('input[name=password]', 'maxlength'), String(MAX_PASSWORD_LENGTH), "the password field stops at the server's limit")
  await page.fill('input[name=password]', 'p'.repeat(MAX_PASSWORD_LENGTH + 50))
  t.equal((await page.inputValue('input[name=password]')).length, MAX_PASSWORD_LENGTH, 'no longer password can be typed')
  await page.fill('input[name=password]', OPERATOR.password)
  await page.click('#sign-in button[type=submit]')
  await page.waitForURL(/\/dashboard\/projects$/)

  await page.goto(gw.adminUrl + '/dashboard/accounts')
  await page.click('#create-user button[type=submit]')
  await page.waitForSelector('#create-user [data-error-for=email]:not([hidden])')
  t.match(await page.textContent('#create-user [data-error-for=email]'), /Email: required/, 'the empty email is named under its field')
  t.equal(await page.isVisible('#create-user [data-error-for=password]'), true, 'and the empty password under its own')
  await page.type('#create-user input[name=email]', 'nobody@example.com')
  t.equal(await page.isHidden('#create-user [data-error-for=email]'), true, 'the email message clears as it is typed')

  const password = `np-${randomBytes(9).toString('base64url')}`
  await page.fill('#create-user input[name=password]', password)
  await page.fill('#create-user input[name=confirm]', password)
  await page.click('#create-user button[type=submit]')
  await page.waitForSelector('#action-notice:not([hidden])')
  t.match(await page.textContent('#action-notice'), /nobody@example\.com created \(owner\) with no projects: it sees nothing until you give it one with Role & projects/, 'an owner with no projects is created with a warning')
})
