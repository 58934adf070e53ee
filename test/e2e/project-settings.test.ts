/**
 * Run-time project settings through the admin API of a real gateway process (embedded engine):
 * a feature toggle, a credit allocation, a scope, a key added (generated or by hash), a key
 * disabled and re-enabled, a project created at run time, and a reset back to gateway.yaml are each
 * enforced on the very next request; overrides survive a restart; bad input gets a 4xx naming
 * the field; every change is audited with its actor; no key or hash appears in an answer or log.
 */
import t from 'tap'
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { promisify } from 'node:util'
import { request } from 'undici'
import { hashCredential } from '../../core/projects/projects.ts'
import { BIN, startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream, type TestUpstream } from '../helpers/upstream.ts'
import { tempDir } from '../helpers/temp.ts'

const run = promisify(execFile)
const fresh = (name: string) => `tk_${name}_${randomBytes(12).toString('hex')}`
const KEY = { acme: fresh('acme'), other: fresh('other'), byHash: fresh('byhash') }
const ADMIN_TOKEN = fresh('admin')

function config(up: TestUpstream): string {
  return `
version: 1
server: { listen: { port: 0 } }
admin: { listen: { port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
watch: false
projects:
  - id: acme
    plan: enterprise
    scopes: [zkpaas]
    credits: { allocation: 0, period: month }
    keys:
      - { label: main, hash: ${hashCredential(KEY.acme)} }
  - id: other
    plan: enterprise
    scopes: [zkpaas]
    credits: { allocation: 100 }
    keys: [{ label: main, hash: ${hashCredential(KEY.other)} }]
upstreams:
  echo: { url: '${up.url}' }
routes:
  - name: prove-batch
    methods: [POST]
    path: /zk/:apiKey/prove-batch
    rewrite: /prove-batch
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: zkpaas } }
      - { name: zk-features, config: { requireFeatures: [proveBatch] } }
  - name: metered
    path: /zk/:apiKey/prove
    rewrite: /prove
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: zkpaas } }
      - { name: credit-meter, config: { apiType: PRIVNET_ZKPAAS, cost: 1 } }
  - name: rpc
    path: /rpc/:apiKey
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: rpc } }
`
}

interface Answer {
  status: number
  text: string
  json: any
}

async function send(base: string, method: string, path: string, options: { body?: unknown; headers?: Record<string, string> } = {}): Promise<Answer> {
  const res = await request(base + path, {
    method: method as 'GET',
    headers: { ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}), ...options.headers },
    body: options.body === undefined ? undefined : typeof options.body === 'string' ? options.body : JSON.stringify(options.body),
  })
  const text = await res.body.text()
  let json: any
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  return { status: res.statusCode, text, json }
}

