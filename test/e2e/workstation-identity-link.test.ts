/**
 * Identity links through a real gateway process and the real local OpenID provider: a signed-in
 * tollgate user links their identity-provider account by an OIDC sign-in (code + PKCE, JWKS-checked
 * ID token) started from the admin API; the workstation proxy then admits that IdP account (HTTP and
 * WebSocket) only into projects the user owns; another IdP account, or one linked to a user who does
 * not own the project, is refused 403; after unlinking the same session is refused. Linking needs a
 * session (401) and the CSRF token (403).
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { request } from 'undici'
import WebSocket from 'ws'
import { hashCredential } from '../../core/projects/projects.ts'
import { startLocalOidcProvider } from '../../examples/oidc-provider.ts'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { signInThroughOidc } from '../helpers/oidc-sign-in.ts'
import { signIn, userCli, type Session } from '../helpers/admin-client.ts'
import { tempDir } from '../helpers/temp.ts'
import { killAllUnder, serversUnder } from '../helpers/terminal-servers.ts'

type T = Pick<typeof t, "equal" | "match">
const ADMIN_TOKEN = `admin_${randomBytes(12).toString('hex')}`

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
  - id: p1
    plan: enterprise
    credits: { allocation: 1000, period: month }
    features: { workstation: true }
    keys: [{ hash: ${hashCredential(`tk_${randomBytes(8).toString('hex')}`)} }]
  - id: p2
    plan: enterprise
    credits: { allocation: 1000, period: month }
    features: { workstation: true }
    keys: [{ hash: ${hashCredential(`tk_${randomBytes(8).toString('hex')}`)} }]
routes: []
`
}


async function until(what: string, probe: () => Promise<boolean>, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

async function operator(gw: GatewayProcess, method: 'GET' | 'POST' | 'DELETE', path: string): Promise<{ status: number; body: any }> {
  const answer = await request(`${gw.adminUrl}${path}`, { method, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  return { status: answer.statusCode, body: await answer.body.json() }
}

/** Links `account` (an IdP login) to the signed-in user; returns the workstation session cookie the callback set. */
async function link(t: T, user: Session, account: string): Promise<string> {
  const begun = await user.call('POST', '/admin/account/identity/link')
  t.equal(begun.status, 200, begun.text)
  t.match(begun.json.authorizeUrl, /code_challenge_method=S256/)
  const { cookie, landedAt } = await signInThroughOidc(begun.json.authorizeUrl, account, linkCookie(begun))
  t.match(landedAt, /\/workstations\/_auth\/linked$/)
  return cookie
}

/** The `tollgate_link` cookie the admin API gave the browser that started a link. */
function linkCookie(begun: { headers: Record<string, string | string[] | undefined> }): string {
  const line = ([] as string[]).concat(begun.headers['set-cookie'] ?? []).find((value) => value.startsWith('tollgate_link='))
  if (!line) throw new Error('POST /admin/account/identity/link set no tollgate_link cookie')
  return line.split(';')[0]!
}

async function status(gw: GatewayProcess, cookie: string, path = '/workstations/p1/'): Promise<{ status: number; code?: string }> {
  const answer = await request(`${gw.url}${path}`, { headers: { cookie } })
  const text = await answer.body.text()
  let code: string | undefined
  try { code = JSON.parse(text).error?.code } catch { /* a page */ }
  return { status: answer.statusCode, code }
}

/** Opens the terminal's WebSocket as `cookie` and keeps it open (rejects when refused). */
async function openSocket(gw: GatewayProcess, cookie: string): Promise<WebSocket> {
  const socket = new WebSocket(`${gw.url.replace('http', 'ws')}/workstations/p1/pty`, { headers: { cookie, origin: gw.url } })
  await new Promise((resolve, reject) => {
    socket.once('open', resolve)
    socket.once('unexpected-response', (_req, res) => reject(new Error(`refused ${res.statusCode}`)))
    socket.once('error', reject)
  })
  return socket
}

/** Milliseconds until `socket` closes, or Infinity if it is still open after `limitMs`. */
function closesWithin(socket: WebSocket, limitMs: number): Promise<number> {
  const since = performance.now()
  return new Promise((resolve) => {
    const timer = setTimeout(() => { socket.terminate(); resolve(Infinity) }, limitMs)
    socket.once('close', () => { clearTimeout(timer); resolve(performance.now() - since) })
  })
}

