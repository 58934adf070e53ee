/**
 * Accounts on both engines (embedded SQLite, shared PostgreSQL + Redis): password hashing, users
 * and owned projects, sessions (sign-in, idle and absolute expiry, revocation, password change),
 * CSRF checks and the sign-in limits, through the same {@link Accounts} the admin API uses.
 */
import t from 'tap'
import type { IncomingMessage } from 'node:http'
import { randomUUID } from 'node:crypto'
import { Accounts, CSRF_HEADER, SESSION_COOKIE } from '../../../core/accounts/authenticate.ts'
import { hashPassword, verifyPassword, weakPassword, SCRYPT_PARAMS } from '../../../core/accounts/password.ts'
import { GatewayError } from '../../../core/proxy/errors.ts'
import { openSqliteStore } from '../../../core/store/sqlite.ts'
import { openSharedStore } from '../../../core/store/shared/index.ts'
import { AccountConflict } from '../../../core/store/accounts/types.ts'
import type { Store } from '../../../core/store/types.ts'
import { tempDir } from '../../helpers/temp.ts'
import { freshPrefix, freshSchema, needServers, PG_URL, REDIS_URL } from '../../helpers/shared-servers.ts'

t.test('password hashing', async (t) => {
  const stored = await hashPassword('correct horse battery')
  t.match(stored, new RegExp(`^scrypt\\$${SCRYPT_PARAMS.N}\\$${SCRYPT_PARAMS.r}\\$${SCRYPT_PARAMS.p}\\$[A-Za-z0-9_-]{22}\\$[A-Za-z0-9_-]{43}$`), 'parameters stored beside the hash')
  t.not(await hashPassword('correct horse battery'), stored, 'a fresh salt each time')
  t.equal(await verifyPassword('correct horse battery', stored), true)
  t.equal(await verifyPassword('correct horse batterY', stored), false)
  t.equal(await verifyPassword('correct horse battery', undefined), false, 'no account: false')
  t.equal(await verifyPassword('x', 'garbage'), false)
  // An unknown account costs one scrypt as well: compare against the wrong-password path. CPU time
  // (scrypt runs on libuv's pool, which process.cpuUsage counts), not the wall clock: a loaded CI
  // machine once made one unknown-account call take 1,263 ms of wall clock against 353 ms.
  const cpu = async (stored: string | undefined) => {
    const started = process.cpuUsage()
    await verifyPassword('some password here', stored)
    const used = process.cpuUsage(started)
    return (used.user + used.system) / 1000
  }
  await cpu(undefined)
  const wrong = Math.min(await cpu(stored), await cpu(stored), await cpu(stored))
  const unknown = Math.min(await cpu(undefined), await cpu(undefined), await cpu(undefined))
  t.ok(unknown > wrong / 3 && unknown < wrong * 3, `unknown ${unknown.toFixed(1)} ms vs wrong ${wrong.toFixed(1)} ms of CPU`)
  t.match(weakPassword(''), /empty/)
  t.match(weakPassword('short'), /at least 12/)
  t.match(weakPassword('aaaaaaaaaaaaaaa'), /different characters/)
  t.equal(weakPassword('a reasonable passphrase'), undefined)
})

interface Engine {
  name: string
  available(t: Parameters<typeof needServers>[0]): Promise<boolean>
  open(t: Parameters<typeof needServers>[0], clock: () => number): Promise<Store>
}

const engines: Engine[] = [
  { name: 'sqlite', available: async () => true, open: async (_t, clock) => openSqliteStore({ dataDir: tempDir('tollgate-accounts-'), clock }) },
  {
    name: 'shared',
    available: (t) => needServers(t),
    open: async (t, clock) => openSharedStore({ postgres: PG_URL, redis: REDIS_URL, schema: freshSchema(t), keyPrefix: freshPrefix(t), clock }),
  },
]

const request = (headers: Record<string, string>, method = 'GET') => ({ headers, method, socket: {} }) as unknown as IncomingMessage