const auth = { authorization: `Bearer ${ADMIN_TOKEN}` }
const adminCall = (gw: GatewayProcess, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
  send(gw.adminUrl, method, path, { body, headers: { ...auth, ...headers } })
const proveBatch = (gw: GatewayProcess, key: string) => send(gw.url, 'POST', `/zk/${key}/prove-batch`, { body: { proofs: [] } })
const prove = (gw: GatewayProcess, key: string) => send(gw.url, 'GET', `/zk/${key}/prove`)

t.test('settings changed through the admin API are enforced on the next request', async (t) => {
  const up = await startTestUpstream()
  const dir = tempDir('tollgate-settings-')
  let gw = await startGatewayProcess(config(up), { dir, startTimeoutMs: 90_000 })
  t.teardown(async () => {
    await gw.stop()
    await up.close()
  })
  const answers: string[] = []
  const record = (answer: Answer) => (answers.push(answer.text), answer)

  await t.test('a feature toggle: /prove-batch 403 → 200 → 403', async (t) => {
    const before = await proveBatch(gw, KEY.acme)
    t.same([before.status, before.json.error.code], [403, 'feature_disabled'])
    const patched = record(await adminCall(gw, 'PATCH', '/admin/projects/acme', { features: { proveBatch: true } }, { 'x-admin-actor': 'alice@ops' }))
    t.equal(patched.status, 200)
    t.equal(patched.json.project.features.proveBatch, true)
    t.same(patched.json.project.overridden, ['features'])
    t.equal(patched.json.project.updatedBy, 'admin-token', 'the actor is the token; x-admin-actor is only a note')
    t.equal((await proveBatch(gw, KEY.acme)).status, 200, 'the very next request sees the feature on')
    t.equal((await proveBatch(gw, KEY.other)).status, 403, 'only that project changed')
    await adminCall(gw, 'PATCH', '/admin/projects/acme', { features: { proveBatch: false } })
    t.equal((await proveBatch(gw, KEY.acme)).status, 403)
  })

  await t.test('credits and scopes', async (t) => {
    const broke = await prove(gw, KEY.acme)
    t.same([broke.status, broke.json.error.code], [402, 'credits_exhausted'], 'allocation 0 in the yaml')
    record(await adminCall(gw, 'PATCH', '/admin/projects/acme', { credits: { allocation: 2 } }))
    t.equal((await prove(gw, KEY.acme)).status, 200)
    t.equal((await prove(gw, KEY.acme)).status, 200)
    t.equal((await prove(gw, KEY.acme)).status, 402, 'the new allocation is exact')
    t.equal((await send(gw.url, 'GET', `/rpc/${KEY.acme}`)).status, 403, 'no rpc scope yet')
    const scoped = record(await adminCall(gw, 'PATCH', '/admin/projects/acme', { scopes: ['zkpaas', 'rpc'], plan: 'growth' }))
    t.same(scoped.json.project.scopes, ['zkpaas', 'rpc'])
    t.equal(scoped.json.project.plan, 'growth')
    t.equal((await send(gw.url, 'GET', `/rpc/${KEY.acme}`)).status, 200)
  })

  await t.test('keys: generated, by hash, disabled, enabled', async (t) => {
    const generated = record(await adminCall(gw, 'POST', '/admin/projects/acme/keys', { label: 'ci' }))
    t.equal(generated.status, 201)
    t.match(generated.json.key, /^tg_[A-Za-z0-9_-]{43}$/, 'the generated key is shown once')
    t.equal((await prove(gw, generated.json.key)).status, 402, 'the new key authenticates (and meets the spent balance)')
    t.equal((await proveBatch(gw, generated.json.key)).status, 403, 'it is acme: feature off')
    const listed = await adminCall(gw, 'GET', '/admin/projects/acme')
    t.notOk(listed.text.includes(generated.json.key), 'a later read never shows the key')
    t.same(
      listed.json.project.keys.map((k: any) => [k.label, k.source, k.disabled]),
      [['main', 'config', false], ['ci', 'runtime', false]],
    )

    const byHash = record(await adminCall(gw, 'POST', '/admin/projects/other/keys', { label: 'partner', hash: hashCredential(KEY.byHash), expiresAt: '2099-01-01T00:00:00Z' }))
    t.equal(byHash.status, 201)
    t.equal(byHash.json.key, undefined, 'nothing to show for a key given by hash')
    t.equal((await prove(gw, KEY.byHash)).status, 200)

    const disabled = record(await adminCall(gw, 'POST', '/admin/projects/other/keys/partner/disable'))
    t.equal(disabled.status, 200)
    const refused = await prove(gw, KEY.byHash)
    t.same([refused.status, refused.json.error.code], [401, 'invalid_api_key'], 'a disabled key gets 401 on the next request')
    const seedOff = record(await adminCall(gw, 'POST', '/admin/projects/other/keys/main/disable'))
    t.equal(seedOff.status, 200)
    t.equal((await prove(gw, KEY.other)).status, 401, 'a key from gateway.yaml can be disabled at run time')
    record(await adminCall(gw, 'POST', '/admin/projects/other/keys/partner/enable'))
    t.equal((await prove(gw, KEY.byHash)).status, 200, 'and enabled again')

    const expired = record(await adminCall(gw, 'POST', '/admin/projects/other/keys', { label: 'old', hash: hashCredential(fresh('x')), expiresAt: '2020-01-01T00:00:00Z' }))
    t.equal(expired.status, 201)
  })

  await t.test('a project created at run time', async (t) => {
    const created = record(await adminCall(gw, 'POST', '/admin/projects', { id: 'newco', scopes: ['zkpaas'], features: { proveBatch: true }, credits: { allocation: 5 } }))
    t.equal(created.status, 201)
    t.equal(created.json.project.source, 'runtime')
    const key = record(await adminCall(gw, 'POST', '/admin/projects/newco/keys', { label: 'main' }))
    t.equal((await proveBatch(gw, key.json.key)).status, 200)
    t.equal((await prove(gw, key.json.key)).status, 200)
    const usage = await run(process.execPath, [BIN, 'usage', '-c', gw.configFile, '--admin', gw.adminUrl, '--token', ADMIN_TOKEN, '--project', 'newco', '--granularity', 'hour'])
    t.match(usage.stdout, /newco\s+\S+\s+PRIVNET_ZKPAAS\s+1\s+1\s+0/, 'tollgate usage knows a project created at run time')
    const again = await adminCall(gw, 'POST', '/admin/projects', { id: 'acme' })
    t.same([again.status, again.json.error.code], [409, 'project_exists'])
  })

  await t.test('bad input: 4xx naming the field; unknown project 404; no token 401', async (t) => {
    const cases: [string, string, unknown, number, string, RegExp][] = [
      ['PATCH', '/admin/projects/acme', { features: { proveBatch: 'yes' } }, 400, 'invalid_body', /features\.proveBatch/],
      ['PATCH', '/admin/projects/acme', { features: { warp: true } }, 400, 'invalid_body', /features\.warp/],
      ['PATCH', '/admin/projects/acme', { credits: { allocation: -1 } }, 400, 'invalid_body', /credits\.allocation/],
      ['PATCH', '/admin/projects/acme', { credits: { period: 'week' } }, 400, 'invalid_body', /credits\.period/],
      ['PATCH', '/admin/projects/acme', { scopes: ['zkpaas', 'warp'] }, 400, 'invalid_body', /scopes/],
      ['PATCH', '/admin/projects/acme', { secretHash: 'plain' }, 400, 'invalid_body', /secretHash/],
      ['PATCH', '/admin/projects/acme', { colour: 'red' }, 400, 'invalid_body', /unknown field colour/],
      ['PATCH', '/admin/projects/acme', {}, 400, 'invalid_body', /changes nothing/],
      ['PATCH', '/admin/projects/acme', '{"plan":', 400, 'invalid_json', /JSON/],
      ['PATCH', '/admin/projects/acme', [1], 400, 'invalid_body', /body must be a JSON object/],
      ['POST', '/admin/projects', { id: 'bad id!' }, 400, 'invalid_body', /^id /],
      ['POST', '/admin/projects/acme/keys', { label: 'x', hash: 'sha256:12' }, 400, 'invalid_body', /^hash /],
      ['POST', '/admin/projects/acme/keys', { label: 'x', expiresAt: 'tomorrow' }, 400, 'invalid_body', /expiresAt/],
      ['POST', '/admin/projects/acme/keys', {}, 400, 'invalid_body', /^label /],
      ['POST', '/admin/projects/acme/keys', { label: 'main' }, 409, 'key_exists', /labelled main/],
      ['POST', '/admin/projects/acme/keys', { label: 'dup', hash: hashCredential(KEY.other) }, 409, 'key_exists', /already registered/],
      ['PATCH', '/admin/projects/nope', { plan: 'x' }, 404, 'project_not_found', /nope/],
      ['POST', '/admin/projects/nope/keys', { label: 'x' }, 404, 'project_not_found', /nope/],
      ['POST', '/admin/projects/acme/keys/ghost/disable', undefined, 404, 'key_not_found', /ghost/],
      ['GET', '/admin/projects/nope', undefined, 404, 'project_not_found', /nope/],
    ]
    for (const [method, path, body, status, code, message] of cases) {
      const answer = record(await adminCall(gw, method, path, body))
      t.equal(answer.status, status, `${method} ${path} ${JSON.stringify(body)} → ${status}`)
      t.equal(answer.json?.error?.code, code)
      t.match(answer.json?.error?.message, message)
    }
    const noToken = await send(gw.adminUrl, 'PATCH', '/admin/projects/acme', { body: { plan: 'x' } })
    t.same([noToken.status, noToken.json.error.code], [401, 'admin_unauthorized'])
    const badActor = await adminCall(gw, 'PATCH', '/admin/projects/acme', { plan: 'x' }, { 'x-admin-actor': ' ' })
    t.same([badActor.status, badActor.json.error.code], [400, 'invalid_header'])
    t.equal((await adminCall(gw, 'GET', '/admin/projects/acme')).json.project.plan, 'growth', 'no refused change was applied')
  })

  await t.test('overrides survive a restart; a reset brings the yaml back', async (t) => {
    await gw.stop()
    gw = await startGatewayProcess(config(up), { dir, startTimeoutMs: 90_000 })
    t.equal((await send(gw.url, 'GET', `/rpc/${KEY.acme}`)).status, 200, 'scope override still in force')
    t.equal((await prove(gw, KEY.other)).status, 401, 'seed key still disabled')
    t.equal((await prove(gw, KEY.byHash)).status, 200, 'run-time key still there')
    const reset = record(await adminCall(gw, 'POST', '/admin/projects/other/reset'))
    t.equal(reset.status, 200)
    t.same(reset.json.project.overridden, [])
    t.equal((await prove(gw, KEY.other)).status, 200, 'the yaml key is enabled again')
    t.equal((await prove(gw, KEY.byHash)).status, 401, 'the run-time key is gone')
    const removed = record(await adminCall(gw, 'POST', '/admin/projects/newco/reset'))
    t.same(removed.json, { removed: 'newco' })
    t.equal((await adminCall(gw, 'GET', '/admin/projects/newco')).status, 404)
  })

  await t.test('audit trail with actors; no credential anywhere', async (t) => {
    const audit = await adminCall(gw, 'GET', '/admin/projects/acme/audit')
    t.equal(audit.status, 200)
    const actions = audit.json.changes.map((c: any) => `${c.action}:${c.actor}`)
    t.ok(actions.includes('project.update:admin-token'), 'the actor is recorded')
    t.ok(audit.json.changes.some((c: any) => c.actor === 'admin-token' && c.actorNote === 'alice@ops'), 'x-admin-actor is kept as the note')
    t.ok(actions.includes('key.add:admin-token'))
    t.ok(audit.json.changes.every((c: any, i: number, all: any[]) => i === 0 || all[i - 1].seq > c.seq), 'newest first')
    const all = await adminCall(gw, 'GET', '/admin/settings/audit?limit=500')
    answers.push(audit.text, all.text, gw.output.join('\n'))
    const everything = answers.join('\n')
    for (const secret of [KEY.acme, KEY.other, KEY.byHash, ADMIN_TOKEN]) t.notOk(everything.includes(secret), 'no key in any answer or log')
    t.notOk(everything.includes(hashCredential(KEY.byHash).slice(7)), 'no key hash either')
  })
})
