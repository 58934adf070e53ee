/**
 * The admin API's OpenAPI 3.1 document against a real gateway: every documented operation is called
 * (as an operator, as an owner, with the bearer token), and each answer's body is validated with ajv
 * against the document's schema for that operation and status. An operation the document lists but
 * the test never reached fails the test, as does an answer with an undocumented status or content
 * type. CSV answers are checked by their header line, NDJSON answers line by line against the row
 * schema. The list of routes the gateway serves (SERVED below) must equal the document's operations.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join, sep } from 'node:path'
import Ajv2020 from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'
import { hashCredential } from '../../core/projects/projects.ts'
import { startGatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream } from '../helpers/upstream.ts'
import { tempDir } from '../helpers/temp.ts'
import { send, signIn, userCli, type Answer } from '../helpers/admin-client.ts'
import { serversUnder } from '../helpers/terminal-servers.ts'

const ADMIN_TOKEN = `tk_admin_${randomBytes(12).toString('hex')}`
const bearer = { authorization: `Bearer ${ADMIN_TOKEN}` }
const OP = { email: 'op@example.com', password: 'operator-' + randomBytes(6).toString('hex') }
const OWNER = { email: 'owner@example.com', password: 'owner-pw-' + randomBytes(6).toString('hex') }
const ALERT_SECRET = `alert-secret-${randomBytes(12).toString('hex')}`

/**
 * Every method and path the admin listener serves as an API (core/admin/admin.ts, core/accounts/session-routes.ts,
 * core/accounts/user-routes.ts, core/admin/settings-admin.ts, core/admin/credits-admin.ts, core/alerts/admin.ts, core/workstations/admin-routes.ts,
 * the credit-meter plugin's usage route). A route added to the code belongs here and in the document.
 */
const SERVED = [
  'get /healthz',
  'get /readyz',
  'get /metrics',
  'get /admin/openapi.json',
  'post /admin/session',
  'get /admin/account/identity',
  'delete /admin/account/identity',
  'post /admin/account/identity/link',
  'get /admin/session',
  'delete /admin/session',
  'get /admin/sessions',
  'delete /admin/sessions/{id}',
  'get /admin/users',
  'post /admin/users',
  'patch /admin/users/{id}',
  'delete /admin/users/{id}',
  'post /admin/reload',
  'get /admin/config',
  'get /admin/projects',
  'post /admin/projects',
  'get /admin/projects/{id}',
  'patch /admin/projects/{id}',
  'get /admin/projects/{id}/keys',
  'post /admin/projects/{id}/keys',
  'post /admin/projects/{id}/keys/{label}/disable',
  'post /admin/projects/{id}/keys/{label}/enable',
  'post /admin/projects/{id}/keys/{label}/expire',
  'post /admin/projects/{id}/keys/{label}/rotate',
  'post /admin/projects/{id}/secret',
  'post /admin/projects/{id}/secret/rotate',
  'post /admin/projects/{id}/reset',
  'get /admin/projects/{id}/audit',
  'get /admin/settings/audit',
  'get /admin/projects/{id}/usage',
  'get /admin/projects/{id}/credits',
  'post /admin/projects/{id}/credits/top-up',
  'get /admin/projects/{id}/credits/ledger',
  'get /admin/alerts',
  'get /admin/projects/{id}/alerts',
  'get /admin/projects/{id}/alerts/thresholds',
  'put /admin/projects/{id}/alerts/thresholds',
  'get /admin/projects/{id}/workstation',
  'delete /admin/projects/{id}/workstation',
  'post /admin/projects/{id}/workstation/provision',
  'post /admin/projects/{id}/workstation/start',
  'post /admin/projects/{id}/workstation/stop',
]

/** PIDs of workstation terminal servers whose working directory is under `root`. */

