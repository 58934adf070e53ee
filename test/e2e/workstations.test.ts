/**
 * Cloud workstations through a real gateway process, a real local OpenID provider and real
 * workstation processes: the admin API (bad input refused with nothing changed), provision → ready
 * timed, the proxy refusing no session and another identity and passing the linked one after an
 * OIDC sign-in (code + PKCE, JWKS-verified ID token), a shell over a WebSocket through the proxy,
 * a gateway restart that finds the workstation running, delete → gone timed, no process left.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { request } from 'undici'
import WebSocket from 'ws'
import { hashCredential } from '../../core/projects/projects.ts'
import { startLocalOidcProvider } from '../../examples/oidc-provider.ts'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { signInThroughOidc } from '../helpers/oidc-sign-in.ts'
import { signIn, userCli } from '../helpers/admin-client.ts'
import { writeFileSync } from 'node:fs'
import { tempDir } from '../helpers/temp.ts'
import { killAllUnder, serversUnder } from '../helpers/terminal-servers.ts'

const ADMIN_TOKEN = `admin_${randomBytes(12).toString('hex')}`

function config(issuer: string): string {
  return `
version: 1
server: { listen: { host: 127.0.0.1, port: 0 } }
admin: { listen: { host: 127.0.0.1, port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
log: { access: false }
watch: false
workstations:
  dir: '{{DIR}}/workstations'
  oidc: { issuer: '${issuer}', clientId: tollgate-workstations }
projects:
  - id: p1
    plan: enterprise
    credits: { allocation: 1000, period: month }
    features: { workstation: true }
    settings: { workstationOwner: { issuer: '${issuer}', subject: alice } }
    keys: [{ hash: ${hashCredential(`tk_${randomBytes(8).toString('hex')}`)} }]
  - id: off
    plan: enterprise
    credits: { allocation: 1000, period: month }
    keys: [{ hash: ${hashCredential(`tk_${randomBytes(8).toString('hex')}`)} }]
routes: []
`
}

async function admin(gw: GatewayProcess, method: 'GET' | 'POST' | 'DELETE' | 'PUT', path: string): Promise<{ status: number; body: any }> {
  const answer = await request(`${gw.adminUrl}${path}`, { method, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  return { status: answer.statusCode, body: await answer.body.json() }
}


async function until(what: string, probe: () => Promise<boolean>, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

t.test('workstation: API, OIDC-bound proxy with WebSocket, restart, delete', async (t) => {
  t.setTimeout(400_000)
  const idp = await startLocalOidcProvider()
  const dir = tempDir('tollgate-ws-e2e-')
  const root = `${dir}/workstations`
  t.teardown(() => idp.close())
  // A project owner (accounts) of `off`, made before the gateway holds the store.
  writeFileSync(`${dir}/gateway.yaml`, config(idp.issuer).replaceAll('{{DIR}}', dir))
  const added = await userCli(`${dir}/gateway.yaml`, ['add', '--email', 'owner@example.com', '--role', 'owner', '--project', 'off'], 'owner-password-1234\n')
  t.equal(added.code, 0, added.stderr)
  let gw = await startGatewayProcess(config(idp.issuer), { dir, startTimeoutMs: 90_000 })
  idp.register({ clientId: 'tollgate-workstations', redirectUris: [`${gw.url}/workstations/_auth/callback`] })
  t.teardown(async () => {
    await gw.stop()
    killAllUnder(root)
  })

  // Bad input: a clear 4xx, nothing changed.
  t.same(await admin(gw, 'GET', '/admin/projects/p1/workstation'), { status: 200, body: { projectId: 'p1', state: 'absent', creditsCharged: 0, history: [] } })
  const unknown = await admin(gw, 'POST', '/admin/projects/nope/workstation/provision')
  t.same([unknown.status, unknown.body.error.code], [404, 'project_not_found'])
  const off = await admin(gw, 'POST', '/admin/projects/off/workstation/provision')
  t.same([off.status, off.body.error.code], [403, 'workstation_not_enabled'])
  const early = await admin(gw, 'POST', '/admin/projects/p1/workstation/start')
  t.same([early.status, early.body.error.code], [409, 'workstation_not_provisioned'])
  const wrongMethod = await admin(gw, 'PUT', '/admin/projects/p1/workstation')
  t.same([wrongMethod.status, wrongMethod.body.error.code], [405, 'method_not_allowed'])
  const noToken = await request(`${gw.adminUrl}/admin/projects/p1/workstation/provision`, { method: 'POST' })
  t.equal(noToken.statusCode, 401, 'the admin API wants the token')
  await noToken.body.dump()
  // A signed-in owner reaches only their project: p1 is as unknown to them as a missing one, and
  // only an operator turns the feature on.
  const owner = await signIn(gw.adminUrl, 'owner@example.com', 'owner-password-1234')
  const notTheirs = await owner.call('POST', '/admin/projects/p1/workstation/provision')
  t.same([notTheirs.status, notTheirs.json.error.code], [404, 'project_not_found'])
  const theirs = await owner.call('GET', '/admin/projects/off/workstation')
  t.same([theirs.status, theirs.json.error.code], [403, 'workstation_not_enabled'])
  const noCsrf = await owner.call('POST', '/admin/projects/off/workstation/provision', undefined, { csrf: false })
  t.same([noCsrf.status, noCsrf.json.error.code], [403, 'csrf_required'])
  const enable = await owner.call('PATCH', '/admin/projects/off', { features: { workstation: true } })
  t.same([enable.status, enable.json.error.code], [403, 'operator_only'], 'an owner cannot enable the workstation')
  t.equal((await admin(gw, 'GET', '/admin/projects/p1/workstation')).body.state, 'absent', 'nothing was changed')

  const provisionAt = performance.now()
  const accepted = await admin(gw, 'POST', '/admin/projects/p1/workstation/provision')
  t.same([accepted.status, accepted.body.state], [202, 'provisioning'])
  await until('ready', async () => (await admin(gw, 'GET', '/admin/projects/p1/workstation')).body.state === 'ready')
  const provisionMs = performance.now() - provisionAt
  t.comment(`e2e provision → ready: ${provisionMs.toFixed(0)} ms (spec 90 s)`)
  const ready = (await admin(gw, 'GET', '/admin/projects/p1/workstation')).body
  t.equal(ready.openPath, '/workstations/p1/')
  const again = await admin(gw, 'POST', '/admin/projects/p1/workstation/start')
  t.same([again.status, again.body.state], [202, 'ready'], 'a second start answers 202 with the current state')

  // No session: a browser is sent to sign in, an API client gets 401.
  const page = await request(`${gw.url}/workstations/p1/`, { headers: { accept: 'text/html' } })
  t.equal(page.statusCode, 302)
  t.equal(page.headers.location, '/workstations/_auth/login?project=p1')
  await page.body.dump()
  const api = await request(`${gw.url}/workstations/p1/`)
  t.equal(api.statusCode, 401)
  t.equal(((await api.body.json()) as any).error.code, 'workstation_sign_in_required')
  const forged = await request(`${gw.url}/workstations/p1/`, { headers: { cookie: 'tollgate_ws=forged' } })
  t.equal(forged.statusCode, 401, 'a forged session cookie is no session')
  await forged.body.dump()

  // Another identity signs in for real: refused.
  const bob = await signInThroughOidc(`${gw.url}/workstations/p1/`, 'bob')
  t.equal(bob.landedAt, `${gw.url}/workstations/p1/`)
  const refused = await request(`${gw.url}/workstations/p1/`, { headers: { cookie: bob.cookie } })
  t.equal(refused.statusCode, 403)
  t.equal(((await refused.body.json()) as any).error.code, 'workstation_identity_mismatch')

  // The linked identity: the terminal page through the proxy, and a shell over the WebSocket.
  const alice = await signInThroughOidc(`${gw.url}/workstations/p1/`, 'alice')
  const opened = await request(`${gw.url}/workstations/p1/`, { headers: { cookie: alice.cookie } })
  t.equal(opened.statusCode, 200)
  t.match(await opened.body.text(), /<script src="xterm\.js">/, 'the workstation page, through the gateway')
  const asset = await request(`${gw.url}/workstations/p1/xterm.js`, { headers: { cookie: alice.cookie } })
  t.equal(asset.statusCode, 200)
  await asset.body.dump()

  const bobSocket = new WebSocket(`${gw.url.replace('http', 'ws')}/workstations/p1/pty`, { headers: { cookie: bob.cookie, origin: gw.url } })
  const bobRefused = await new Promise<number>((resolve) => bobSocket.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0)))
  t.equal(bobRefused, 403, 'the WebSocket refuses the other identity too')

  const shell = async (cookie: string, command: string, expect: string) => {
    const socket = new WebSocket(`${gw.url.replace('http', 'ws')}/workstations/p1/pty`, { headers: { cookie, origin: gw.url } })
    let output = ''
    socket.on('message', (data) => (output += String(data)))
    await new Promise((resolve, reject) => { socket.once('open', resolve); socket.once('error', reject) })
    socket.send(Buffer.from(`${command}\n`)) // keystrokes are binary frames; text frames are control messages
    await until(`shell output ${expect}`, async () => output.includes(expect), 20_000)
    socket.close()
    return output
  }
  await shell(alice.cookie, 'echo through-the-proxy-$((20+22)) | tee note.txt', 'through-the-proxy-42')
  t.pass('a shell command and its output went through the proxy over the WebSocket')

  // Restart: the workstation keeps running and is found again; the session still holds.
  const pidsBefore = serversUnder(root)
  t.equal(pidsBefore.length, 1)
  await gw.stop()
  t.same(serversUnder(root), pidsBefore, 'the workstation outlives the gateway process')
  gw = await startGatewayProcess(config(idp.issuer), { dir, startTimeoutMs: 90_000 })
  t.equal((await admin(gw, 'GET', '/admin/projects/p1/workstation')).body.state, 'ready', 'found running after the restart')
  idp.register({ clientId: 'tollgate-workstations', redirectUris: [`${gw.url}/workstations/_auth/callback`] })
  await shell(alice.cookie, 'cat note.txt', 'through-the-proxy-42')
  t.pass('same workstation, same files, through the new gateway process')

  const deleteAt = performance.now()
  t.equal((await admin(gw, 'DELETE', '/admin/projects/p1/workstation')).status, 202)
  await until('gone', async () => (await admin(gw, 'GET', '/admin/projects/p1/workstation')).body.state === 'absent', 60_000)
  const deleteMs = performance.now() - deleteAt
  t.comment(`e2e delete → gone: ${deleteMs.toFixed(0)} ms (spec 60 s)`)
  t.same(serversUnder(root), [], 'no process left')
  const gone = await request(`${gw.url}/workstations/p1/`, { headers: { cookie: alice.cookie } })
  t.equal(gone.statusCode, 409)
  t.equal(((await gone.body.json()) as any).error.code, 'workstation_not_ready')
})