async function socketStatus(gw: GatewayProcess, cookie: string): Promise<number | 'open'> {
  const socket = new WebSocket(`${gw.url.replace('http', 'ws')}/workstations/p1/pty`, { headers: { cookie, origin: gw.url } })
  return new Promise((resolve, reject) => {
    socket.once('open', () => { socket.close(); resolve('open') })
    socket.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0))
    socket.once('error', reject)
  })
}

t.test('identity link: linked owner passes, others refused, unlink refuses, session and CSRF required', async (t) => {
  t.setTimeout(300_000)
  const idp = await startLocalOidcProvider()
  t.teardown(() => idp.close())
  const dir = tempDir('tollgate-ws-link-')
  const root = `${dir}/workstations`
  writeFileSync(`${dir}/gateway.yaml`, config(idp.issuer, dir))
  for (const [email, project] of [['alice@example.com', 'p1'], ['carol@example.com', 'p2']]) {
    const added = await userCli(`${dir}/gateway.yaml`, ['add', '--email', email, '--role', 'owner', '--project', project], 'owner-password-1234\n')
    t.equal(added.code, 0, added.stderr)
  }
  const gw = await startGatewayProcess(config(idp.issuer, dir), { dir, startTimeoutMs: 90_000 })
  idp.register({ clientId: 'tollgate-workstations', redirectUris: [`${gw.url}/workstations/_auth/callback`] })
  t.teardown(async () => {
    await gw.stop()
    killAllUnder(root)
  })

  t.equal((await operator(gw, 'POST', '/admin/projects/p1/workstation/provision')).status, 202)
  await until('ready', async () => (await operator(gw, 'GET', '/admin/projects/p1/workstation')).body.state === 'ready')

  // Linking needs a signed-in user, their CSRF token, and is nothing the admin token can do.
  const anonymous = await request(`${gw.adminUrl}/admin/account/identity/link`, { method: 'POST' })
  t.equal(anonymous.statusCode, 401, 'link without a session')
  t.equal(((await anonymous.body.json()) as any).error.code, 'admin_unauthorized')
  t.same((await operator(gw, 'POST', '/admin/account/identity/link')).body.error.code, 'account_session_required')
  const alice = await signIn(gw.adminUrl, 'alice@example.com', 'owner-password-1234')
  const noCsrf = await alice.call('POST', '/admin/account/identity/link', undefined, { csrf: false })
  t.same([noCsrf.status, noCsrf.json.error.code], [403, 'csrf_required'])
  const badCsrf = await alice.call('POST', '/admin/account/identity/link', undefined, { csrf: 'x'.repeat(43) })
  t.same([badCsrf.status, badCsrf.json.error.code], [403, 'csrf_invalid'])
  const badReturn = await alice.call('POST', '/admin/account/identity/link', { returnTo: 'https://evil.example/' })
  t.same([badReturn.status, badReturn.json.error.code], [400, 'invalid_body'], 'returnTo is a dashboard path only')
  t.same((await alice.call('GET', '/admin/account/identity')).json, { linked: false })

  // An IdP account nobody linked: refused.
  const stranger = await signInThroughOidc(`${gw.url}/workstations/p1/`, 'mallory')
  t.same(await status(gw, stranger.cookie), { status: 403, code: 'workstation_identity_not_linked' }, 'a different identity is refused')
  t.equal(await socketStatus(gw, stranger.cookie), 403, 'and its WebSocket too')

  // Alice links IdP account "alice-idp": she owns p1, so it passes (HTTP and WebSocket), p2 does not.
  const aliceWs = await link(t, alice, 'alice-idp')
  const linked = await alice.call('GET', '/admin/account/identity')
  t.equal(linked.json.linked, true)
  t.same([linked.json.identity.issuer, linked.json.identity.subject], [idp.issuer, 'alice-idp'])
  t.same(await status(gw, aliceWs), { status: 200, code: undefined }, 'the linked owner opens the workstation')
  t.equal(await socketStatus(gw, aliceWs), 'open', 'the linked owner opens the WebSocket')
  t.same(await status(gw, stranger.cookie), { status: 403, code: 'workstation_identity_not_linked' }, 'still refused after another link')

  // Carol (owner of p2 only) links her IdP account: it may not open p1.
  const carol = await signIn(gw.adminUrl, 'carol@example.com', 'owner-password-1234')
  const carolWs = await link(t, carol, 'carol-idp')
  t.same(await status(gw, carolWs), { status: 403, code: 'workstation_identity_not_permitted' }, 'linked to a user who does not own p1')
  t.equal(await socketStatus(gw, carolWs), 403)
  // Nor may she claim alice's IdP account.
  const stolen = await carol.call('POST', '/admin/account/identity/link')
  const claim = await signInThroughOidc(stolen.json.authorizeUrl, 'alice-idp', linkCookie(stolen)).then(() => 'signed in', (error: Error) => error.message)
  t.match(claim, /identity_linked_to_another_user/, 'one IdP account links to one user')
  // Login CSRF: carol starts a link and gets dave's browser (without her link cookie) to finish it
  // with dave's IdP account: refused, and dave's IdP account stays free.
  const planted = await carol.call('POST', '/admin/account/identity/link')
  t.match(planted.headers['set-cookie'], /tollgate_link=[^;]+; Path=\/workstations\/_auth\/; Max-Age=600; HttpOnly; SameSite=Lax/, 'the link cookie: HttpOnly, Lax, for the callback only')
  const victim = await signInThroughOidc(planted.json.authorizeUrl, 'dave-idp').then(() => 'signed in', (error: Error) => error.message)
  t.match(victim, /link_not_started_here/, 'a link finished in another browser is refused')
  const forged = await signInThroughOidc((await carol.call('POST', '/admin/account/identity/link')).json.authorizeUrl, 'dave-idp', 'tollgate_link=' + 'A'.repeat(43)).then(() => 'signed in', (error: Error) => error.message)
  t.match(forged, /link_not_started_here/, 'and so is one with a wrong link cookie')
  t.equal((await carol.call('GET', '/admin/account/identity')).json.identity.subject, 'carol-idp', "carol's link is unchanged")
  t.equal((await alice.call('GET', '/admin/account/identity')).json.identity.subject, 'alice-idp')

  // Unlink: the same workstation session is refused from then on.
  const noCsrfUnlink = await alice.call('DELETE', '/admin/account/identity', undefined, { csrf: false })
  t.equal(noCsrfUnlink.status, 403, 'unlink needs the CSRF token too')
  const held = await openSocket(gw, aliceWs)
  t.same((await alice.call('DELETE', '/admin/account/identity')).json, { linked: false })
  const unlinkCut = await closesWithin(held, 10_000)
  t.ok(unlinkCut <= 5_000, `unlinking closed the open WebSocket within 5 s (${unlinkCut.toFixed(0)} ms)`)
  t.same((await alice.call('DELETE', '/admin/account/identity')).json.error.code, 'identity_not_linked')
  t.same(await status(gw, aliceWs), { status: 403, code: 'workstation_identity_not_linked' }, 'unlinked → refused')
  t.equal(await socketStatus(gw, aliceWs), 403)

  // Removing the user: alice links again, opens a shell, and an operator removes her account.
  const aliceAgain = await link(t, alice, 'alice-idp')
  const again = await openSocket(gw, aliceAgain)
  const users = (await operator(gw, 'GET', '/admin/users')).body.users as { id: string; email: string }[]
  const aliceId = users.find((user) => user.email === 'alice@example.com')!.id
  t.equal((await operator(gw, 'DELETE', `/admin/users/${aliceId}`)).status, 200, 'the operator removes alice')
  const removalCut = await closesWithin(again, 10_000)
  t.ok(removalCut <= 5_000, `removing the user closed the open WebSocket within 5 s (${removalCut.toFixed(0)} ms)`)
  t.equal((await status(gw, aliceAgain)).status, 403, 'and the session is refused from then on')

  t.equal((await operator(gw, 'DELETE', '/admin/projects/p1/workstation')).status, 202)
  await until('gone', async () => (await operator(gw, 'GET', '/admin/projects/p1/workstation')).body.state === 'absent', 60_000)
  t.same(serversUnder(root), [], 'no process left')
})
