/**
 * The dashboard's Accounts page in a real browser (Debian chromium via playwright-core) against a
 * real gateway process: an operator signs in, opens Accounts, creates an owner (listed at once), sees
 * a taken email's 409 and a markup email's 400 under the email field, has a short password refused
 * before anything is sent, changes the owner's projects, sets its password (its session ends),
 * cannot delete or demote their own account (controls disabled; forced, the API's 409 self_lockout
 * is shown), and deletes the owner after confirming. An owner sees no Accounts link and its URL
 * answers the API's refusal. Markup in an email is shown as text. No CSP violation may be reported.
 * Screenshots: test-artifacts/dashboard-accounts-*.png.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import type { Page } from 'playwright-core'
import { hashCredential } from '../../core/projects/projects.ts'
import { startGatewayProcess } from '../helpers/gateway-process.ts'
import { send, signIn } from '../helpers/admin-client.ts'
import { ARTIFACTS, launchBrowser } from '../helpers/browser.ts'

const ADMIN_TOKEN = `admin_${randomBytes(12).toString('hex')}`
const bearer = { authorization: `Bearer ${ADMIN_TOKEN}` }
const OP = { email: 'ops@example.com', password: `op-${randomBytes(9).toString('base64url')}` }
const OWNER = { email: 'dev@acme.io', password: `dev-${randomBytes(9).toString('base64url')}` }
const VIEWER = { email: 'viewer@acme.io', password: `view-${randomBytes(9).toString('base64url')}` }
/** Passes the API's email shape (no spaces): must appear as text, never as an element. */
const MARKUP_EMAIL = '<img/src=x/onerror=alert(1)>@x.io'
/** A plain address (the HTML standard's rule) that still holds characters HTML must escape. */
const AMPERSAND_EMAIL = "o'brien&co@x.io"

const CONFIG = `
version: 1
server: { listen: { host: 127.0.0.1, port: 0 } }
admin: { listen: { host: 127.0.0.1, port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
log: { access: false }
watch: false
projects:
  - { id: acme, name: Acme, plan: enterprise, credits: { allocation: 1000, period: month }, keys: [] }
  - { id: beta, name: Beta, plan: enterprise, credits: { allocation: 1000, period: month }, keys: [] }
routes: []
`

async function shot(page: Page, name: string, fullPage = true): Promise<void> {
  await page.screenshot({ path: join(ARTIFACTS, `dashboard-accounts-${name}.png`), fullPage })
}

async function signInPage(page: Page, base: string, email: string, password: string): Promise<void> {
  await page.goto(base + '/dashboard/sign-in')
  await page.fill('input[name=email]', email)
  await page.fill('input[name=password]', password)
  await page.click('#sign-in button[type=submit]')
  await page.waitForURL(/\/dashboard\/projects$/)
}

function watch(page: Page): string[] {
  const violations: string[] = []
  page.on('console', (message) => {
    if (/Content Security Policy|Refused to/i.test(message.text())) violations.push(message.text())
  })
  page.on('pageerror', (error) => violations.push(`page error: ${error.message}`))
  // alert() from injected markup would open a dialog.
  page.on('dialog', (dialog) => {
    violations.push(`a JavaScript dialog opened: ${dialog.message()}`)
    void dialog.dismiss()
  })
  return violations
}

