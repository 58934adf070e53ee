/**
 * Accounts on a real gateway process (embedded engine): `tollgate user add` with the password on
 * stdin, sign-in, who-am-I, sign-out, CSRF, forged and expired sessions, rate-limited sign-in,
 * owners kept to their projects, the password-confirmed toggles, operator-only toggles, session
 * listing and revocation. After every refusal the stored state is read back: nothing changed.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { hashCredential } from '../../core/projects/projects.ts'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream, type TestUpstream } from '../helpers/upstream.ts'
import { tempDir } from '../helpers/temp.ts'
import { send, signIn, userCli } from '../helpers/admin-client.ts'

const fresh = (name: string) => `tk_${name}_${randomBytes(12).toString('hex')}`
const KEY = { acme: fresh('acme'), other: fresh('other') }
const ADMIN_TOKEN = fresh('admin')
const PASSWORD = { op: 'operator-Pass-' + randomBytes(6).toString('hex'), owner: 'owner-Pass-' + randomBytes(6).toString('hex') }

function config(up: TestUpstream, sessions = '{ signInLimit: { perAccount: 10, perIp: 100, windowSeconds: 600 } }'): string {
  return `
version: 1
server: { listen: { port: 0 } }
admin: { listen: { port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)}, sessions: ${sessions} }
store: { dataDir: '{{DIR}}/data' }
watch: false
projects:
  - id: acme
    scopes: [zkpaas]
    keys: [{ label: main, hash: ${hashCredential(KEY.acme)} }]
  - id: other
    scopes: [zkpaas]
    keys: [{ label: main, hash: ${hashCredential(KEY.other)} }]
upstreams:
  echo: { url: '${up.url}' }
routes:
  - name: prove-batch
    methods: [POST]
    path: /zk/:apiKey/prove-batch
    rewrite: /prove-batch
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: zkpaas } }
      - { name: zk-features, config: { requireFeatures: [proveBatch] } }
`
}

const bearer = { authorization: `Bearer ${ADMIN_TOKEN}` }

t.test('accounts, sessions and authorisation on a real gateway', async (t) => {
  t.setTimeout(240_000)
  const up = await startTestUpstream()
  const dir = tempDir('tollgate-accounts-')
  const configFile = join(dir, 'gateway.yaml')
  writeFileSync(configFile, config(up).replaceAll('{{DIR}}', dir))

  await t.test('tollgate user add: password from stdin, weak ones refused', async (t) => {
    const weak = await userCli(configFile, ['add', '--email', 'weak@example.com', '--role', 'operator'], 'short\n')
    t.equal(weak.code, 1)
    t.match(weak.stderr, /at least 12 characters/)
    const empty = await userCli(configFile, ['add', '--email', 'weak@example.com', '--role', 'operator'], '')
    t.equal(empty.code, 1)
    t.match(empty.stderr, /password is empty/)
    const badRole = await userCli(configFile, ['add', '--email', 'x@example.com', '--role', 'admin'], PASSWORD.op + '\n')
    t.equal(badRole.code, 2)
    t.match(badRole.stderr, /--role must be operator or owner/)
    const op = await userCli(configFile, ['add', '--email', 'Ops@Example.com', '--role', 'operator'], PASSWORD.op + '\n')
    t.equal(op.code, 0, op.stderr)
    t.match(op.stdout, /added operator ops@example.com/)
    const owner = await userCli(configFile, ['add', '--email', 'owner@example.com', '--role', 'owner', '--project', 'acme'], PASSWORD.owner + '\n')
    t.equal(owner.code, 0, owner.stderr)
    const twice = await userCli(configFile, ['add', '--email', 'owner@example.com', '--role', 'owner'], PASSWORD.owner + '\n')
    t.equal(twice.code, 1)
    t.match(twice.stderr, /already exists/)
    const unknownProject = await userCli(configFile, ['add', '--email', 'n@example.com', '--role', 'owner', '--project', 'nope'], PASSWORD.owner + '\n')
    t.equal(unknownProject.code, 1)
    t.match(unknownProject.stderr, /no project nope/)
    const list = await userCli(configFile, ['list'], '')
    t.match(list.stdout, /owner@example.com\towner\tacme/)
    t.notMatch(list.stdout + list.stderr, /scrypt/, 'no hash printed')
  })

  let gw: GatewayProcess = await startGatewayProcess(config(up), { dir, startTimeoutMs: 90_000 })
  t.teardown(async () => {
    await gw.stop()
    await up.close()
  })
  const admin = () => gw.adminUrl
  const stored = async (id: string) => (await send(admin(), 'GET', `/admin/projects/${id}`, { headers: bearer })).json.project

  await t.test('sign in, who am I, cookie attributes', async (t) => {
    const answer = await send(admin(), 'POST', '/admin/session', { body: { email: 'OPS@example.com', password: PASSWORD.op } })
    t.equal(answer.status, 200)
    const cookie = String(answer.headers['set-cookie'])
    t.match(cookie, /^tollgate_session=[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Strict; Path=\/; Max-Age=\d+$/)
    t.notMatch(cookie, /Secure/, 'plain HTTP and secureCookie off: not Secure')
    t.same(answer.json.user, { id: answer.json.user.id, email: 'ops@example.com', role: 'operator', projects: [] })
    t.match(answer.json.csrfToken, /^[A-Za-z0-9_-]{43}$/)
    const me = await send(admin(), 'GET', '/admin/session', { headers: { cookie: cookie.split(';')[0] } })
    t.equal(me.status, 200)
    t.equal(me.json.user.email, 'ops@example.com')
    t.equal(me.json.csrfToken, answer.json.csrfToken, 'the CSRF token is stable for the session')
  })

  await t.test('wrong password, unknown email: the same 401, similar time', async (t) => {
    const timed = async (email: string) => {
      const started = process.hrtime.bigint()
      const answer = await send(admin(), 'POST', '/admin/session', { body: { email, password: 'not-the-password-1' } })
      return { answer, ms: Number(process.hrtime.bigint() - started) / 1e6 }
    }
    // The fastest of three each: one call on a loaded machine can be held up several times over.
    const fastest = async (email: string) => {
      const runs = [await timed(email), await timed(email), await timed(email)]
      return runs.reduce((best, run) => (run.ms < best.ms ? run : best))
    }
    const wrong = await fastest('owner@example.com')
    const unknown = await fastest('nobody@example.com')
    t.same([wrong.answer.status, wrong.answer.json.error.code], [401, 'invalid_credentials'])
    t.same(unknown.answer.json, wrong.answer.json, 'same body: nothing says whether the account exists')
    t.notOk(wrong.answer.headers['set-cookie'])
    // Both pay one scrypt: an unknown email is not answered in a fraction of the time.
    t.ok(unknown.ms > wrong.ms / 4, `unknown ${unknown.ms.toFixed(0)} ms vs wrong ${wrong.ms.toFixed(0)} ms`)
    const bad = await send(admin(), 'POST', '/admin/session', { body: { email: 'not-an-email', password: 'x' } })
    t.same([bad.status, bad.json.error.code], [400, 'invalid_body'])
    t.match(bad.json.error.message, /email/)
  })

  await t.test('forged, malformed and absent credentials: 401', async (t) => {
    const forged = await send(admin(), 'GET', '/admin/projects', { headers: { cookie: `tollgate_session=${randomBytes(32).toString('base64url')}` } })
    t.same([forged.status, forged.json.error.code], [401, 'session_invalid'])
    const malformed = await send(admin(), 'GET', '/admin/projects', { headers: { cookie: 'tollgate_session=abc' } })
    t.same([malformed.status, malformed.json.error.code], [401, 'session_invalid'])
    const none = await send(admin(), 'GET', '/admin/projects')
    t.same([none.status, none.json.error.code], [401, 'admin_unauthorized'])
    const wrongToken = await send(admin(), 'GET', '/admin/projects', { headers: { authorization: 'Bearer nope' } })
    t.same([wrongToken.status, wrongToken.json.error.code], [401, 'admin_unauthorized'])
    const patched = await send(admin(), 'PATCH', '/admin/projects/acme', { body: { name: 'forged' }, headers: { cookie: `tollgate_session=${randomBytes(32).toString('base64url')}` } })
    t.equal(patched.status, 401)
    t.equal((await stored('acme')).name, 'acme', 'nothing changed')
  })

  await t.test('CSRF: a session change needs x-csrf-token; the bearer token does not', async (t) => {
    const op = await signIn(admin(), 'ops@example.com', PASSWORD.op)
    const missing = await op.call('PATCH', '/admin/projects/acme', { name: 'no-csrf' }, { csrf: false })
    t.same([missing.status, missing.json.error.code], [403, 'csrf_required'])
    const wrong = await op.call('PATCH', '/admin/projects/acme', { name: 'bad-csrf' }, { csrf: randomBytes(32).toString('base64url') })
    t.same([wrong.status, wrong.json.error.code], [403, 'csrf_invalid'])
    t.equal((await stored('acme')).name, 'acme', 'nothing changed')
    const other = await signIn(admin(), 'owner@example.com', PASSWORD.owner)
    const crossed = await op.call('PATCH', '/admin/projects/acme', { name: 'crossed' }, { csrf: other.csrf })
    t.same([crossed.status, crossed.json.error.code], [403, 'csrf_invalid'], "another session's token does not fit")
    const ok = await op.call('PATCH', '/admin/projects/acme', { name: 'Acme Inc' })
    t.equal(ok.status, 200)
    t.equal(ok.json.project.updatedBy, 'ops@example.com', 'the audit actor is the signed-in user')
    const spoofed = await op.call('PATCH', '/admin/projects/acme', { name: 'Acme' }, { headers: { 'x-admin-actor': 'someone-else' } })
    t.equal(spoofed.json.project.updatedBy, 'ops@example.com', 'x-admin-actor never replaces the session user')
    const audit = await send(admin(), 'GET', '/admin/projects/acme/audit', { headers: bearer })
    t.equal(audit.json.changes[0].actor, 'ops@example.com')
    const token = await send(admin(), 'PATCH', '/admin/projects/acme', { body: { name: 'Acme' }, headers: { ...bearer, 'x-admin-actor': 'ci-bot' } })
    t.equal(token.status, 200, 'bearer requests are exempt from CSRF')
    t.equal(token.json.project.updatedBy, 'admin-token', 'the token is the actor; x-admin-actor is a note')
  })

  await t.test("owners: their projects only; another's is a 404 like a missing one", async (t) => {
    const owner = await signIn(admin(), 'owner@example.com', PASSWORD.owner)
    const list = await owner.call('GET', '/admin/projects')
    t.same(list.json.projects.map((p: any) => p.id), ['acme'])
    const foreign = await owner.call('GET', '/admin/projects/other')
    const missing = await owner.call('GET', '/admin/projects/does-not-exist')
    t.same([foreign.status, foreign.json.error.code], [404, 'project_not_found'])
    t.equal(missing.status, 404)
    t.equal(foreign.text.replace('other', 'X'), missing.text.replace('does-not-exist', 'X'), 'the same answer')
    for (const [method, path, body] of [
      ['PATCH', '/admin/projects/other', { name: 'mine' }],
      ['POST', '/admin/projects/other/keys', { label: 'steal' }],
      ['POST', '/admin/projects/other/keys/main/disable', undefined],
      ['POST', '/admin/projects/other/keys/main/rotate', { graceSeconds: 0 }],
      ['POST', '/admin/projects/other/secret', undefined],
      ['GET', '/admin/projects/other/keys', undefined],
    ] as const) {
      const answer = await owner.call(method, path, body)
      t.same([answer.status, answer.json?.error?.code], [404, 'project_not_found'], `${method} ${path}`)
    }
    const other = await stored('other')
    t.same([other.name, other.keys.length, other.keys[0].disabled, other.hasSecret], ['other', 1, false, false], 'nothing changed on the other project')
    for (const [method, path, body, code] of [
      ['POST', '/admin/projects', { id: 'new-one' }, 'operator_only'],
      ['PATCH', '/admin/projects/acme', { plan: 'enterprise' }, 'operator_only'],
      ['PATCH', '/admin/projects/acme', { credits: { allocation: 1000000 } }, 'operator_only'],
      ['POST', '/admin/projects/acme/reset', undefined, 'operator_only'],
      ['GET', '/admin/settings/audit', undefined, 'operator_only'],
      ['POST', '/admin/reload', undefined, 'operator_only'],
    ] as const) {
      const answer = await owner.call(method, path, body)
      t.same([answer.status, answer.json?.error?.code], [403, code], `${method} ${path}`)
    }
    const acme = await stored('acme')
    t.same([acme.plan, acme.credits.allocation], ['standard', 0], 'nothing changed')
    t.equal((await send(admin(), 'GET', '/admin/projects/new-one', { headers: bearer })).status, 404)
  })

  await t.test('toggles: password confirmation, operator-only features', async (t) => {
    const owner = await signIn(admin(), 'owner@example.com', PASSWORD.owner)
    const proveBatch = () => send(gw.url, 'POST', `/zk/${KEY.acme}/prove-batch`, { body: { proofs: [] } })
    t.equal((await proveBatch()).status, 403)
    const absent = await owner.call('PATCH', '/admin/projects/acme', { features: { proveBatch: true } })
    t.same([absent.status, absent.json.error.code], [403, 'password_required'])
    const wrong = await owner.call('PATCH', '/admin/projects/acme', { features: { proveBatch: true }, password: 'wrong-password-123' })
    t.same([wrong.status, wrong.json.error.code], [403, 'password_incorrect'])
    const operatorsPassword = await owner.call('PATCH', '/admin/projects/acme', { features: { sponsoredWallet: true }, password: PASSWORD.op })
    t.same([operatorsPassword.status, operatorsPassword.json.error.code], [403, 'password_incorrect'], "another account's password does not do")
    t.same((await stored('acme')).features, { proveBatch: false, sponsoredWallet: false, relayToConfidentialSpace: false, tee: false, workstation: false }, 'nothing changed')
    t.equal((await proveBatch()).status, 403)
    const right = await owner.call('PATCH', '/admin/projects/acme', { features: { proveBatch: true }, password: PASSWORD.owner })
    t.equal(right.status, 200)
    t.equal(right.json.project.features.proveBatch, true)
    t.equal((await proveBatch()).status, 200, 'the very next request sees it')
    const audit = await send(admin(), 'GET', '/admin/projects/acme/audit', { headers: bearer })
    t.notMatch(audit.text, new RegExp(PASSWORD.owner), 'the password is never in the audit trail')
    for (const feature of ['relayToConfidentialSpace', 'tee']) {
      const refused = await owner.call('PATCH', '/admin/projects/acme', { features: { [feature]: true }, password: PASSWORD.owner })
      t.same([refused.status, refused.json.error.code], [403, 'operator_only'], feature)
    }
    t.same((await stored('acme')).features.tee, false)
    const op = await signIn(admin(), 'ops@example.com', PASSWORD.op)
    const relay = await op.call('PATCH', '/admin/projects/acme', { features: { relayToConfidentialSpace: true } })
    t.equal(relay.status, 200, 'an operator changes relay without a password')
    const opToggle = await op.call('PATCH', '/admin/projects/acme', { features: { sponsoredWallet: true } })
    t.same([opToggle.status, opToggle.json.error.code], [403, 'password_required'], 'operators confirm with their password too')
    const token = await send(admin(), 'PATCH', '/admin/projects/acme', { body: { features: { sponsoredWallet: true } }, headers: bearer })
    t.equal(token.status, 200, 'the bearer token needs no password')
  })

  await t.test('sessions: list, revoke (owners their own), sign out', async (t) => {
    const owner = await signIn(admin(), 'owner@example.com', PASSWORD.owner)
    const op = await signIn(admin(), 'ops@example.com', PASSWORD.op)
    const mine = await owner.call('GET', '/admin/sessions')
    t.equal(mine.status, 200)
    t.ok(mine.json.sessions.length >= 1)
    t.ok(mine.json.sessions.every((s: any) => s.email === 'owner@example.com'), 'owners see their own sessions only')
    t.equal(mine.json.sessions.filter((s: any) => s.current).length, 1)
    t.notMatch(mine.text, /token|hash/i)
    const all = await op.call('GET', '/admin/sessions')
    t.ok(all.json.sessions.some((s: any) => s.email === 'ops@example.com') && all.json.sessions.some((s: any) => s.email === 'owner@example.com'))
    const opSession = all.json.sessions.find((s: any) => s.current).id
    const ownerSession = mine.json.sessions.find((s: any) => s.current).id
    const foreign = await owner.call('DELETE', `/admin/sessions/${opSession}`)
    t.same([foreign.status, foreign.json.error.code], [404, 'session_not_found'])
    t.equal((await op.call('GET', '/admin/session')).status, 200, "the operator's session still works")
    const noCsrf = await op.call('DELETE', `/admin/sessions/${ownerSession}`, undefined, { csrf: false })
    t.same([noCsrf.status, noCsrf.json.error.code], [403, 'csrf_required'])
    t.equal((await owner.call('GET', '/admin/session')).status, 200, 'not revoked')
    const revoked = await op.call('DELETE', `/admin/sessions/${ownerSession}`)
    t.same(revoked.json, { revoked: ownerSession })
    const after = await owner.call('GET', '/admin/session')
    t.same([after.status, after.json.error.code], [401, 'session_invalid'])
    const out = await op.call('DELETE', '/admin/session')
    t.same(out.json, { signedOut: true })
    t.match(String(out.headers['set-cookie']), /^tollgate_session=; .*Max-Age=0/)
    t.equal((await op.call('GET', '/admin/session')).status, 401, 'signed out')
  })

  await t.test('sign-in attempts are limited per account (429 + Retry-After)', async (t) => {
    // perAccount 10 per 600 s in this config; earlier steps spent some of owner@example.com's.
    let answer
    for (let i = 0; i < 12; i++) answer = await send(admin(), 'POST', '/admin/session', { body: { email: 'owner@example.com', password: 'wrong-password-123' } })
    t.same([answer!.status, answer!.json.error.code], [429, 'sign_in_rate_limited'])
    t.ok(Number(answer!.headers['retry-after']) >= 1)
    const right = await send(admin(), 'POST', '/admin/session', { body: { email: 'owner@example.com', password: PASSWORD.owner } })
    t.equal(right.status, 429, 'even the right password waits: the limit is checked before the password')
    t.equal((await send(admin(), 'POST', '/admin/session', { body: { email: 'ops@example.com', password: PASSWORD.op } })).status, 200, 'another account is not limited')
  })

  await t.test('an idle session expires', async (t) => {
    const op = await signIn(admin(), 'ops@example.com', PASSWORD.op)
    gw.writeConfig(config(up, '{ idleTimeoutSeconds: 1 }'))
    const reloaded = await send(admin(), 'POST', '/admin/reload', { headers: bearer })
    t.equal(reloaded.status, 200, reloaded.text)
    await new Promise((resolve) => setTimeout(resolve, 2500))
    const expired = await op.call('PATCH', '/admin/projects/acme', { name: 'late' })
    t.same([expired.status, expired.json.error.code], [401, 'session_expired'])
    t.equal((await stored('acme')).name, 'Acme', 'nothing changed')
    t.equal((await op.call('GET', '/admin/session')).json.error.code, 'session_invalid', 'an expired session is deleted')
  })

  await t.test('the store keeps accounts across a restart; passwd signs sessions out', async (t) => {
    await gw.stop()
    const changed = await userCli(configFile, ['passwd', '--email', 'ops@example.com'], 'a-new-Password-42\n')
    t.equal(changed.code, 0, changed.stderr)
    gw = await startGatewayProcess(config(up), { dir, startTimeoutMs: 90_000 })
    t.equal((await send(gw.adminUrl, 'POST', '/admin/session', { body: { email: 'ops@example.com', password: PASSWORD.op } })).status, 401, 'old password refused')
    t.equal((await send(gw.adminUrl, 'POST', '/admin/session', { body: { email: 'ops@example.com', password: 'a-new-Password-42' } })).status, 200)
    const logs = gw.output.join('\n')
    for (const secret of [PASSWORD.op, PASSWORD.owner, 'a-new-Password-42']) t.notOk(logs.includes(secret), 'no password in the logs')
  })
})
