/**
 * Attack: a key in its grace period (the `…rotated-x` row a rotation leaves, due to expire) is
 * rotated again. Before the fix the rotation gave that row's hash a fresh key row with no expiry:
 * the old credential, meant to die at the end of the grace, kept working for ever (plus a
 * `…rotated-x.rotated-y` row). The API must refuse it (409 key_in_grace) and the old key must
 * still stop working when its grace ends.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { hashCredential } from '../../core/projects/projects.ts'
import { startGatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream } from '../helpers/upstream.ts'
import { send } from '../helpers/admin-client.ts'

const ADMIN_TOKEN = `tk_admin_${randomBytes(12).toString('hex')}`
const SEED_KEY = `tk_seed_${randomBytes(12).toString('hex')}`
const bearer = { authorization: `Bearer ${ADMIN_TOKEN}` }

t.test('a key in its grace period cannot be rotated into a permanent key', async (t) => {
  t.setTimeout(120_000)
  const up = await startTestUpstream()
  const gw = await startGatewayProcess(
    `
version: 1
server: { listen: { port: 0 } }
admin: { listen: { port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
watch: false
projects:
  - id: acme
    scopes: [rpc]
    keys: [{ label: seed, hash: ${hashCredential(SEED_KEY)} }]
upstreams:
  echo: { url: '${up.url}' }
routes:
  - name: rpc
    path: /rpc/:apiKey
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: rpc } }
`,
    { startTimeoutMs: 90_000 },
  )
  t.teardown(async () => {
    await gw.stop()
    await up.close()
  })
  const admin = (method: string, path: string, body?: unknown) => send(gw.adminUrl, method, path, { body, headers: bearer })

  const rotated = await admin('POST', '/admin/projects/acme/keys/seed/rotate', { graceSeconds: 2 })
  t.equal(rotated.status, 200, rotated.text)
  const leftover = rotated.json.previousLabel as string
  t.match(leftover, /^seed\.rotated-/)

  const again = await admin('POST', `/admin/projects/acme/keys/${encodeURIComponent(leftover)}/rotate`, { graceSeconds: 3600 })
  t.equal(again.status, 409, `rotating the leftover is refused: ${again.text}`)
  t.equal(again.json?.error?.code, 'key_in_grace')
  t.match(again.json?.error?.message, /grace/)

  const keys = (await admin('GET', '/admin/projects/acme/keys')).json.keys as { label: string; expiresAt: string | null }[]
  t.notOk(keys.some((k) => k.label.includes('.rotated-') && k.expiresAt === null), 'no rotated row without an expiry')
  t.equal(keys.filter((k) => k.label.startsWith(leftover)).length, 1, 'no …rotated-x.rotated-y row')

  // The grace ends: the old key is refused, as the first rotation promised.
  await new Promise((resolve) => setTimeout(resolve, 2500))
  t.equal((await send(gw.url, 'GET', `/rpc/${SEED_KEY}`)).status, 401, 'the old key stops at the end of its grace')
  // The successor still rotates.
  t.equal((await admin('POST', '/admin/projects/acme/keys/seed/rotate', { graceSeconds: 0 })).status, 200)
})
