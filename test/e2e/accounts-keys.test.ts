/**
 * Keys and secrets through the admin API of a real gateway process, called with a real route:
 * create (shown once), list (prefix and label, never a hash), expire at a time, disable, and
 * rotate with a grace period (the old key or secret works during it, and is refused after it).
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { hashCredential } from '../../core/projects/projects.ts'
import { startGatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream, type TestUpstream } from '../helpers/upstream.ts'
import { send } from '../helpers/admin-client.ts'

const ADMIN_TOKEN = `tk_admin_${randomBytes(12).toString('hex')}`
const SEED_KEY = `tk_seed_${randomBytes(12).toString('hex')}`
const bearer = { authorization: `Bearer ${ADMIN_TOKEN}` }

function config(up: TestUpstream): string {
  return `
version: 1
server: { listen: { port: 0 } }
admin: { listen: { port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
watch: false
projects:
  - id: acme
    scopes: [rpc, events]
    keys: [{ label: seed, hash: ${hashCredential(SEED_KEY)} }]
upstreams:
  echo: { url: '${up.url}' }
routes:
  - name: rpc
    path: /rpc/:apiKey
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: rpc } }
  - name: events
    path: /events/:apiKey
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: events } }
      - { name: secret-check, config: { header: x-api-secret } }
`
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

t.test('keys and secrets: create, list, expire, rotate with a grace period', async (t) => {
  t.setTimeout(180_000)
  const up = await startTestUpstream()
  const gw = await startGatewayProcess(config(up), { startTimeoutMs: 90_000 })
  t.teardown(async () => {
    await gw.stop()
    await up.close()
  })
  const admin = (method: string, path: string, body?: unknown) => send(gw.adminUrl, method, path, { body, headers: bearer })
  const rpc = async (key: string) => (await send(gw.url, 'GET', `/rpc/${key}`)).status
  const events = async (key: string, secret: string) => (await send(gw.url, 'GET', `/events/${key}`, { headers: { 'x-api-secret': secret } })).status
  const shown: string[] = []

  const created = await admin('POST', '/admin/projects/acme/keys', { label: 'app' })
  t.equal(created.status, 201)
  const key = created.json.key as string
  shown.push(key)
  t.equal(created.json.prefix, key.slice(0, 8))
  t.equal(await rpc(key), 200)

  const listed = await admin('GET', '/admin/projects/acme/keys')
  t.same(listed.json.keys.map((k: any) => [k.label, k.prefix, k.active]), [['seed', null, true], ['app', key.slice(0, 8), true]])
  t.notMatch(listed.text, /sha256|hash/, 'never a hash')
  t.notOk(listed.text.includes(key), 'never the key')

  await t.test('expire at a time', async (t) => {
    const at = new Date(Date.now() + 1500).toISOString()
    const expired = await admin('POST', '/admin/projects/acme/keys/app/expire', { expiresAt: at })
    t.equal(expired.status, 200)
    t.equal(await rpc(key), 200, 'before the time')
    await sleep(2000)
    t.equal(await rpc(key), 401, 'after it')
    t.equal((await admin('POST', '/admin/projects/acme/keys/app/expire', { expiresAt: null })).status, 200)
    t.equal(await rpc(key), 200, 'expiry removed')
    const bad = await admin('POST', '/admin/projects/acme/keys/app/expire', { expiresAt: 'tomorrow' })
    t.same([bad.status, bad.json.error.code], [400, 'invalid_body'])
    t.match(bad.json.error.message, /expiresAt/)
    const missing = await admin('POST', '/admin/projects/acme/keys/nope/expire', { expiresAt: null })
    t.same([missing.status, missing.json.error.code], [404, 'key_not_found'])
  })

  await t.test('rotate a key: both work during the grace, the old one is refused after', async (t) => {
    const bad = await admin('POST', '/admin/projects/acme/keys/app/rotate', { graceSeconds: -1 })
    t.same([bad.status, bad.json.error.code], [400, 'invalid_body'])
    t.match(bad.json.error.message, /graceSeconds/)
    const rotated = await admin('POST', '/admin/projects/acme/keys/app/rotate', { graceSeconds: 3 })
    t.equal(rotated.status, 200, rotated.text)
    const next = rotated.json.key as string
    shown.push(next)
    t.not(next, key)
    t.equal(rotated.json.label, 'app')
    t.equal(await rpc(next), 200, 'the new key works at once')
    t.equal(await rpc(key), 200, 'the old key works during the grace')
    await sleep(3500)
    t.equal(await rpc(key), 401, 'the old key is refused after the grace')
    t.equal(await rpc(next), 200, 'the new one still works')
    const seed = await admin('POST', '/admin/projects/acme/keys/seed/rotate', { graceSeconds: 0 })
    t.equal(seed.status, 200, 'a gateway.yaml key rotates too')
    shown.push(seed.json.key)
    t.equal(await rpc(SEED_KEY), 401, 'no grace: refused at once')
    t.equal(await rpc(seed.json.key), 200)
    const audit = await admin('GET', '/admin/projects/acme/audit')
    t.ok(audit.json.changes.some((c: any) => c.action === 'key.rotate' && c.detail.label === 'app' && c.detail.graceUntil))
    for (const secret of shown) t.notOk(audit.text.includes(secret), 'no key in the audit trail')
    t.notMatch(audit.text, /sha256:/, 'no hash in the audit trail')
  })

  await t.test('secrets: create (shown once), rotate with a grace', async (t) => {
    const current = (await admin('GET', '/admin/projects/acme/keys')).json.keys.find((k: any) => k.label === 'app' && k.active)
    t.ok(current)
    const appKey = shown[1]
    t.equal(await events(appKey, 'anything'), 403, 'no secret yet: closed')
    const made = await admin('POST', '/admin/projects/acme/secret')
    t.equal(made.status, 201)
    const secret = made.json.secret as string
    t.equal(made.json.project.hasSecret, true)
    t.equal(await events(appKey, secret), 200)
    const again = await admin('POST', '/admin/projects/acme/secret')
    t.same([again.status, again.json.error.code], [409, 'secret_exists'])
    const rotated = await admin('POST', '/admin/projects/acme/secret/rotate', { graceSeconds: 3 })
    t.equal(rotated.status, 200)
    const next = rotated.json.secret as string
    t.equal(await events(appKey, next), 200, 'the new secret works at once')
    t.equal(await events(appKey, secret), 200, 'the old one during the grace')
    t.equal(await events(appKey, 'wrong'), 403)
    await sleep(3500)
    t.equal(await events(appKey, secret), 403, 'the old secret is refused after the grace')
    t.equal(await events(appKey, next), 200)
    const audit = await admin('GET', '/admin/projects/acme/audit')
    t.notOk(audit.text.includes(secret) || audit.text.includes(next), 'no secret in the audit trail')
    t.notMatch(audit.text, /sha256:/)
  })
  const logs = gw.output.join('\n')
  for (const secret of shown) t.notOk(logs.includes(secret), 'no key in the logs')
})