for (const engine of engines) {
  t.test(`accounts on the ${engine.name} engine`, async (t) => {
    if (!(await engine.available(t))) return
    let now = Date.UTC(2026, 0, 1)
    const store = await engine.open(t, () => now)
    t.teardown(() => store.close())
    const sessions = { idleTimeoutSeconds: 60, absoluteTimeoutSeconds: 600, secureCookie: false, signInLimit: { perAccount: 5, perIp: 100, windowSeconds: 600 } }
    const accounts = new Accounts({ store, sessions: () => sessions, tokenHash: () => undefined, clock: () => now })
    const owner = await store.accounts.createUser({ id: randomUUID(), email: 'own@example.com', role: 'owner', passwordHash: await hashPassword('owner password 1'), projects: ['a', 'b', 'a'] })
    t.same(owner.projects, ['a', 'b'])
    await t.rejects(store.accounts.createUser({ id: randomUUID(), email: 'own@example.com', role: 'operator', passwordHash: 'x', projects: [] }), AccountConflict)
    await store.accounts.addProjects(owner.id, ['c', 'a'])
    t.same((await store.accounts.userByEmail('own@example.com'))!.projects, ['a', 'b', 'c'])

    const refusal = async (promise: Promise<unknown>) => {
      try {
        await promise
        return 'resolved'
      } catch (error) {
        return error instanceof GatewayError ? `${error.status} ${error.code}` : String(error)
      }
    }

    const { token, principal } = await accounts.signIn('OWN@example.com', 'owner password 1', '10.0.0.1')
    t.same([principal.actor, principal.role, principal.user.projects], ['own@example.com', 'owner', ['a', 'b', 'c']])
    const stored = await store.accounts.listSessions(owner.id)
    t.equal(stored.length, 1)
    t.not(stored[0].tokenHash, token, 'the token is stored hashed')
    t.match(stored[0].tokenHash, /^sha256:[0-9a-f]{64}$/)
    const withCookie = (method = 'GET', extra: Record<string, string> = {}) => request({ cookie: `other=1; ${SESSION_COOKIE}=${token}`, ...extra }, method)
    const resolved = await accounts.authenticate(withCookie())
    t.equal(resolved.kind === 'session' && resolved.session.csrfToken, principal.session.csrfToken)
    t.equal(accounts.canAccessProject(resolved, 'a'), true)
    t.equal(accounts.canAccessProject(resolved, 'zzz'), false)

    t.equal(await refusal(Promise.resolve().then(() => accounts.requireCsrf(withCookie('POST'), resolved))), '403 csrf_required')
    t.equal(await refusal(Promise.resolve().then(() => accounts.requireCsrf(withCookie('POST', { [CSRF_HEADER]: 'x'.repeat(43) }), resolved))), '403 csrf_invalid')
    t.equal(await refusal(Promise.resolve().then(() => accounts.requireCsrf(withCookie('POST', { [CSRF_HEADER]: principal.session.csrfToken }), resolved))), 'resolved')
    t.equal(await refusal(Promise.resolve().then(() => accounts.requireCsrf(withCookie('GET'), resolved))), 'resolved', 'reads need none')

    // Idle expiry: activity moves it, silence ends it.
    now += 50_000
    await accounts.authenticate(withCookie())
    now += 50_000
    t.equal(await refusal(accounts.authenticate(withCookie())), 'resolved', 'the earlier request kept it alive')
    now += 61_000
    t.equal(await refusal(accounts.authenticate(withCookie())), '401 session_expired')
    t.equal(await refusal(accounts.authenticate(withCookie())), '401 session_invalid', 'deleted once expired')

    // Absolute expiry, however active.
    const second = await accounts.signIn('own@example.com', 'owner password 1', '10.0.0.1')
    const cookie2 = request({ cookie: `${SESSION_COOKIE}=${second.token}` })
    for (let i = 0; i < 11; i++) {
      now += 50_000
      await accounts.authenticate(cookie2)
    }
    now += 50_000
    t.equal(await refusal(accounts.authenticate(cookie2)), '401 session_expired', 'past absoluteTimeoutSeconds')

    // A password change ends every session.
    const third = await accounts.signIn('own@example.com', 'owner password 1', '10.0.0.2')
    t.ok(await store.accounts.updateUser(owner.id, { passwordHash: await hashPassword('another password 2') }), 'the password is changed')
    t.equal(await refusal(accounts.authenticate(request({ cookie: `${SESSION_COOKIE}=${third.token}` }))), '401 session_invalid')
    t.equal(await refusal(accounts.signIn('own@example.com', 'owner password 1', '10.0.0.2')), '401 invalid_credentials')

    // The per-account limit: 5 attempts in the window, then 429 even with the right password.
    for (let i = 0; i < 5; i++) t.equal(await refusal(accounts.signIn('limited@example.com', 'wrong password 0', '10.0.0.3')), '401 invalid_credentials')
    t.equal(await refusal(accounts.signIn('limited@example.com', 'wrong password 0', '10.0.0.3')), '429 sign_in_rate_limited')
    t.equal(await refusal(accounts.signIn('nobody@example.com', 'whatever pass', '10.0.0.3')), '401 invalid_credentials', 'other accounts are not limited')

    // Revocation.
    await store.accounts.createUser({ id: randomUUID(), email: 'op@example.com', role: 'operator', passwordHash: await hashPassword('operator pass 1'), projects: [] })
    const op = await accounts.signIn('op@example.com', 'operator pass 1', '10.0.0.4')
    const opCookie = request({ cookie: `${SESSION_COOKIE}=${op.token}` })
    t.equal(accounts.canAccessProject(await accounts.authenticate(opCookie), 'anything'), true, 'operators reach every project')
    t.equal(await store.accounts.deleteSession(op.principal.session.id), true)
    t.equal(await refusal(accounts.authenticate(opCookie)), '401 session_invalid')
    t.equal(await refusal(accounts.authenticate(request({ cookie: `${SESSION_COOKIE}=not-a-token` }))), '401 session_invalid')
    t.equal(await refusal(accounts.authenticate(request({}))), '401 admin_unauthorized')
    t.equal(await refusal(accounts.authenticate(request({ authorization: 'Bearer x' }))), '401 admin_unauthorized', 'no admin token configured')

    // updateUser: role and projects (replaced, deduplicated) keep the sessions; a new password ends them.
    const live = await accounts.signIn('own@example.com', 'another password 2', '10.0.0.5')
    const liveCookie = request({ cookie: `${SESSION_COOKIE}=${live.token}` })
    now += 1000
    const promoted = await store.accounts.updateUser(owner.id, { role: 'operator', projects: ['z', 'b', 'z'] })
    t.match(promoted, { role: 'operator', projects: ['b', 'z'], updatedAt: now })
    t.not(promoted!.updatedAt, promoted!.createdAt, 'updatedAt moves')
    const after = await accounts.authenticate(liveCookie)
    t.same([after.role, after.kind === 'session' && after.user.projects], ['operator', ['b', 'z']], 'a live session sees the change at once')
    t.same((await store.accounts.updateUser(owner.id, { projects: [] }))!.projects, [], 'projects can be emptied')
    const repassed = await store.accounts.updateUser(owner.id, { passwordHash: await hashPassword('third password 3') })
    t.equal(repassed!.role, 'operator', 'a password change keeps the role')
    t.equal(await refusal(accounts.authenticate(liveCookie)), '401 session_invalid', 'a new password ends the sessions')
    t.equal(await store.accounts.updateUser(randomUUID(), { role: 'owner' }), undefined, 'no such user: undefined')

    // deleteUser: the user, its projects and its sessions go together.
    const doomed = await store.accounts.createUser({ id: randomUUID(), email: 'doomed@example.com', role: 'owner', passwordHash: await hashPassword('doomed pass 1'), projects: ['a', 'b'] })
    const doomedSession = await accounts.signIn('doomed@example.com', 'doomed pass 1', '10.0.0.6')
    t.equal(await store.accounts.deleteUser(doomed.id), true)
    t.equal(await refusal(accounts.authenticate(request({ cookie: `${SESSION_COOKIE}=${doomedSession.token}` }))), '401 session_invalid')
    t.same(await store.accounts.listSessions(doomed.id), [], 'no session row is left')
    t.equal(await store.accounts.userByEmail('doomed@example.com'), undefined)
    t.equal(await store.accounts.deleteUser(doomed.id), false, 'a second delete: false')
    const reborn = await store.accounts.createUser({ ...doomed, projects: ['c'] })
    t.same(reborn.projects, ['c'], 'the same id again owns only its new projects: no project row was left')
  })
}