t.test('dashboard Accounts page: operators manage users, owners are refused', async (t) => {
  t.setTimeout(240_000)
  const browser = await launchBrowser(t)
  if (!browser) return
  const gw = await startGatewayProcess(CONFIG, { startTimeoutMs: 90_000 })
  t.teardown(() => gw.stop())
  const admin = (method: string, path: string, body?: unknown) => send(gw.adminUrl, method, path, { body, headers: bearer })
  t.equal((await admin('POST', '/admin/users', { email: OP.email, role: 'operator', password: OP.password })).status, 201, 'the admin token creates the operator')
  t.equal((await admin('POST', '/admin/users', { ...VIEWER, role: 'owner', projects: ['acme'] })).status, 201, 'and an owner for the refusal case')
  const userNamed = async (email: string) =>
    ((await admin('GET', '/admin/users')).json.users as { id: string; email: string; role: string; projects: string[] }[]).find((u) => u.email === email)

  const context = await browser.newContext({ viewport: { width: 1320, height: 900 } })
  const page = await context.newPage()
  const violations = watch(page)
  let posts = 0
  page.on('request', (req) => {
    if (req.method() === 'POST' && new URL(req.url()).pathname === '/admin/users') posts++
  })

  await signInPage(page, gw.adminUrl, OP.email, OP.password)
  await page.click('nav a[href="/dashboard/accounts"]')
  await page.waitForURL(/\/dashboard\/accounts$/)
  await page.waitForSelector('table.accounts')
  t.match(await page.textContent('table.accounts'), /ops@example\.com/, 'the operator is listed')
  t.notMatch(await page.content(), /scrypt\$|passwordHash/, 'no hash on the page')

  // A short password is refused before anything is sent.
  await page.fill('#create-user input[name=email]', OWNER.email)
  await page.check('#create-user input[name=projects][value=acme]')
  await page.fill('#create-user input[name=password]', 'short-pw')
  await page.fill('#create-user input[name=confirm]', 'short-pw')
  await page.click('#create-user button[type=submit]')
  await page.waitForSelector('#create-user [data-error-for=password]:not([hidden])')
  t.match(await page.textContent('#create-user [data-error-for=password]'), /at least 12 characters/, 'the password field says why')
  t.equal(posts, 0, 'nothing was sent')
  await shot(page, '1-short-password')
  // A confirmation that does not match, also before sending.
  await page.fill('#create-user input[name=password]', OWNER.password)
  await page.fill('#create-user input[name=confirm]', OWNER.password + 'x')
  await page.click('#create-user button[type=submit]')
  await page.waitForSelector('#create-user [data-error-for=confirm]:not([hidden])')
  t.equal(posts, 0, 'a mismatched confirmation is not sent either')

  // Create the owner: listed at once.
  await page.fill('#create-user input[name=confirm]', OWNER.password)
  await page.click('#create-user button[type=submit]')
  await page.waitForSelector(`tr[data-email="${OWNER.email}"]`)
  t.equal(posts, 1)
  const row = `tr[data-email="${OWNER.email}"]`
  t.match(await page.textContent(row), /owner[\s\S]*acme/, 'the new owner is listed with its project')
  t.equal(await page.inputValue('#create-user input[name=email]'), '', 'the form is cleared')
  t.match((await userNamed(OWNER.email))?.projects, ['acme'])
  await shot(page, '2-created')

  // The same email again: the API's 409 under the email field.
  await page.fill('#create-user input[name=email]', 'DEV@acme.io')
  await page.fill('#create-user input[name=password]', OWNER.password)
  await page.fill('#create-user input[name=confirm]', OWNER.password)
  await page.click('#create-user button[type=submit]')
  await page.waitForSelector('#create-user [data-error-for=email]:not([hidden])')
  t.match(await page.textContent('#create-user [data-error-for=email]'), /already exists/, 'user_exists is shown under the email')
  t.equal(await page.getAttribute('#create-user input[name=email]', 'aria-invalid'), 'true')
  await shot(page, '3-duplicate')

  // Markup as an email: the API refuses it, with spaces or without (400 naming the field).
  for (const markup of ['<img src=x onerror=alert(1)>@x.io', MARKUP_EMAIL]) {
    await page.fill('#create-user input[name=email]', markup)
    const refused = page.waitForResponse((res) => res.request().method() === 'POST' && res.url().endsWith('/admin/users'))
    await page.click('#create-user button[type=submit]')
    t.equal((await refused).status(), 400, `the server refuses ${markup}`)
    await page.waitForSelector('#create-user [data-error-for=email]:has-text("email must be an email address")')
    t.pass('the 400 is shown under the email field')
  }
  // A plain address with characters HTML must escape is listed as the same text.
  await page.fill('#create-user input[name=email]', AMPERSAND_EMAIL)
  await page.click('#create-user button[type=submit]')
  await page.waitForSelector('table.accounts td.email:has-text("brien")')
  t.equal(await page.locator('table.accounts td.email', { hasText: 'brien' }).innerText(), AMPERSAND_EMAIL, 'the email is displayed as text')
  await shot(page, '4-markup-as-text')

  // Change the owner's projects: acme → beta.
  await page.click(`${row} [data-action=edit-user]`)
  await page.waitForSelector('#user-edit-dialog[open]')
  t.ok(await page.isChecked('#user-edit-form input[name=projects][value=acme]'), 'the dialog shows the current projects')
  await page.uncheck('#user-edit-form input[name=projects][value=acme]')
  await page.check('#user-edit-form input[name=projects][value=beta]')
  await shot(page, '5-edit-projects', false)
  await page.click('#user-edit-form button[type=submit]')
  await page.waitForSelector('#user-edit-dialog', { state: 'hidden' })
  await page.waitForSelector(`${row} td.projects:has-text("beta")`)
  t.notMatch(await page.textContent(`${row} td.projects`), /acme/, 'the row shows the new projects')
  t.same((await userNamed(OWNER.email))?.projects, ['beta'], 'the account owns beta only')

  // A new password signs the owner out.
  const ownerSession = await signIn(gw.adminUrl, OWNER.email, OWNER.password)
  t.equal((await ownerSession.call('GET', '/admin/session')).status, 200, 'the owner is signed in')
  const NEW_PASSWORD = `new-${randomBytes(9).toString('base64url')}`
  await page.click(`${row} [data-action=user-password]`)
  await page.waitForSelector('#user-password-dialog[open]')
  t.match(await page.textContent('#user-password-dialog [data-slot=text]'), /signs dev@acme\.io out of every session/, 'the dialog says it signs the user out')
  await page.fill('#user-password-form input[name=password]', 'too-short')
  await page.fill('#user-password-form input[name=confirm]', 'too-short')
  await page.click('#user-password-form button[type=submit]')
  await page.waitForSelector('#user-password-form [data-error-for=password]:not([hidden])')
  await page.fill('#user-password-form input[name=password]', NEW_PASSWORD)
  await page.fill('#user-password-form input[name=confirm]', NEW_PASSWORD)
  await shot(page, '6-set-password', false)
  await page.click('#user-password-form button[type=submit]')
  await page.waitForSelector('#user-password-dialog', { state: 'hidden' })
  await page.waitForSelector('#action-notice:not([hidden])')
  t.match(await page.textContent('#action-notice'), /signed out/)
  t.equal((await ownerSession.call('GET', '/admin/session')).status, 401, "the owner's session ended")
  t.equal((await signIn(gw.adminUrl, OWNER.email, NEW_PASSWORD)).csrf.length > 0, true, 'the new password signs in')

  // Your own row: no delete, no demotion; forced, the API's 409 self_lockout is shown.
  const own = 'tr[data-self=true]'
  t.equal(await page.getAttribute(own, 'data-email'), OP.email)
  t.ok(await page.isDisabled(`${own} [data-action=delete-user]`), 'your own delete button is disabled')
  await page.click(`${own} [data-action=edit-user]`)
  await page.waitForSelector('#user-edit-dialog[open]')
  t.ok(await page.isDisabled('#user-edit-form select[name=role]'), 'your own role cannot be changed')
  await page.locator('#user-edit-form select[name=role]').evaluate((el) => ((el as unknown as { disabled: boolean }).disabled = false))
  await page.selectOption('#user-edit-form select[name=role]', 'owner')
  await page.click('#user-edit-form button[type=submit]')
  await page.waitForSelector('#user-edit-form [data-error-for=role]:not([hidden])')
  t.match(await page.textContent('#user-edit-form [data-error-for=role]'), /cannot demote your own account/, 'forced demotion: the 409 is shown at the role')
  await shot(page, '7-self-demote-refused', false)
  await page.click('#user-edit-dialog [data-action=close-dialog]')
  await page.locator(`${own} [data-action=delete-user]`).evaluate((el) => el.removeAttribute('disabled'))
  await page.click(`${own} [data-action=delete-user]`)
  await page.waitForSelector('#user-delete-dialog[open]')
  await page.fill('#user-delete-form input[name=typed]', OP.email)
  await page.click('#user-delete-form button[type=submit]')
  await page.waitForSelector('#user-delete-form .error:not([hidden])')
  t.match(await page.textContent('#user-delete-form .error'), /cannot delete your own account/, 'forced deletion: the 409 is shown')
  await page.click('#user-delete-dialog [data-action=close-dialog]')
  t.equal((await userNamed(OP.email))?.role, 'operator', 'the operator is still one')
  t.ok(await page.isDisabled(`${own} [data-action=delete-user]`), 'the list is redrawn after the refusal: your delete button is disabled again')

  // Delete the owner, after confirming (Cancel first changes nothing).
  await page.click(`${row} [data-action=delete-user]`)
  await page.waitForSelector('#user-delete-dialog[open]')
  t.match(await page.textContent('#user-delete-dialog [data-slot=text]'), /Delete dev@acme\.io\?/)
  await page.click('#user-delete-dialog [data-action=close-dialog]')
  t.ok(await userNamed(OWNER.email), 'cancel keeps the account')
  await page.click(`${row} [data-action=delete-user]`)
  await page.waitForSelector('#user-delete-dialog[open]')
  await shot(page, '8-delete-confirm', false)
  // Deleting means typing the email: a wrong one is refused in the dialog, nothing is sent.
  await page.fill('#user-delete-form input[name=typed]', 'dev@acme')
  await page.click('#user-delete-form button[type=submit]')
  await page.waitForSelector('#user-delete-form [data-error-for=typed]:not([hidden])')
  t.match(await page.textContent('#user-delete-form [data-error-for=typed]'), /Type dev@acme\.io exactly/)
  t.ok(await userNamed(OWNER.email), 'a mistyped name deletes nothing')
  await page.fill('#user-delete-form input[name=typed]', OWNER.email)
  await page.click('#user-delete-form button[type=submit]')
  await page.waitForSelector(row, { state: 'detached' })
  t.notOk(await userNamed(OWNER.email), 'the account is gone')
  await shot(page, '9-after-delete')

  // An owner: no Accounts link, and the URL is refused like the API refuses it.
  const ownerContext = await browser.newContext({ viewport: { width: 1320, height: 700 } })
  const ownerPage = await ownerContext.newPage()
  const ownerViolations = watch(ownerPage)
  await signInPage(ownerPage, gw.adminUrl, VIEWER.email, VIEWER.password)
  t.equal(await ownerPage.locator('nav a[href="/dashboard/accounts"]').count(), 0, 'an owner sees no Accounts link')
  const answer = await ownerPage.goto(gw.adminUrl + '/dashboard/accounts')
  t.equal(answer?.status(), 403, 'the direct URL answers 403')
  t.match(await ownerPage.textContent('main'), /Operators only[\s\S]*Only an operator may do this[\s\S]*operator_only/, "the API's refusal, as a dashboard page")
  t.equal(await ownerPage.locator('table.accounts').count(), 0, 'no account is listed')
  await shot(ownerPage, '10-owner-refused')
  const fragment = await ownerContext.request.get(gw.adminUrl + '/dashboard/fragments/accounts')
  t.equal(fragment.status(), 403, 'the fragment is refused too')
  await ownerContext.close()
  await context.close()
  t.same(violations, [], 'no CSP violation, page error or script dialog (operator)')
  t.same(ownerViolations, [], 'none for the owner either')
})
