/**
 * Admin accounts managed over the admin API while the gateway runs (core/accounts/user-routes.ts),
 * against real gateway processes on 127.0.0.1:
 * - embedded engine: the admin token creates the first operator, who creates an owner that then
 *   sees only its project; duplicates, bad input (by field), owners and missing CSRF are refused and
 *   change nothing; an operator cannot delete or demote their own account; a new password and a
 *   deletion end the user's sessions at once; every change is audited; no answer, audit entry or
 *   log line ever holds a password or a hash;
 * - shared engine (PostgreSQL + Redis): an account created on instance A signs in on instance B,
 *   and a deletion on B ends the session on A.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { hashCredential } from '../../core/projects/projects.ts'
import { startGatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream, type TestUpstream } from '../helpers/upstream.ts'
import { send, signIn, type Answer } from '../helpers/admin-client.ts'
import { freshPrefix, freshSchema, needServers, PG_URL, REDIS_URL } from '../helpers/shared-servers.ts'
import { ADMIN_TOKEN as SHARED_ADMIN_TOKEN, config as sharedConfig, dumpOnFailure } from '../helpers/shared-gateway.ts'

const ADMIN_TOKEN = `tk_admin_${randomBytes(12).toString('hex')}`
const bearer = { authorization: `Bearer ${ADMIN_TOKEN}`, 'x-admin-actor': 'bootstrap-script' }
const password = (name: string) => `${name}-Pass-${randomBytes(6).toString('hex')}`
const OP = { email: 'ops@example.com', password: password('operator') }
const OWNER = { email: 'owner@example.com', password: password('owner') }

function config(up: TestUpstream): string {
  return `
version: 1
server: { listen: { port: 0 } }
admin: { listen: { port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)}, sessions: { signInLimit: { perAccount: 20, perIp: 200, windowSeconds: 600 } } }
store: { dataDir: '{{DIR}}/data' }
watch: false
projects:
  - { id: acme, scopes: [zkpaas], keys: [] }
  - { id: other, scopes: [zkpaas], keys: [] }
upstreams:
  echo: { url: '${up.url}' }
routes:
  - name: prove
    path: /zk/:apiKey/prove
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: zkpaas } }
`
}

t.test('users over the admin API (embedded engine)', async (t) => {
  t.setTimeout(240_000)
  const up = await startTestUpstream()
  const gw = await startGatewayProcess(config(up), { startTimeoutMs: 90_000 })
  t.teardown(async () => {
    await gw.stop()
    await up.close()
  })
  // Every answer of the test, to check at the end that none holds a hash or a password.
  const answers: Answer[] = []
  const passwords = new Set<string>([OP.password, OWNER.password])
  const admin = async (method: string, path: string, body?: unknown, headers: Record<string, string> = bearer) => {
    const answer = await send(gw.adminUrl, method, path, { body, headers })
    answers.push(answer)
    return answer
  }
  const users = async () => (await admin('GET', '/admin/users')).json.users as { id: string; email: string; role: string; projects: string[] }[]

  const created = await admin('POST', '/admin/users', { email: 'Ops@Example.com', role: 'operator', password: OP.password })
  t.equal(created.status, 201, `the admin token creates an operator (${created.status} ${created.text.slice(0, 120)})`)
  t.match(created.json.user, { email: OP.email, role: 'operator', projects: [] }, 'the admin token creates the first operator (email normalised)')
  t.same(Object.keys(created.json.user).sort(), ['createdAt', 'email', 'id', 'projects', 'role', 'updatedAt'])
  const opId = created.json.user.id as string
  const op = await signIn(gw.adminUrl, OP.email, OP.password)
  const opCall = async (method: string, path: string, body?: unknown, options?: { csrf?: boolean | string }) => {
    const answer = await op.call(method, path, body, options)
    answers.push(answer)
    return answer
  }

  let ownerId = ''
  await t.test('an operator creates an owner, who sees only its project', async (t) => {
    const answer = await opCall('POST', '/admin/users', { email: OWNER.email, role: 'owner', projects: ['acme'], password: OWNER.password })
    t.equal(answer.status, 201, answer.text)
    t.match(answer.json.user, { email: OWNER.email, role: 'owner', projects: ['acme'] })
    ownerId = answer.json.user.id
    const owner = await signIn(gw.adminUrl, OWNER.email, OWNER.password)
    const projects = await owner.call('GET', '/admin/projects')
    t.same(projects.json.projects.map((p: { id: string }) => p.id), ['acme'], 'the owner sees acme only')
    t.equal((await owner.call('GET', '/admin/projects/other')).status, 404, "another project is the owner's 404")
    const listed = await users()
    t.same(listed.map((u) => `${u.email} ${u.role} ${u.projects.join(',')}`), [`${OP.email} operator `, `${OWNER.email} owner acme`], 'the list shows both accounts')
  })

  await t.test('a taken email is 409 user_exists, whatever its case', async (t) => {
    for (const email of [OWNER.email, 'OWNER@example.COM', `  ${OP.email} `]) {
      const answer = await opCall('POST', '/admin/users', { email, role: 'owner', password: password('dup') })
      t.equal(answer.status, 409, email)
      t.equal(answer.json.error.code, 'user_exists')
    }
    t.equal((await users()).length, 2, 'nothing was added')
  })

  await t.test('bad input: 400 naming the field, nothing stored', async (t) => {
    const good = { email: 'new@example.com', role: 'owner', projects: ['acme'], password: password('new') }
    const cases: [string, unknown, RegExp, string?][] = [
      ['missing email', { ...good, email: undefined }, /email must be an email address/],
      ['email not an address', { ...good, email: 'not-an-email' }, /email must be an email address/],
      ['email a number', { ...good, email: 42 }, /email must be an email address/],
      ['email huge', { ...good, email: 'a'.repeat(20_000) + '@example.com' }, /email must be an email address/],
      ['email with markup', { ...good, email: '<img/src=x/onerror=alert(1)>@x.io' }, /email must be an email address/],
      ['email with a quote pair', { ...good, email: '"a b"@example.com' }, /email must be an email address/],
      ['email domain with an underscore', { ...good, email: 'a@exa_mple.com' }, /email must be an email address/],
      ['missing role', { ...good, role: undefined }, /role must be operator or owner/],
      ['unknown role', { ...good, role: 'admin' }, /role must be operator or owner/],
      ['role an array', { ...good, role: ['owner'] }, /role must be operator or owner/],
      ['missing password', { ...good, password: undefined }, /password must be a string/],
      ['password a number', { ...good, password: 123456789012345 }, /password must be a string/],
      ['password short', { ...good, password: 'short-pass1' }, /password: the password must be at least 12 characters long/],
      ['password empty', { ...good, password: '' }, /password: the password is empty/],
      ['password of one character', { ...good, password: 'x'.repeat(20) }, /password: the password must use at least 5 different characters/],
      ['password huge', { ...good, password: 'abcdefgh'.repeat(2000) }, /password: the password must be at most 1024 characters long/],
      ['projects not an array', { ...good, projects: 'acme' }, /projects must be an array/],
      ['projects of numbers', { ...good, projects: [1, 2] }, /projects must be an array/],
      ['unknown project', { ...good, projects: ['acme', 'nope'] }, /projects: no project nope/],
      ['unknown field', { ...good, admin: true }, /unknown field admin/],
      ['body an array', [good], /the body must be a JSON object/],
      ['body a string', JSON.stringify('hello'), /the body must be a JSON object/],
      ['body null', 'null', /the body must be a JSON object/],
      ['empty body', '', /a JSON body is required/],
      ['not JSON', '{"email": ', /not valid JSON/, 'invalid_json'],
      ['too large', JSON.stringify({ ...good, email: 'a'.repeat(70_000) }), /exceeds the limit/, 'body_too_large'],
    ]
    for (const [name, body, message, code] of cases) {
      const answer = await opCall('POST', '/admin/users', typeof body === 'string' ? body : JSON.parse(JSON.stringify(body)))
      t.equal(answer.status, code === 'body_too_large' ? 413 : 400, `${name}: ${answer.status} ${answer.text.slice(0, 160)}`)
      t.equal(answer.json?.error?.code, code ?? 'invalid_body', name)
      t.match(answer.json?.error?.message, message, name)
    }
    const patches: [string, unknown, RegExp][] = [
      ['nothing to change', {}, /the body changes nothing/],
      ['unknown role', { role: 'root' }, /role must be operator or owner/],
      ['weak password', { password: 'aaaaaaaaaaaaaaaa' }, /password: the password must use at least 5 different characters/],
      ['unknown project', { projects: ['ghost'] }, /projects: no project ghost/],
      ['email is not changeable', { email: 'x@example.com' }, /unknown field email/],
    ]
    for (const [name, body, message] of patches) {
      const answer = await opCall('PATCH', `/admin/users/${ownerId}`, body)
      t.equal(answer.status, 400, `PATCH ${name}`)
      t.match(answer.json.error, { code: 'invalid_body', message }, `PATCH ${name}`)
    }
    t.equal((await opCall('PATCH', '/admin/users/no-such-user', { role: 'owner' })).json.error.code, 'user_not_found')
    t.equal((await opCall('DELETE', '/admin/users/no-such-user')).status, 404)
    t.same(
      (await users()).map((u) => `${u.email} ${u.role} ${u.projects.join(',')}`),
      [`${OP.email} operator `, `${OWNER.email} owner acme`],
      'no refused request changed an account',
    )
    const stillOwner = await signIn(gw.adminUrl, OWNER.email, OWNER.password)
    t.equal((await stillOwner.call('GET', '/admin/session')).status, 200, "the owner's password is unchanged")
  })

  await t.test('owners and requests without CSRF are refused', async (t) => {
    const owner = await signIn(gw.adminUrl, OWNER.email, OWNER.password)
    const calls: [string, string, unknown?][] = [
      ['GET', '/admin/users'],
      ['POST', '/admin/users', { email: 'sneaky@example.com', role: 'operator', password: password('sneaky') }],
      ['PATCH', `/admin/users/${ownerId}`, { role: 'operator' }],
      ['PATCH', `/admin/users/${opId}`, { password: password('takeover') }],
      ['DELETE', `/admin/users/${opId}`],
    ]
    for (const [method, path, body] of calls) {
      const answer = await owner.call(method, path, body)
      answers.push(answer)
      t.equal(answer.status, 403, `owner ${method} ${path}`)
      t.equal(answer.json.error.code, 'operator_only')
    }
    for (const [method, path, body] of calls.slice(1)) {
      const missing = await opCall(method, path, body, { csrf: false })
      t.match([missing.status, missing.json.error.code], [403, 'csrf_required'], `operator ${method} ${path} without x-csrf-token`)
      const wrong = await opCall(method, path, body, { csrf: 'forged-token' })
      t.match([wrong.status, wrong.json.error.code], [403, 'csrf_invalid'], `operator ${method} ${path} with a wrong x-csrf-token`)
    }
    t.equal((await send(gw.adminUrl, 'GET', '/admin/users')).status, 401, 'no credential: 401')
    t.same(
      (await users()).map((u) => `${u.email} ${u.role}`),
      [`${OP.email} operator`, `${OWNER.email} owner`],
      'nothing changed',
    )
    t.equal((await owner.call('GET', '/admin/session')).status, 200, "the refusals did not end the owner's session")
  })

  await t.test('an operator cannot delete or demote their own account', async (t) => {
    const remove = await opCall('DELETE', `/admin/users/${opId}`)
    t.match([remove.status, remove.json.error.code], [409, 'self_lockout'], 'self-delete')
    const demote = await opCall('PATCH', `/admin/users/${opId}`, { role: 'owner', projects: ['acme'] })
    t.match([demote.status, demote.json.error.code], [409, 'self_lockout'], 'self-demote')
    t.match((await users()).find((u) => u.id === opId), { role: 'operator', projects: [] }, 'the operator is unchanged')
    t.equal((await opCall('GET', '/admin/session')).status, 200, 'and still signed in')
    const keep = await opCall('PATCH', `/admin/users/${opId}`, { role: 'operator' })
    t.equal(keep.status, 200, 'keeping one\'s own role is not a demotion')
  })

  await t.test('a new password signs the user out; projects are replaced', async (t) => {
    const owner = await signIn(gw.adminUrl, OWNER.email, OWNER.password)
    const second = await signIn(gw.adminUrl, OWNER.email, OWNER.password)
    const next = password('owner-next')
    passwords.add(next)
    const changed = await opCall('PATCH', `/admin/users/${ownerId}`, { password: next, projects: ['acme', 'other'] })
    t.equal(changed.status, 200, changed.text)
    t.match(changed.json, { user: { id: ownerId, role: 'owner', projects: ['acme', 'other'] }, sessionsEnded: true })
    for (const session of [owner, second]) {
      const old = await session.call('GET', '/admin/projects')
      t.match([old.status, old.json.error.code], [401, 'session_invalid'], 'the old cookie is refused')
    }
    t.equal((await send(gw.adminUrl, 'POST', '/admin/session', { body: { email: OWNER.email, password: OWNER.password } })).status, 401, 'the old password is refused')
    const again = await signIn(gw.adminUrl, OWNER.email, next)
    t.same((await again.call('GET', '/admin/projects')).json.projects.map((p: { id: string }) => p.id).sort(), ['acme', 'other'], 'the new password works; both projects')
    const narrowed = await opCall('PATCH', `/admin/users/${ownerId}`, { projects: [] })
    t.same(narrowed.json, { user: { ...narrowed.json.user, projects: [] } }, 'no password: no sessionsEnded')
    t.same((await again.call('GET', '/admin/projects')).json.projects, [], 'a project change is in force on the next request of a live session')
    const promoted = await admin('PATCH', `/admin/users/${ownerId}`, { role: 'operator' })
    t.equal(promoted.json.user.role, 'operator')
    t.equal((await again.call('GET', '/admin/users')).status, 200, 'promoted: the same session now reaches the users routes')
    t.equal((await admin('PATCH', `/admin/users/${ownerId}`, { role: 'owner', projects: ['acme'] })).status, 200, 'the admin token demotes it again')
    t.equal((await again.call('GET', '/admin/users')).status, 403, 'demoted at once')
  })

  await t.test('deleting a user ends its sessions at once', async (t) => {
    const created = await opCall('POST', '/admin/users', { email: 'temp@example.com', role: 'owner', projects: ['other'], password: password('temp') })
    t.equal(created.status, 201)
    const temp = created.json.user.id as string
    const tempPassword = password('temp-2')
    passwords.add(tempPassword)
    t.equal((await admin('PATCH', `/admin/users/${temp}`, { password: tempPassword })).status, 200, 'the admin token sets a password too')
    const session = await signIn(gw.adminUrl, 'temp@example.com', tempPassword)
    t.equal((await session.call('GET', '/admin/projects/other')).status, 200)
    const removed = await opCall('DELETE', `/admin/users/${temp}`)
    t.same(removed.json, { deleted: temp })
    const after = await session.call('GET', '/admin/projects/other')
    t.match([after.status, after.json.error.code], [401, 'session_invalid'], 'its session is refused at once')
    t.equal((await send(gw.adminUrl, 'POST', '/admin/session', { body: { email: 'temp@example.com', password: tempPassword } })).status, 401, 'it cannot sign in')
    t.notOk((await users()).some((u) => u.id === temp), 'it is gone from the list')
    t.equal((await opCall('DELETE', `/admin/users/${temp}`)).json.error.code, 'user_not_found', 'a second delete is 404')
    t.notOk((await opCall('GET', '/admin/sessions')).json.sessions.some((s: { userId: string }) => s.userId === temp), 'no session of it is listed')
  })

  await t.test('every change is audited; nothing holds a password or a hash', async (t) => {
    const audit = await admin('GET', '/admin/settings/audit?limit=100')
    const changes = (audit.json.changes as { action: string; actor: string; projectId: string; detail: Record<string, unknown> }[]).filter((c) => c.action.startsWith('user.'))
    t.same(
      changes.map((c) => `${c.action} ${c.actor} ${c.detail.email}`).reverse(),
      [
        `user.create admin-token ${OP.email}`,
        `user.create ${OP.email} ${OWNER.email}`,
        `user.update ${OP.email} ${OP.email}`,
        `user.update ${OP.email} ${OWNER.email}`,
        `user.update ${OP.email} ${OWNER.email}`,
        `user.update admin-token ${OWNER.email}`,
        `user.update admin-token ${OWNER.email}`,
        `user.create ${OP.email} temp@example.com`,
        `user.update admin-token temp@example.com`,
        `user.delete ${OP.email} temp@example.com`,
      ],
      'one entry per change, with its actor; refusals left none',
    )
    t.ok(changes.every((c) => c.projectId === ''), 'account changes belong to no project')
    t.match(changes.find((c) => c.detail.passwordChanged), { action: 'user.update', detail: { passwordChanged: true } })
    t.same((await admin('GET', '/admin/projects/acme/audit')).json.changes.filter((c: { action: string }) => c.action.startsWith('user.')), [], "a project's audit does not list them")
    const everything = [...answers.map((a) => a.text), JSON.stringify(audit.json), ...gw.output].join('\n')
    t.notOk(everything.includes('scrypt$'), 'no answer, audit entry or log line holds a password hash')
    t.notOk(/passwordHash|password_hash/.test(everything), 'nor a hash field')
    for (const secret of passwords) t.notOk(everything.includes(secret), 'nor a password')
  })
})

t.test('users over the admin API (shared engine): created on A, signs in on B', async (t) => {
  t.setTimeout(180_000)
  if (!(await needServers(t))) return
  const up = await startTestUpstream()
  t.teardown(() => up.close())
  const text = sharedConfig({ postgres: PG_URL, redis: REDIS_URL, schema: freshSchema(t), prefix: freshPrefix(t), allocation: 1000, up })
  const a = await startGatewayProcess(text, { startTimeoutMs: 90_000 })
  const b = await startGatewayProcess(text, { startTimeoutMs: 90_000 })
  dumpOnFailure(t, a, b)
  t.teardown(() => Promise.all([a.stop(), b.stop()]))
  const token = { authorization: `Bearer ${SHARED_ADMIN_TOKEN}` }
  const owner = { email: 'shared-owner@example.com', password: password('shared') }

  const created = await send(a.adminUrl, 'POST', '/admin/users', { body: { ...owner, role: 'owner', projects: ['p'] }, headers: token })
  t.equal(created.status, 201, `A creates an owner (${created.status} ${created.text.slice(0, 120)})`)
  t.equal((await send(b.adminUrl, 'POST', '/admin/users', { body: { ...owner, role: 'owner' }, headers: token })).status, 409, 'B sees the email as taken')
  const onB = await signIn(b.adminUrl, owner.email, owner.password)
  t.same((await onB.call('GET', '/admin/projects')).json.projects.map((p: { id: string }) => p.id), ['p'], 'the owner signs in on B and sees its project')
  const onA = await signIn(a.adminUrl, owner.email, owner.password)
  t.equal((await send(b.adminUrl, 'PATCH', `/admin/users/${created.json.user.id}`, { body: { projects: [] }, headers: token })).status, 200, 'B changes its projects')
  t.same((await onA.call('GET', '/admin/projects')).json.projects, [], 'A applies the change on the next request')
  t.equal((await onA.call('GET', '/admin/users')).status, 403, 'an owner on A is refused the users routes')
  t.equal((await send(b.adminUrl, 'PATCH', `/admin/users/${created.json.user.id}`, { body: { role: 'operator' }, headers: token })).status, 200, 'B makes it an operator')
  t.equal((await onA.call('GET', '/admin/users')).status, 200, 'A lets the same session in at once')
  t.same((await send(b.adminUrl, 'DELETE', `/admin/users/${created.json.user.id}`, { headers: token })).json, { deleted: created.json.user.id }, 'B deletes it')
  t.equal((await onA.call('GET', '/admin/session')).status, 401, "A refuses the deleted user's session at once")
  t.same((await send(a.adminUrl, 'GET', '/admin/users', { headers: token })).json.users, [], 'A lists no user')
})
