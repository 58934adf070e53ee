/**
 * Low-balance thresholds edited at run time (PUT /admin/projects/:id/alerts/thresholds) against a
 * real gateway process and a real webhook receiver: every bad body is a 400 naming the field, an
 * owner is refused (operators only), a project with no webhook in gateway.yaml answers 409, a change
 * is audited with its actor, and the thresholds set here, not gateway.yaml's, decide which alert
 * fires; null puts gateway.yaml's back.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { request } from 'undici'
import { hashCredential } from '../../core/projects/projects.ts'
import { startGatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream } from '../helpers/upstream.ts'
import { startWebhookReceiver } from '../helpers/webhook-receiver.ts'
import { tempDir } from '../helpers/temp.ts'
import { meteredRpcYaml } from '../helpers/metered-rpc-yaml.ts'
import { send, signIn, userCli } from '../helpers/admin-client.ts'

const KEY = `tk_thr_${randomBytes(12).toString('hex')}`
const ADMIN_TOKEN = `admin_${randomBytes(12).toString('hex')}`
const SECRET = `whsec_${randomBytes(16).toString('hex')}`
const OWNER = { email: 'owner@example.com', password: 'owner-pw-' + randomBytes(6).toString('hex') }
const bearer = { authorization: `Bearer ${ADMIN_TOKEN}` }
const PATH = '/admin/projects/acme/alerts/thresholds'

t.test('alert thresholds: validated, operators only, audited, and in force at once', async (t) => {
  t.setTimeout(180_000)
  const up = await startTestUpstream()
  const hook = await startWebhookReceiver([])
  const dir = tempDir('tollgate-thresholds-')
  const text = `
version: 1
server: { listen: { port: 0 } }
admin: { listen: { port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '${dir}/data' }
log: { access: false }
watch: false
alerts: { checkIntervalMs: 100 }
projects:
  - id: acme
    plan: enterprise
    scopes: [rpc]
    credits: { allocation: 10, period: month }
    keys: [{ hash: ${hashCredential(KEY)} }]
    alerts: { url: '${hook.url}', secret: '${SECRET}', thresholds: [{ remaining: 1 }] }
  - { id: plain, plan: enterprise, scopes: [rpc], keys: [] }
` + meteredRpcYaml({ upstreamUrl: up.url, cost: 1 })
  const configFile = join(dir, 'gateway.yaml')
  writeFileSync(configFile, text)
  t.equal((await userCli(configFile, ['add', '--email', OWNER.email, '--role', 'owner', '--project', 'acme'], OWNER.password + '\n')).code, 0)
  const gw = await startGatewayProcess(text, { dir, startTimeoutMs: 90_000 })
  t.teardown(async () => {
    await gw.stop()
    await Promise.all([up.close(), hook.close()])
  })
  const put = (body: unknown, path = PATH) => send(gw.adminUrl, 'PUT', path, { body, headers: bearer })

  const before = await send(gw.adminUrl, 'GET', PATH, { headers: bearer })
  t.same(before.json, { project: 'acme', configured: true, url: hook.url, source: 'config', thresholds: [{ remaining: 1 }], configThresholds: [{ remaining: 1 }] })
  t.notOk(before.text.includes(SECRET), 'the webhook secret is never shown')

  const refusals: [unknown, RegExp][] = [
    [{}, /^thresholds must be an array/],
    [{ thresholds: [] }, /^thresholds must be an array of 1 to 10/],
    [{ thresholds: Array.from({ length: 11 }, (_, i) => ({ remaining: i })) }, /^thresholds must be an array of 1 to 10/],
    [{ thresholds: [{ percent: 0 }] }, /^thresholds\[0\]\.percent must be a number more than 0 and at most 100/],
    [{ thresholds: [{ percent: 20 }, { percent: 101 }] }, /^thresholds\[1\]\.percent/],
    [{ thresholds: [{ remaining: 1.5 }] }, /^thresholds\[0\]\.remaining must be an integer from 0/],
    [{ thresholds: [{ remaining: -1 }] }, /^thresholds\[0\]\.remaining/],
    [{ thresholds: [{ percent: 5, remaining: 1 }] }, /^thresholds\[0\] must have exactly one of percent or remaining/],
    [{ thresholds: [{ level: 5 }] }, /^thresholds\[0\] must have exactly one/],
    [{ thresholds: ['5%'] }, /^thresholds\[0\] must be an object/],
    [{ thresholds: [{ percent: 5 }, { percent: 5 }] }, /^thresholds\[1\] repeats percent 5/],
    [{ thresholds: [{ percent: 5 }], url: 'http://elsewhere' }, /^unknown field url/],
    [[{ percent: 5 }], /^body must be a JSON object/],
  ]
  for (const [body, message] of refusals) {
    const answer = await put(body)
    t.equal(answer.status, 400, `${JSON.stringify(body).slice(0, 60)} → 400`)
    t.equal(answer.json?.error?.code, 'invalid_body')
    t.match(answer.json?.error?.message, message)
  }
  t.equal((await put('{"thresholds":')).status, 400, 'malformed JSON → 400')
  t.equal((await put({ thresholds: [{ percent: 5 }] }, '/admin/projects/plain/alerts/thresholds')).json.error.code, 'alerts_not_configured', 'no webhook in gateway.yaml → 409')
  t.equal((await put({ thresholds: [{ percent: 5 }] }, '/admin/projects/missing/alerts/thresholds')).status, 404)

  const owner = await signIn(gw.adminUrl, OWNER.email, OWNER.password)
  const byOwner = await owner.call('PUT', PATH, { thresholds: [{ percent: 5 }] })
  t.equal(byOwner.status, 403)
  t.equal(byOwner.json.error.code, 'operator_only', 'an owner may not change thresholds')
  t.equal((await owner.call('GET', PATH)).json.source, 'config', 'an owner may read them')
  t.equal((await owner.call('GET', '/admin/projects/plain/alerts/thresholds')).status, 404, "another project's answers as a missing one")
  t.equal((await send(gw.adminUrl, 'GET', PATH, { headers: bearer })).json.source, 'config', 'no refused request changed anything')

  const set = await put({ thresholds: [{ percent: 50 }, { remaining: 3 }] })
  t.equal(set.status, 200)
  t.same(set.json, { project: 'acme', configured: true, url: hook.url, source: 'runtime', thresholds: [{ percent: 50 }, { remaining: 3 }], configThresholds: [{ remaining: 1 }] })
  const audit = await send(gw.adminUrl, 'GET', '/admin/projects/acme/audit?limit=1', { headers: { ...bearer, 'x-admin-actor': 'ticket-7' } })
  t.match(audit.json.changes[0], { action: 'project.update', actor: 'admin-token', projectId: 'acme', detail: { alertThresholds: [{ percent: 50 }, { remaining: 3 }] } }, 'the change is audited')

  // 5 of 10 credits spent: the run-time 50% threshold fires; gateway.yaml's (1 left) does not.
  for (let i = 0; i < 5; i++) t.equal((await request(`${gw.url}/rpc/${KEY}/ok`)).statusCode, 200)
  for (const deadline = Date.now() + 15_000; hook.received.length < 1 && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 50))
  await new Promise((r) => setTimeout(r, 500))
  t.same(hook.received.map((hit) => JSON.parse(hit.body).threshold), [{ percent: 50 }], 'the run-time threshold fired, once')

  const reset = await put({ thresholds: null })
  t.equal(reset.status, 200)
  t.same([reset.json.source, reset.json.thresholds], ['config', [{ remaining: 1 }]], "null puts gateway.yaml's thresholds back")
})
