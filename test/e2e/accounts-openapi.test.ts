/**
 * The admin API's OpenAPI 3.1 document against a real gateway: every documented operation is called
 * (as an operator, as an owner, with the bearer token), and each answer's body is validated with ajv
 * against the document's schema for that operation and status. An operation the document lists but
 * the test never reached fails the test, as does an answer with an undocumented status.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import Ajv2020 from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'
import { hashCredential } from '../../core/projects.ts'
import { startGatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream } from '../helpers/upstream.ts'
import { tempDir } from '../helpers/temp.ts'
import { send, signIn, userCli, type Answer } from '../helpers/admin-client.ts'

const ADMIN_TOKEN = `tk_admin_${randomBytes(12).toString('hex')}`
const bearer = { authorization: `Bearer ${ADMIN_TOKEN}` }
const OP = { email: 'op@example.com', password: 'operator-' + randomBytes(6).toString('hex') }
const OWNER = { email: 'owner@example.com', password: 'owner-pw-' + randomBytes(6).toString('hex') }

t.test('every documented admin operation answers what the OpenAPI document says', async (t) => {
  t.setTimeout(180_000)
  const up = await startTestUpstream()
  const dir = tempDir('tollgate-openapi-')
  const text = `
version: 1
server: { listen: { port: 0 } }
admin: { listen: { port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
watch: false
projects:
  - { id: acme, scopes: [zkpaas], credits: { allocation: 10 }, keys: [] }
  - { id: other, scopes: [zkpaas], keys: [] }
upstreams:
  echo: { url: '${up.url}' }
routes:
  - name: metered
    path: /zk/:apiKey/prove
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: zkpaas } }
      - { name: credit-meter, config: { apiType: PRIVNET_ZKPAAS, cost: 1 } }
`
  const configFile = join(dir, 'gateway.yaml')
  writeFileSync(configFile, text.replaceAll('{{DIR}}', dir))
  t.equal((await userCli(configFile, ['add', '--email', OP.email, '--role', 'operator'], OP.password + '\n')).code, 0)
  t.equal((await userCli(configFile, ['add', '--email', OWNER.email, '--role', 'owner', '--project', 'acme'], OWNER.password + '\n')).code, 0)
  const gw = await startGatewayProcess(text, { dir, startTimeoutMs: 90_000 })
  t.teardown(async () => {
    await gw.stop()
    await up.close()
  })

  const docAnswer = await send(gw.adminUrl, 'GET', '/admin/openapi.json')
  t.equal(docAnswer.status, 200)
  const doc = docAnswer.json
  t.equal(doc.openapi, '3.1.0')
  const ajv = new Ajv2020.default({ strict: false, allErrors: true })
  addFormats.default(ajv)
  const seen = new Set<string>()
  const check = (method: string, template: string, answer: Answer) => {
    const operation = doc.paths[template]?.[method.toLowerCase()]
    t.ok(operation, `${method} ${template} is documented`)
    const response = operation?.responses?.[String(answer.status)]
    t.ok(response, `${method} ${template} documents status ${answer.status} (${answer.text.slice(0, 120)})`)
    if (!response) return
    const schema = response.content['application/json'].schema
    const validate = ajv.compile({ ...schema, components: doc.components })
    const valid = validate(answer.json)
    t.ok(valid, `${method} ${template} ${answer.status} matches its schema ${valid ? '' : ajv.errorsText(validate.errors)}`)
    seen.add(`${method.toLowerCase()} ${template}`)
  }
  const admin = async (method: string, template: string, path: string, body?: unknown) => {
    const answer = await send(gw.adminUrl, method, path, { body, headers: bearer })
    check(method, template, answer)
    return answer
  }

  check('GET', '/admin/openapi.json', docAnswer)
  const signedIn = await send(gw.adminUrl, 'POST', '/admin/session', { body: { email: OP.email, password: OP.password } })
  check('POST', '/admin/session', signedIn)
  check('POST', '/admin/session', await send(gw.adminUrl, 'POST', '/admin/session', { body: { email: OP.email, password: 'wrong password here' } }))
  check('POST', '/admin/session', await send(gw.adminUrl, 'POST', '/admin/session', { body: { email: 42 } }))
  const op = await signIn(gw.adminUrl, OP.email, OP.password)
  const owner = await signIn(gw.adminUrl, OWNER.email, OWNER.password)
  check('GET', '/admin/session', await op.call('GET', '/admin/session'))
  check('GET', '/admin/session', await send(gw.adminUrl, 'GET', '/admin/session'))
  const sessions = await op.call('GET', '/admin/sessions')
  check('GET', '/admin/sessions', sessions)
  check('GET', '/admin/config', await admin('GET', '/admin/config', '/admin/config'))
  check('GET', '/admin/config', await owner.call('GET', '/admin/config'))
  await admin('POST', '/admin/reload', '/admin/reload')
  await admin('GET', '/admin/projects', '/admin/projects')
  check('GET', '/admin/projects', await owner.call('GET', '/admin/projects'))
  await admin('POST', '/admin/projects', '/admin/projects', { id: 'made', plan: 'growth' })
  await admin('POST', '/admin/projects', '/admin/projects', { id: 'made' })
  await admin('POST', '/admin/projects', '/admin/projects', { id: '' })
  await admin('GET', '/admin/projects/{id}', '/admin/projects/acme')
  check('GET', '/admin/projects/{id}', await owner.call('GET', '/admin/projects/other'))
  await admin('PATCH', '/admin/projects/{id}', '/admin/projects/acme', { name: 'Acme' })
  await admin('PATCH', '/admin/projects/{id}', '/admin/projects/acme', { nope: 1 })
  check('PATCH', '/admin/projects/{id}', await owner.call('PATCH', '/admin/projects/acme', { features: { proveBatch: true }, password: 'wrong password 1' }))
  check('PATCH', '/admin/projects/{id}', await owner.call('PATCH', '/admin/projects/acme', { features: { proveBatch: true }, password: OWNER.password }))
  const created = await admin('POST', '/admin/projects/{id}/keys', '/admin/projects/acme/keys', { label: 'app' })
  await admin('POST', '/admin/projects/{id}/keys', '/admin/projects/acme/keys', { label: 'app' })
  await admin('POST', '/admin/projects/{id}/keys', '/admin/projects/acme/keys', { label: 'by-hash', hash: hashCredential('a key given by hash') })
  await admin('GET', '/admin/projects/{id}/keys', '/admin/projects/acme/keys')
  await admin('POST', '/admin/projects/{id}/keys/{label}/disable', '/admin/projects/acme/keys/by-hash/disable')
  await admin('POST', '/admin/projects/{id}/keys/{label}/enable', '/admin/projects/acme/keys/by-hash/enable')
  await admin('POST', '/admin/projects/{id}/keys/{label}/expire', '/admin/projects/acme/keys/by-hash/expire', { expiresAt: '2099-01-01T00:00:00Z' })
  await admin('POST', '/admin/projects/{id}/keys/{label}/expire', '/admin/projects/acme/keys/by-hash/expire', { expiresAt: 'soon' })
  await admin('POST', '/admin/projects/{id}/keys/{label}/rotate', '/admin/projects/acme/keys/app/rotate', { graceSeconds: 60 })
  await admin('POST', '/admin/projects/{id}/keys/{label}/rotate', '/admin/projects/acme/keys/app/rotate', { graceSeconds: 'x' })
  await admin('POST', '/admin/projects/{id}/secret/rotate', '/admin/projects/acme/secret/rotate', { graceSeconds: 5 })
  await admin('POST', '/admin/projects/{id}/secret', '/admin/projects/acme/secret')
  await admin('POST', '/admin/projects/{id}/secret', '/admin/projects/acme/secret')
  await admin('POST', '/admin/projects/{id}/secret/rotate', '/admin/projects/acme/secret/rotate', { graceSeconds: 5 })
  t.equal((await send(gw.url, 'GET', `/zk/${created.json.key}/prove`)).status, 200)
  await admin('GET', '/admin/projects/{id}/usage', '/admin/projects/acme/usage')
  check('GET', '/admin/projects/{id}/usage', await owner.call('GET', '/admin/projects/other/usage'))
  await admin('GET', '/admin/projects/{id}/audit', '/admin/projects/acme/audit?limit=5')
  await admin('GET', '/admin/settings/audit', '/admin/settings/audit')
  check('GET', '/admin/settings/audit', await owner.call('GET', '/admin/settings/audit'))
  await admin('POST', '/admin/projects/{id}/reset', '/admin/projects/made/reset')
  await admin('POST', '/admin/projects/{id}/reset', '/admin/projects/acme/reset')
  const ownerSession = (await owner.call('GET', '/admin/session')).json.session.id
  check('DELETE', '/admin/sessions/{id}', await owner.call('DELETE', `/admin/sessions/${sessions.json.sessions.find((s: any) => s.current).id}`))
  check('DELETE', '/admin/sessions/{id}', await op.call('DELETE', `/admin/sessions/${ownerSession}`))
  check('DELETE', '/admin/session', await op.call('DELETE', '/admin/session', undefined, { csrf: false }))
  check('DELETE', '/admin/session', await op.call('DELETE', '/admin/session'))

  const documented = Object.entries(doc.paths).flatMap(([path, operations]) => Object.keys(operations as object).map((method) => `${method} ${path}`))
  t.same(documented.filter((op) => !seen.has(op)), [], 'every documented operation was called and checked')
})