t.test('every documented admin operation answers what the OpenAPI document says', async (t) => {
  t.setTimeout(360_000)
  const up = await startTestUpstream()
  const dir = tempDir('tollgate-openapi-')
  const text = `
version: 1
server: { listen: { port: 0 } }
admin: { listen: { port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)}, protectMetrics: true }
store: { dataDir: '{{DIR}}/data' }
watch: false
alerts: { checkIntervalMs: 100 }
workstations: { driver: process, dir: '{{DIR}}/workstations' }
projects:
  - id: acme
    scopes: [zkpaas]
    credits: { allocation: 10 }
    features: { workstation: true }
    alerts: { url: '${up.url}/alert-hook', secret: ${ALERT_SECRET}, thresholds: [{ remaining: 9 }], maxAttempts: 1 }
    keys: []
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
  const seenContent = new Set<string>()
  const check = (method: string, template: string, answer: Answer) => {
    const operation = doc.paths[template]?.[method.toLowerCase()]
    t.ok(operation, `${method} ${template} is documented`)
    const response = operation?.responses?.[String(answer.status)]
    t.ok(response, `${method} ${template} documents status ${answer.status} (${answer.text.slice(0, 120)})`)
    if (!response) return
    const mediaType = String(answer.headers['content-type'] ?? '').split(';')[0].trim()
    const content = response.content?.[mediaType]
    t.ok(content, `${method} ${template} ${answer.status} documents content type ${mediaType}`)
    if (!content) return
    const validate = ajv.compile({ ...content.schema, components: doc.components })
    const matches = (value: unknown, what: string) => {
      const valid = validate(value)
      t.ok(valid, `${method} ${template} ${answer.status} ${what} matches its schema ${valid ? '' : ajv.errorsText(validate.errors)}`)
    }
    if (mediaType === 'application/json') matches(answer.json, 'body')
    else if (mediaType === 'application/x-ndjson') {
      t.ok(answer.text.endsWith('\n'), `${method} ${template}: NDJSON ends with a line break`)
      const lines = answer.text.split('\n').slice(0, -1)
      t.ok(lines.length > 0, `${method} ${template}: NDJSON has rows`)
      lines.forEach((line, i) => matches(JSON.parse(line), `NDJSON line ${i + 1}`))
    } else if (mediaType === 'text/csv') {
      const lines = answer.text.split('\r\n')
      const headers = Object.values(content['x-header-lines'] as Record<string, string>)
      t.ok(headers.includes(lines[0]), `${method} ${template}: CSV header line ${lines[0]} is documented`)
      t.equal(lines.at(-1), '', `${method} ${template}: CSV ends with CRLF`)
      const columns = lines[0].split(',').length
      t.ok(lines.length > 2, `${method} ${template}: CSV has rows`)
      for (const line of lines.slice(1, -1)) t.equal(line.split(',').length, columns, `${method} ${template}: CSV row ${line} has ${columns} fields`)
    } else matches(answer.text, 'text')
    seen.add(`${method.toLowerCase()} ${template}`)
    seenContent.add(`${method.toLowerCase()} ${template} ${mediaType}`)
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
  // Accounts over the API: list, create (then the same email, a bad body, too large a body), change, delete.
  const listed = await admin('GET', '/admin/users', '/admin/users')
  t.same(listed.json.users.map((u: any) => u.email), [OP.email, OWNER.email])
  check('GET', '/admin/users', await owner.call('GET', '/admin/users'))
  const made = await admin('POST', '/admin/users', '/admin/users', { email: 'api-made@example.com', role: 'owner', projects: ['acme'], password: 'api-made-' + randomBytes(6).toString('hex') })
  t.equal(made.status, 201)
  t.equal((await admin('POST', '/admin/users', '/admin/users', { email: 'api-made@example.com', role: 'owner', password: 'api-made-' + randomBytes(6).toString('hex') })).status, 409)
  t.equal((await admin('POST', '/admin/users', '/admin/users', { email: 'x@example.com', role: 'root', password: 'x' })).status, 400)
  t.equal((await admin('POST', '/admin/users', '/admin/users', '{"email":')).status, 400)
  t.equal((await admin('POST', '/admin/users', '/admin/users', JSON.stringify({ email: 'x'.repeat(70_000) }))).status, 413)
  check('POST', '/admin/users', await op.call('POST', '/admin/users', { email: 'csrf@example.com', role: 'owner', password: 'csrf-pass-' + randomBytes(6).toString('hex') }, { csrf: false }))
  t.equal((await admin('PATCH', '/admin/users/{id}', `/admin/users/${made.json.user.id}`, { projects: ['acme', 'other'], password: 'api-next-' + randomBytes(6).toString('hex') })).status, 200)
  t.equal((await admin('PATCH', '/admin/users/{id}', `/admin/users/${made.json.user.id}`, { role: 'operator' })).status, 200)
  await admin('PATCH', '/admin/users/{id}', `/admin/users/${made.json.user.id}`, { role: 'nope' })
  await admin('PATCH', '/admin/users/{id}', '/admin/users/missing', { role: 'owner' })
  const opId = listed.json.users.find((u: any) => u.email === OP.email).id
  check('PATCH', '/admin/users/{id}', await op.call('PATCH', `/admin/users/${opId}`, { role: 'owner' }))
  check('DELETE', '/admin/users/{id}', await op.call('DELETE', `/admin/users/${opId}`))
  check('DELETE', '/admin/users/{id}', await owner.call('DELETE', `/admin/users/${opId}`))
  t.equal((await admin('DELETE', '/admin/users/{id}', `/admin/users/${made.json.user.id}`)).status, 200)
  await admin('DELETE', '/admin/users/{id}', `/admin/users/${made.json.user.id}`)
  check('GET', '/admin/config', await admin('GET', '/admin/config', '/admin/config'))
  check('GET', '/admin/config', await owner.call('GET', '/admin/config'))
  await admin('POST', '/admin/reload', '/admin/reload')
  // A config the schema refuses: 422 with the issues, and the config in force stays.
  writeFileSync(configFile, text.replaceAll('{{DIR}}', dir).replace('watch: false', 'watch: false\nbogusSection: 1'))
  const refused = await admin('POST', '/admin/reload', '/admin/reload')
  t.equal(refused.status, 422)
  t.ok(refused.json.issues.some((issue: string) => issue.includes('bogusSection')), 'the refusal names the field')
  writeFileSync(configFile, text.replaceAll('{{DIR}}', dir))
  t.equal((await admin('POST', '/admin/reload', '/admin/reload')).status, 200)
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
  await admin('GET', '/admin/projects/{id}/usage', '/admin/projects/acme/usage?by=route&granularity=hour')
  await admin('GET', '/admin/projects/{id}/usage', '/admin/projects/acme/usage?format=csv')
  await admin('GET', '/admin/projects/{id}/usage', '/admin/projects/acme/usage?format=csv&by=route')
  await admin('GET', '/admin/projects/{id}/usage', '/admin/projects/acme/usage?format=ndjson')
  await admin('GET', '/admin/projects/{id}/usage', '/admin/projects/acme/usage?format=ndjson&by=route')
  for (const query of ['by=answer', 'by=answer&granularity=hour&format=csv', 'by=answer&format=ndjson', 'by=key', 'by=key&format=csv', 'by=key&format=ndjson']) {
    await admin('GET', '/admin/projects/{id}/usage', `/admin/projects/acme/usage?${query}`)
  }
  check('GET', '/admin/projects/{id}/usage', await owner.call('GET', '/admin/projects/other/usage?by=key'))
  await admin('GET', '/admin/projects/{id}/usage', '/admin/projects/acme/usage?by=answer&granularity=week')
  await admin('GET', '/admin/projects/{id}/usage', '/admin/projects/acme/usage?format=xml')
  await admin('GET', '/admin/projects/{id}/usage', '/admin/projects/acme/usage?from=2026-11-02&to=2026-11-01')
  await admin('GET', '/admin/projects/{id}/usage', '/admin/projects/acme/usage?by=status')
  await admin('GET', '/admin/projects/{id}/usage', '/admin/projects/nope/usage')

  // Credits: balance, a top-up (granted, then the same idempotency key again), the ledger.
  await admin('GET', '/admin/projects/{id}/credits', '/admin/projects/acme/credits')
  check('GET', '/admin/projects/{id}/credits', await owner.call('GET', '/admin/projects/other/credits'))
  const topUp = await admin('POST', '/admin/projects/{id}/credits/top-up', '/admin/projects/acme/credits/top-up', { amount: 5, reason: 'openapi test', idempotencyKey: 'openapi-1' })
  t.equal(topUp.status, 201)
  t.equal((await admin('POST', '/admin/projects/{id}/credits/top-up', '/admin/projects/acme/credits/top-up', { amount: 5, reason: 'openapi test', idempotencyKey: 'openapi-1' })).status, 200)
  await admin('POST', '/admin/projects/{id}/credits/top-up', '/admin/projects/acme/credits/top-up', { amount: -1 })
  t.equal((await admin('POST', '/admin/projects/{id}/credits/top-up', '/admin/projects/acme/credits/top-up', 'not json')).status, 400)
  t.equal((await admin('POST', '/admin/projects/{id}/credits/top-up', '/admin/projects/acme/credits/top-up', { amount: 1, tip: 2 })).json.error.message.includes('tip'), true)
  check('POST', '/admin/projects/{id}/credits/top-up', await owner.call('POST', '/admin/projects/acme/credits/top-up', { amount: 1 }))
  const ledger = await admin('GET', '/admin/projects/{id}/credits/ledger', '/admin/projects/acme/credits/ledger')
  t.same(ledger.json.entries.map((e: any) => e.kind).sort(), ['allocation', 'charge', 'grant'], 'the ledger lists the allocation, the charge and the grant')
  await admin('GET', '/admin/projects/{id}/credits/ledger', '/admin/projects/acme/credits/ledger?period=last-week')
  t.same((await admin('GET', '/admin/projects/{id}/credits/ledger', '/admin/projects/acme/credits/ledger?period=2020-01')).json.entries, [{ kind: 'allocation', amount: 10 }])

  // Alerts: the request above left 9 credits, the threshold; wait for the alert to be delivered.
  let alerts: Answer | undefined
  for (const deadline = Date.now() + 30_000; Date.now() < deadline; await new Promise((resolve) => setTimeout(resolve, 200))) {
    alerts = await send(gw.adminUrl, 'GET', '/admin/projects/acme/alerts', { headers: bearer })
    if (alerts.json?.alerts?.[0]?.state === 'delivered') break
  }
  t.equal(alerts?.json?.alerts?.[0]?.state, 'delivered', 'the low-balance alert fired and was delivered')
  const allAlerts = await admin('GET', '/admin/alerts', '/admin/alerts?limit=10')
  t.equal(allAlerts.json.alerts.length, 1)
  t.notOk(allAlerts.text.includes(ALERT_SECRET), 'the webhook secret is not in the answer')
  check('GET', '/admin/alerts', await owner.call('GET', '/admin/alerts'))
  await admin('GET', '/admin/alerts', '/admin/alerts?limit=0')
  await admin('GET', '/admin/projects/{id}/alerts', '/admin/projects/acme/alerts?limit=5')
  await admin('GET', '/admin/projects/{id}/alerts', '/admin/projects/acme/alerts?limit=x')
  check('GET', '/admin/projects/{id}/alerts', await owner.call('GET', '/admin/projects/other/alerts'))
  // Thresholds: gateway.yaml's, set at run time (operators), a bad body, no webhook, an owner, back to the yaml.
  await admin('GET', '/admin/projects/{id}/alerts/thresholds', '/admin/projects/acme/alerts/thresholds')
  t.equal((await admin('PUT', '/admin/projects/{id}/alerts/thresholds', '/admin/projects/acme/alerts/thresholds', { thresholds: [{ percent: 50 }] })).status, 200)
  t.equal((await admin('PUT', '/admin/projects/{id}/alerts/thresholds', '/admin/projects/acme/alerts/thresholds', { thresholds: [{ percent: 0 }] })).status, 400)
  t.equal((await admin('PUT', '/admin/projects/{id}/alerts/thresholds', '/admin/projects/other/alerts/thresholds', { thresholds: [{ percent: 5 }] })).status, 409)
  check('PUT', '/admin/projects/{id}/alerts/thresholds', await owner.call('PUT', '/admin/projects/acme/alerts/thresholds', { thresholds: [{ percent: 5 }] }))
  check('GET', '/admin/projects/{id}/alerts/thresholds', await owner.call('GET', '/admin/projects/other/alerts/thresholds'))
  t.equal((await admin('PUT', '/admin/projects/{id}/alerts/thresholds', '/admin/projects/acme/alerts/thresholds', { thresholds: null })).json.source, 'config')

  // Workstation: refusals, then provision → ready → stop → stopped → start → ready → delete → absent.
  const workstation = async (state: string) => {
    let answer: Answer | undefined
    for (const deadline = Date.now() + 90_000; Date.now() < deadline; await new Promise((resolve) => setTimeout(resolve, 200))) {
      answer = await admin('GET', '/admin/projects/{id}/workstation', '/admin/projects/acme/workstation')
      if (answer.json?.state === state || answer.json?.state === 'failed') break
    }
    t.equal(answer?.json?.state, state, `the workstation reaches ${state} (${answer?.json?.reason ?? ''})`)
  }
  await admin('GET', '/admin/projects/{id}/workstation', '/admin/projects/acme/workstation')
  await admin('POST', '/admin/projects/{id}/workstation/provision', '/admin/projects/other/workstation/provision')
  check('POST', '/admin/projects/{id}/workstation/provision', await owner.call('POST', '/admin/projects/other/workstation/provision'))
  await admin('GET', '/admin/projects/{id}/workstation', '/admin/projects/%E0%A4%A/workstation')
  await admin('POST', '/admin/projects/{id}/workstation/start', '/admin/projects/acme/workstation/start')
  await admin('POST', '/admin/projects/{id}/workstation/stop', '/admin/projects/acme/workstation/stop')
  await admin('DELETE', '/admin/projects/{id}/workstation', '/admin/projects/acme/workstation')
  t.teardown(() => {
    for (const pid of serversUnder(join(dir, 'workstations'))) process.kill(pid, 'SIGKILL')
  })
  t.equal((await admin('POST', '/admin/projects/{id}/workstation/provision', '/admin/projects/acme/workstation/provision')).status, 202)
  await workstation('ready')
  await admin('POST', '/admin/projects/{id}/workstation/provision', '/admin/projects/acme/workstation/provision')
  t.equal((await admin('POST', '/admin/projects/{id}/workstation/stop', '/admin/projects/acme/workstation/stop')).status, 202)
  await workstation('stopped')
  t.equal((await admin('POST', '/admin/projects/{id}/workstation/start', '/admin/projects/acme/workstation/start')).status, 202)
  await workstation('ready')
  t.equal((await admin('DELETE', '/admin/projects/{id}/workstation', '/admin/projects/acme/workstation')).status, 202)
  await workstation('absent')
  t.same(serversUnder(join(dir, 'workstations')), [], 'no workstation process is left')

  check('GET', '/healthz', await send(gw.adminUrl, 'GET', '/healthz'))
  check('GET', '/readyz', await send(gw.adminUrl, 'GET', '/readyz'))
  check('GET', '/metrics', await send(gw.adminUrl, 'GET', '/metrics'))
  const metrics = await send(gw.adminUrl, 'GET', '/metrics', { headers: bearer })
  check('GET', '/metrics', metrics)
  t.match(metrics.text, /^# HELP /m, 'the metrics are the Prometheus text exposition')

  await admin('GET', '/admin/projects/{id}/audit', '/admin/projects/acme/audit?limit=5')
  await admin('GET', '/admin/settings/audit', '/admin/settings/audit')
  check('GET', '/admin/settings/audit', await owner.call('GET', '/admin/settings/audit'))
  await admin('POST', '/admin/projects/{id}/reset', '/admin/projects/made/reset')
  await admin('POST', '/admin/projects/{id}/reset', '/admin/projects/acme/reset')
  // Identity links belong to a signed-in user; this gateway has no identity provider configured.
  const identity = await owner.call('GET', '/admin/account/identity')
  check('GET', '/admin/account/identity', identity)
  t.same(identity.json, { linked: false }, 'no identity linked yet')
  t.match((await admin('GET', '/admin/account/identity', '/admin/account/identity')).json, { error: { code: 'account_session_required' } }, 'the admin token has no account')
  const link = await owner.call('POST', '/admin/account/identity/link', {})
  check('POST', '/admin/account/identity/link', link)
  t.match(link.json, { error: { code: 'oidc_not_configured' } }, 'linking needs workstations.oidc')
  check('POST', '/admin/account/identity/link', await owner.call('POST', '/admin/account/identity/link', {}, { csrf: false }))
  const unlink = await owner.call('DELETE', '/admin/account/identity')
  check('DELETE', '/admin/account/identity', unlink)
  t.match(unlink.json, { error: { code: 'identity_not_linked' } })
  const ownerSession = (await owner.call('GET', '/admin/session')).json.session.id
  check('DELETE', '/admin/sessions/{id}', await owner.call('DELETE', `/admin/sessions/${sessions.json.sessions.find((s: any) => s.current).id}`))
  check('DELETE', '/admin/sessions/{id}', await op.call('DELETE', `/admin/sessions/${ownerSession}`))
  check('DELETE', '/admin/session', await op.call('DELETE', '/admin/session', undefined, { csrf: false }))
  check('DELETE', '/admin/session', await op.call('DELETE', '/admin/session'))

  const documented = Object.entries(doc.paths).flatMap(([path, operations]) => Object.keys(operations as object).map((method) => `${method} ${path}`))
  t.same(documented.filter((op) => !seen.has(op)), [], 'every documented operation was called and checked')
  const documentedContent = Object.entries(doc.paths).flatMap(([path, operations]) =>
    Object.entries(operations as Record<string, any>).flatMap(([method, operation]) =>
      [...new Set(Object.values(operation.responses as Record<string, any>).flatMap((response) => Object.keys(response.content ?? {})))].map((type) => `${method} ${path} ${type}`),
    ),
  )
  t.same(documentedContent.filter((entry) => !seenContent.has(entry)), [], 'every documented content type was answered and checked')
  t.same([...documented].sort(), [...SERVED].sort(), 'the document lists exactly the routes the gateway serves')
})

t.test('every admin path named in the code is a documented path', async (t) => {
  // A guard beside SERVED: a route table entry (`path: '/admin/…'`, `adminRoute('GET', '/admin/…')`) added
  // anywhere in core/ or plugins/ names its path as a string literal; it must be in the document.
  const { adminOpenApi } = await import('../../core/admin/admin-openapi.ts')
  const documented = new Set(Object.keys(adminOpenApi().paths))
  const root = join(import.meta.dirname, '..', '..')
  const files = (dir: string): string[] =>
    readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) =>
      entry.isDirectory() ? files(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [],
    )
  const named = new Map<string, string>()
  for (const file of [...files('core'), ...files('plugins')]) {
    // The document itself (core/admin/admin-openapi.ts and its areas in core/admin/admin-openapi/) names every path.
    if (file.endsWith('admin-openapi.ts') || file.includes(join('core', 'admin-openapi') + sep)) continue
    for (const [, literal] of readFileSync(join(root, file), 'utf8').matchAll(/'(\/admin\/[A-Za-z0-9_.:\/-]*[A-Za-z0-9_.-])'/g)) {
      named.set(literal.replace(/:([A-Za-z]+)/g, '{$1}'), file)
    }
  }
  t.ok(named.size >= 20, `the scan finds the route tables (${named.size} paths)`)
  t.same([...named].filter(([path]) => !documented.has(path)).map(([path, file]) => `${path} (${file})`), [], 'no admin path in the code is missing from the document')
})
