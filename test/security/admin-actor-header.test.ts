/**
 * Issue 25, finding 5: the audit trusted a header. The admin token's holder sent
 * `x-admin-actor: <a user's email>` and the audit trail, the project's `updatedBy` and the credit
 * grant recorded that email as the actor: a change by the shared token passed for one a signed-in
 * user made.
 *
 * The rule: the actor is the authenticated principal (`admin-token` for the bearer token, the
 * user's email for a session); `x-admin-actor` is kept as the entry's `actorNote` and never
 * replaces the actor. Checked against real gateway processes on both engines.
 */
import t, { type Test } from 'tap'
import { randomBytes } from 'node:crypto'
import { hashCredential } from '../../core/projects/projects.ts'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { send, signIn } from '../helpers/admin-client.ts'
import { freshPrefix, freshSchema, needServers, PG_URL, REDIS_URL } from '../helpers/shared-servers.ts'

const ADMIN_TOKEN = `tk_admin_${randomBytes(12).toString('hex')}`
const VICTIM = { email: 'alice@example.com', password: `alice-Pass-${randomBytes(6).toString('hex')}` }
/** What the attacker holding the token claims to be. */
const SPOOF = { authorization: `Bearer ${ADMIN_TOKEN}`, 'x-admin-actor': VICTIM.email }

function config(store: string): string {
  return `
version: 1
server: { listen: { port: 0 } }
admin: { listen: { port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: ${store}
log: { access: false }
watch: false
projects:
  - { id: acme, scopes: [zkpaas], credits: { allocation: 100, period: month }, keys: [] }
upstreams:
  echo: { url: 'http://127.0.0.1:9' }
routes:
  - name: prove
    path: /zk/:apiKey/prove
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: zkpaas } }
`
}

interface Change {
  actor: string
  actorNote?: string
  action: string
  detail: Record<string, unknown>
}

async function attack(t: Test, gw: GatewayProcess): Promise<void> {
  const created = await send(gw.adminUrl, 'POST', '/admin/users', { body: { ...VICTIM, role: 'operator' }, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  t.equal(created.status, 201, `the victim's operator account exists (${created.text.slice(0, 100)})`)
  const alice = await signIn(gw.adminUrl, VICTIM.email, VICTIM.password)

  const patched = await send(gw.adminUrl, 'PATCH', '/admin/projects/acme', { body: { name: 'Renamed by the token' }, headers: SPOOF })
  t.equal(patched.status, 200)
  t.equal(patched.json.project.updatedBy, 'admin-token', "the project's updatedBy is the token, not the email it claimed")

  const topUp = await send(gw.adminUrl, 'POST', '/admin/projects/acme/credits/top-up', { body: { amount: 5, idempotencyKey: 'spoof-1' }, headers: SPOOF })
  t.equal(topUp.status, 201)
  t.equal(topUp.json.grant.actor, 'admin-token', "the grant's actor is the token")
  const ledger = await send(gw.adminUrl, 'GET', '/admin/projects/acme/credits/ledger', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  const grant = (ledger.json.entries as { kind: string; id: string; actor: string }[]).find((e) => e.kind === 'grant' && e.id === 'topup:acme:spoof-1')
  t.equal(grant?.actor, 'admin-token', 'the ledger lists the grant under the token')

  const madeUser = await send(gw.adminUrl, 'POST', '/admin/users', { body: { email: 'mallory@example.com', role: 'owner', password: `m-Pass-${randomBytes(6).toString('hex')}` }, headers: SPOOF })
  t.equal(madeUser.status, 201)

  // What the victim really did, through its own session.
  const own = await alice.call('PATCH', '/admin/projects/acme', { name: 'Renamed by alice' })
  t.equal(own.json.project.updatedBy, VICTIM.email, "a session's change is the user's")

  const audit = await send(gw.adminUrl, 'GET', '/admin/settings/audit', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  const changes = audit.json.changes as Change[]
  const byAlice = changes.filter((c) => c.actor === VICTIM.email).map((c) => `${c.action} ${c.detail.name ?? ''}`.trim())
  t.same(byAlice, ['project.update Renamed by alice'], "only the victim's own change carries its email as the actor")
  const byToken = changes.filter((c) => c.actor === 'admin-token')
  t.same(
    byToken.map((c) => c.action).sort(),
    ['credits.top_up', 'project.update', 'user.create', 'user.create'],
    'every change made with the token is recorded as the token',
  )
  const noted = byToken.filter((c) => c.actorNote !== undefined)
  t.equal(noted.length, 3, 'the three spoofing calls keep their header as a note')
  t.ok(
    noted.every((c) => c.actorNote === VICTIM.email),
    'the header is kept as the note, beside the actor',
  )
  t.notOk('actorNote' in byToken.find((c) => c.action === 'user.create' && c.detail.email === VICTIM.email)!, 'no note without the header')

  const project = await send(gw.adminUrl, 'GET', '/admin/projects/acme/audit', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  t.match((project.json.changes as Change[]).find((c) => c.action === 'credits.top_up'), { actor: 'admin-token', actorNote: VICTIM.email })

  const bad = await send(gw.adminUrl, 'PATCH', '/admin/projects/acme', { body: { name: 'x' }, headers: { ...SPOOF, 'x-admin-actor': ' ' } })
  t.match(bad, { status: 400, json: { error: { code: 'invalid_header' } } }, 'a note that is not printable text is refused, naming the header')
  t.match(bad.json.error.message, /x-admin-actor/)
}

t.test('the admin token cannot pass for a user (embedded engine)', async (t) => {
  t.setTimeout(120_000)
  const gw = await startGatewayProcess(config(`{ dataDir: '{{DIR}}/data' }`), { startTimeoutMs: 60_000 })
  t.teardown(() => gw.stop())
  await attack(t, gw)
})

t.test('the admin token cannot pass for a user (shared engine)', async (t) => {
  t.setTimeout(120_000)
  if (!(await needServers(t))) return
  const store = `{ engine: shared, postgres: '${PG_URL}', redis: '${REDIS_URL}', schema: ${freshSchema(t)}, keyPrefix: '${freshPrefix(t)}' }`
  const gw = await startGatewayProcess(config(store), { startTimeoutMs: 60_000 })
  t.teardown(() => gw.stop())
  await attack(t, gw)
})
