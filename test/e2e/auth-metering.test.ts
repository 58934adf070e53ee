/**
 * Projects, API keys and credit metering, end to end: a real gateway process with the five plugins
 * (key-in-path-auth, header-auth, secret-check, rate-limit, credit-meter) in front of a recording
 * upstream. Balances are read through the admin usage endpoint.
 */
import t from 'tap'

const tap = t
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { request } from 'undici'
import { hashCredential } from '../../core/projects/projects.ts'
import { periodKey } from '../../core/store/periods.ts'
import { BIN, startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { closedPort, startTestUpstream, type TestUpstream } from '../helpers/upstream.ts'
import { tempDir } from '../helpers/temp.ts'

const run = promisify(execFile)
const REFUND_HANDLER = fileURLToPath(new URL('../fixtures/partial-refund-handler.ts', import.meta.url))
const BREAKER = fileURLToPath(new URL('../fixtures/response-breaker.ts', import.meta.url))

const fresh = (name: string) => `tk_${name}_${randomBytes(12).toString('hex')}`
const KEY = {
  acme: fresh('acme'),
  acme2: fresh('acme2'),
  disabled: fresh('disabled'),
  expired: fresh('expired'),
  basic: fresh('basic'),
  standardZk: fresh('stdzk'),
  tiny: fresh('tiny'),
  rotated: fresh('rotated'),
}
const SECRET = { acme: fresh('secret'), basic: fresh('basicsecret') }
const ADMIN_TOKEN = fresh('admin')
const ALL_CREDENTIALS = [...Object.values(KEY), ...Object.values(SECRET)]

interface Options {
  acmeKeys: string
  acmeScopes: string
}

function config(up: TestUpstream, downPort: number, options: Options): string {
  return `
version: 1
server: { listen: { port: 0 }, trustProxy: true }
admin: { listen: { port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
watch: false
customPlugins:
  - path: ${REFUND_HANDLER}
  - path: ${BREAKER}
projects:
  - id: acme
    plan: enterprise
    scopes: ${options.acmeScopes}
    credits: { allocation: 1000, period: month }
    secretHash: ${hashCredential(SECRET.acme)}
    keys:
${options.acmeKeys}
      - { label: off, hash: ${hashCredential(KEY.disabled)}, disabled: true }
      - { label: old, hash: ${hashCredential(KEY.expired)}, expiresAt: '2020-01-01T00:00:00Z' }
  - id: basic
    plan: standard
    scopes: [mirror, events]
    credits: { allocation: 1000, period: hour }
    secretHash: ${hashCredential(SECRET.basic)}
    keys: [{ label: main, hash: ${hashCredential(KEY.basic)} }]
  - id: standard-zk
    plan: standard
    scopes: [zkpaas]
    credits: { allocation: 1000 }
    keys: [{ hash: ${hashCredential(KEY.standardZk)} }]
  - id: tiny
    plan: enterprise
    scopes: [zkpaas]
    credits: { allocation: 4, period: month }
    keys: [{ hash: ${hashCredential(KEY.tiny)} }]
upstreams:
  echo: { url: '${up.url}' }
  down: { url: 'http://127.0.0.1:${downPort}' }
  slow: { url: '${up.url}', timeouts: { headersMs: 300 } }
routes:
  - name: zk
    methods: [GET, POST]
    path: /privnet/zkpaas/:apiKey/*rest
    rewrite: /zk/*rest
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: zkpaas, plans: [enterprise] } }
      - { name: credit-meter, config: { apiType: PRIVNET_ZKPAAS, cost: 2 } }
      - { name: response-breaker }
  - name: zk-no5xx
    path: /privnet/zk5/:apiKey/*rest
    rewrite: /zk/*rest
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { scope: zkpaas } }
      - { name: credit-meter, config: { apiType: PRIVNET_ZKPAAS, cost: 2, refundUpstream5xx: false } }
  - name: batch
    methods: [POST]
    path: /privnet/batch/:apiKey
    rewrite: /batch
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { scope: zkpaas } }
      - { name: credit-meter, config: { apiType: PRIVNET_ZKPAAS, cost: 3, perItem: { path: proofs } } }
  - name: x402
    path: /x402/:apiKey/supported
    rewrite: /supported
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { scope: x402 } }
  - name: mirror
    path: /api/v1/*rest
    upstream: echo
    apiType: MIRROR
    plugins:
      - { name: header-auth, config: { scope: mirror } }
      - { name: rate-limit, config: { by: key, capacity: 3, refillPerSecond: 0.001 } }
      - { name: credit-meter, config: { cost: 1 } }
  - name: events
    methods: [POST]
    path: /events/ledger/settings/:apiKey
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { scope: events } }
      - { name: secret-check, config: { header: x-api-secret } }
      - { name: credit-meter, config: { apiType: EVENTS } }
  - name: down
    path: /down/:apiKey
    rewrite: /down
    upstream: down
    plugins:
      - { name: key-in-path-auth, config: { scope: zkpaas } }
      - { name: credit-meter, config: { apiType: PRIVNET_ZKPAAS, cost: 5 } }
  - name: slow
    path: /slow/:apiKey
    rewrite: /slow-headers
    upstream: slow
    plugins:
      - { name: key-in-path-auth, config: { scope: zkpaas } }
      - { name: credit-meter, config: { apiType: PRIVNET_ZKPAAS, cost: 5 } }
  - name: refund
    methods: [POST]
    path: /refund/:apiKey
    handler: { name: partial-refund-handler }
    plugins:
      - { name: key-in-path-auth, config: { scope: zkpaas } }
      - { name: credit-meter, config: { apiType: PRIVNET_ZKPAAS, cost: 10 } }
      - { name: response-breaker }
  - name: by-ip
    path: /ip/:apiKey
    rewrite: /ip
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { scope: rpc } }
      - { name: rate-limit, config: { by: ip, capacity: 2, refillPerSecond: 0.001 } }
`
}

const ACME_KEYS = `      - { label: main, hash: ${hashCredential(KEY.acme)} }
      - { label: second, hash: ${hashCredential(KEY.acme2)} }`
const ACME_SCOPES = '[zkpaas, rpc, events]'

interface Answer {
  status: number
  headers: Record<string, string | string[] | undefined>
  text: string
  json: any
}

async function call(gw: GatewayProcess, path: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Answer> {
  const res = await request(gw.url + path, { method: (init.method ?? 'GET') as 'GET', headers: init.headers, body: init.body })
  const text = await res.body.text()
  let json: any
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  return { status: res.statusCode, headers: res.headers, text, json }
}

async function admin(gw: GatewayProcess, path: string, token = ADMIN_TOKEN): Promise<Answer> {
  const res = await request(gw.adminUrl + path, { headers: token ? { authorization: `Bearer ${token}` } : {} })
  const text = await res.body.text()
  return { status: res.statusCode, headers: res.headers, text, json: text.startsWith('{') ? JSON.parse(text) : undefined }
}

async function used(gw: GatewayProcess, project: string): Promise<number> {
  const answer = await admin(gw, `/admin/projects/${project}/usage?granularity=hour`)
  return answer.json.balance.used
}

function mentionsCredential(text: string): string | undefined {
  return ALL_CREDENTIALS.find((credential) => text.includes(credential))
}

t.test('auth, secrets, metering, refunds, rate limits, usage and metrics', async (t) => {
  const up = await startTestUpstream()
  const downPort = await closedPort()
  const gw = await startGatewayProcess(config(up, downPort, { acmeKeys: ACME_KEYS, acmeScopes: ACME_SCOPES }), { startTimeoutMs: 120_000 })
  t.teardown(async () => {
    await gw.stop()
    await up.close()
  })
  const bodies: string[] = []
  const expectError = async (t: Pick<typeof tap, 'equal'>, answer: Promise<Answer>, status: number, code: string, message?: string) => {
    const got = await answer
    bodies.push(got.text)
    t.equal(got.status, status, `status ${status}`)
    t.equal(got.json?.error?.code, code, `code ${code}`)
    if (message !== undefined) t.equal(got.json?.error?.message, message)
    return got
  }

  await t.test('refusals carry a status and a stable code', async (t) => {
    await expectError(t, call(gw, '/api/v1/accounts'), 401, 'missing_api_key', 'the x-api-key header is required')
    const unknown = await expectError(t, call(gw, `/privnet/zkpaas/${fresh('nobody')}/prove`), 401, 'invalid_api_key')
    const disabled = await expectError(t, call(gw, `/privnet/zkpaas/${KEY.disabled}/prove`), 401, 'invalid_api_key')
    const expired = await expectError(t, call(gw, `/privnet/zkpaas/${KEY.expired}/prove`), 401, 'invalid_api_key')
    t.equal(disabled.text, unknown.text, 'a disabled key is answered exactly like an unknown one')
    t.equal(expired.text, unknown.text, 'an expired key is answered exactly like an unknown one')
    const headerUnknown = await expectError(t, call(gw, '/api/v1/accounts', { headers: { 'x-api-key': fresh('nobody') } }), 401, 'invalid_api_key')
    t.equal(headerUnknown.json.error.message, unknown.json.error.message)

    await expectError(t, call(gw, `/privnet/zkpaas/${KEY.basic}/prove`), 403, 'forbidden', 'the API key must be scoped to a ZK-PaaS project')
    await expectError(t, call(gw, `/privnet/zkpaas/${KEY.standardZk}/prove`), 403, 'forbidden', 'this service is available only on the enterprise plan')
    await expectError(t, call(gw, `/x402/${KEY.acme}/supported`), 403, 'forbidden', 'Unauthorized access to x402 facilitator service')

    const events = (key: string, headers: Record<string, string> = {}) =>
      call(gw, `/events/ledger/settings/${key}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: '{}' })
    await expectError(t, events(KEY.acme), 401, 'missing_api_secret', 'the x-api-secret header is required')
    const wrong = await expectError(t, events(KEY.acme, { 'x-api-secret': fresh('guess') }), 403, 'invalid_api_secret', 'invalid API secret')
    // Another project's real secret is no different from a guess: nothing tells that it exists.
    const foreign = await expectError(t, events(KEY.acme, { 'x-api-secret': SECRET.basic }), 403, 'invalid_api_secret')
    t.equal(foreign.text, wrong.text)
    // A real secret with an unknown key is refused on the key, exactly as without a secret.
    const noKey = await expectError(t, events(fresh('nobody'), { 'x-api-secret': SECRET.acme }), 401, 'invalid_api_key')
    t.equal(noKey.json.error.message, unknown.json.error.message)
    const ok = await events(KEY.acme, { 'x-api-secret': SECRET.acme })
    t.equal(ok.status, 200, 'key and secret of the same project pass')
  })

  await t.test('credits: charge, exhaustion, refunds', async (t) => {
    // tiny has 4 credits and /privnet/zkpaas costs 2: two requests pass, the third gets 402.
    t.equal((await call(gw, `/privnet/zkpaas/${KEY.tiny}/a`)).status, 200)
    t.equal(await used(gw, 'tiny'), 2, 'a 200 is charged its cost')
    t.equal((await call(gw, `/privnet/zkpaas/${KEY.tiny}/b`)).status, 200)
    const refused = await expectError(t, call(gw, `/privnet/zkpaas/${KEY.tiny}/c`), 402, 'credits_exhausted')
    t.match(refused.json.error.message, /project tiny has 0 of 4 credits left in period \d{4}-\d{2}; this request needs 2/)
    t.equal(await used(gw, 'tiny'), 4)

    const start = await used(gw, 'acme')
    const expectUsed = async (delta: number, why: string) => t.equal((await used(gw, 'acme')) - start, delta, why)

    await expectError(t, call(gw, `/down/${KEY.acme}`), 502, 'upstream_unavailable')
    await expectUsed(0, '502 (upstream down) is refunded')
    await expectError(t, call(gw, `/slow/${KEY.acme}?ms=3000`), 504, 'upstream_timeout')
    await expectUsed(0, '504 (upstream too slow) is refunded')
    t.equal((await call(gw, `/privnet/zkpaas/${KEY.acme}/status/503`)).status, 503)
    await expectUsed(0, 'an upstream 503 is refunded')
    t.equal((await call(gw, `/privnet/zk5/${KEY.acme}/status/500`)).status, 500)
    await expectUsed(2, 'an upstream 500 is charged where refundUpstream5xx is false')
    t.equal((await call(gw, `/privnet/zkpaas/${KEY.acme}/status/404`)).status, 404)
    await expectUsed(4, 'an upstream 4xx is charged: the service did its part')
    t.equal((await call(gw, `/privnet/zkpaas/${KEY.acme}/ok`, { method: 'POST', body: 'x' })).status, 200)
    await expectUsed(6, 'a 200 is charged')

    const batch = (proofs: unknown) =>
      call(gw, `/privnet/batch/${KEY.acme}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ proofs }) })
    t.equal((await batch([1, 2, 3, 4])).status, 200)
    await expectUsed(18, 'a batch costs cost × items (3 × 4)')
    t.equal((await call(gw, `/privnet/batch/${KEY.acme}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"proofs":' })).status, 400)
    await expectUsed(18, 'a body the gateway refuses (invalid JSON) is not charged')

    t.equal((await call(gw, `/refund/${KEY.acme}?refund=4`, { method: 'POST' })).status, 200)
    await expectUsed(24, 'a handler gives back part of the cost through credits.refund (10 - 4)')
    t.equal((await call(gw, `/refund/${KEY.acme}?refund=40`, { method: 'POST' })).status, 200)
    await expectUsed(24, 'a refund larger than the cost gives back the whole cost, no more')
    t.equal((await call(gw, `/refund/${KEY.acme}?status=503`, { method: 'POST' })).status, 503)
    await expectUsed(24, "a handler's 5xx is refunded like an upstream's")
    // A plugin after the meter turns a 200 into a 502: the ledger follows the answer the client got.
    await expectError(t, call(gw, `/privnet/zkpaas/${KEY.acme}/ok?break=1`), 502, 'bad_upstream_answer')
    await expectUsed(24, 'an upstream 200 replaced by a 502 before the head is refunded')
    await expectError(t, call(gw, `/refund/${KEY.acme}?break=1`, { method: 'POST' }), 502, 'bad_upstream_answer')
    await expectUsed(24, 'a handler 200 replaced by a 502 after the meter settled is refunded')

    const answer = await admin(gw, '/admin/projects/acme/usage?granularity=hour')
    t.equal(answer.json.balance.period, periodKey('month', Date.now()), 'acme is billed per month: the period key is the UTC month')
    t.equal(answer.json.balance.allocation, 1000)
    t.equal(answer.json.balance.remaining, 1000 - answer.json.balance.used)
  })

  await t.test('rate limits: headers, 429 with Retry-After, per key and per IP', async (t) => {
    const mirror = (key: string) => call(gw, '/api/v1/accounts', { headers: { 'x-api-key': key } })
    const first = await mirror(KEY.basic)
    t.equal(first.status, 200)
    t.equal(first.headers['ratelimit-limit'], '3')
    t.equal(first.headers['ratelimit-remaining'], '2')
    t.match(first.headers['ratelimit-reset'], /^\d+$/)
    t.equal((await mirror(KEY.basic)).status, 200)
    t.equal((await mirror(KEY.basic)).status, 200)
    const limited = await expectError(t, mirror(KEY.basic), 429, 'rate_limited')
    t.match(limited.headers['retry-after'], /^[1-9]\d*$/, 'Retry-After is a positive number of seconds')
    t.equal(limited.headers['ratelimit-remaining'], '0')
    t.equal((await mirror(KEY.acme)).status, 403, 'acme has no mirror scope: refused before the limiter')
    const basic = await admin(gw, '/admin/projects/basic/usage')
    const hours = [periodKey('hour', Date.now() - 60_000), periodKey('hour', Date.now())]
    t.ok(hours.includes(basic.json.balance.period), `basic is billed per hour: period key ${basic.json.balance.period} is the UTC hour`)
    if (basic.json.balance.period === hours[1]) t.equal(basic.json.balance.used, 3, 'the three mirror calls were charged, the 429 was not')

    const viaIp = (ip: string) => call(gw, `/ip/${KEY.acme}`, { headers: { 'x-forwarded-for': ip } })
    t.equal((await viaIp('10.0.0.1')).status, 200)
    t.equal((await viaIp('10.0.0.1')).status, 200)
    t.equal((await viaIp('10.0.0.1')).status, 429)
    t.equal((await viaIp('10.0.0.2')).status, 200, 'another client IP has its own bucket')
  })

  await t.test('usage endpoint: rows per hour and API type, totals, balance, parameter checks', async (t) => {
    const answer = await admin(gw, '/admin/projects/acme/usage?granularity=hour')
    t.equal(answer.status, 200)
    const rows: { bucket: string; apiType: string; requests: number; credits: number; errors: number }[] = answer.json.rows
    const zk = rows.find((row) => row.apiType === 'PRIVNET_ZKPAAS')!
    t.ok(zk, 'a row for PRIVNET_ZKPAAS')
    t.equal(answer.json.totals.credits, answer.json.balance.used, 'usage credits add up to the balance used')
    t.ok(rows.some((row) => row.apiType === 'EVENTS'), 'a row for EVENTS')
    t.equal(zk.errors, 9, 'errors are counted (502, 504, 503, 500, 404, 400, 503, 502, 502)')

    const day = await admin(gw, '/admin/projects/acme/usage?granularity=day')
    t.equal(day.json.totals.credits, answer.json.totals.credits, 'day and hour granularity add up the same')

    const bad = async (query: string, field: string) => {
      const got = await admin(gw, `/admin/projects/acme/usage?${query}`)
      t.equal(got.status, 400, query)
      t.equal(got.json.error.code, 'invalid_query')
      t.match(got.json.error.message, field)
    }
    await bad('granularity=week', 'granularity')
    await bad('from=yesterday', 'from')
    await bad('to=2026-13-45T99:00:00Z', 'to')
    await bad('from=2026-02-01&to=2026-01-01', 'from')
    await bad('granularity=hour&from=2020-01-01&to=2026-01-01', 'from..to')
    const unknown = await admin(gw, '/admin/projects/nope/usage')
    t.equal(unknown.status, 404)
    t.equal(unknown.json.error.code, 'project_not_found')
    t.equal((await admin(gw, '/admin/projects/acme/usage', '')).status, 401, 'the admin token is required')
  })

  await t.test('metrics: credits, auth failures, rate limits; bounded labels only', async (t) => {
    const metrics = (await request(gw.adminUrl + '/metrics').then((res) => res.body.text())) as string
    t.match(metrics, /tollgate_credits_consumed_total\{project="acme",api_type="PRIVNET_ZKPAAS"\} 24\n/)
    t.match(metrics, /tollgate_credits_consumed_total\{project="acme",api_type="EVENTS"\} 1/)
    t.match(metrics, /tollgate_credits_consumed_total\{project="basic",api_type="MIRROR"\} 3/)
    for (const [reason, count] of Object.entries({ missing_key: 1, unknown_key: 3, disabled_key: 1, expired_key: 1, wrong_scope: 3, wrong_plan: 1, missing_secret: 1, wrong_secret: 2 })) {
      t.match(metrics, new RegExp(`tollgate_auth_failures_total\\{reason="${reason}"\\} ${count}\\n`), `${reason} counted ${count}`)
    }
    t.match(metrics, /tollgate_rate_limited_total\{route="mirror"\} 1/)
    t.match(metrics, /tollgate_rate_limited_total\{route="by-ip"\} 1/)
    t.equal(mentionsCredential(metrics), undefined, 'no key or secret in the metrics')
    t.notMatch(metrics, /privnet\/zkpaas\//, 'no raw path in the metrics')
  })

  await t.test('a reload changes keys and scopes but keeps balances', async (t) => {
    const before = await used(gw, 'acme')
    gw.writeConfig(
      config(up, downPort, {
        acmeKeys: `      - { label: rotated, hash: ${hashCredential(KEY.rotated)} }`,
        acmeScopes: '[zkpaas, rpc, events, x402]',
      }),
    )
    const reload = await request(gw.adminUrl + '/admin/reload', { method: 'POST', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    t.equal(reload.statusCode, 200, await reload.body.text())
    await expectError(t, call(gw, `/privnet/zkpaas/${KEY.acme}/a`), 401, 'invalid_api_key')
    t.equal((await call(gw, `/privnet/zkpaas/${KEY.rotated}/a`)).status, 200, 'the new key works at once')
    t.equal((await call(gw, `/x402/${KEY.rotated}/supported`)).status, 200, 'the new scope works at once')
    t.equal(await used(gw, 'acme'), before + 2, 'the balance carried over the reload')
    const usage = await admin(gw, '/admin/projects/acme/usage?granularity=hour')
    t.ok(usage.json.totals.requests > 10, 'usage carried over the reload')
  })

  await t.test('no key or secret reaches the upstream, the logs or an error body', async (t) => {
    t.ok(up.received.length > 10, 'the upstream saw requests')
    for (const received of up.received) {
      const seen = JSON.stringify({ url: received.url, headers: received.headers, body: received.body.toString() })
      t.equal(mentionsCredential(seen), undefined, `upstream request ${received.url} carries no credential`)
      t.notOk(received.headers['x-api-key'] ?? received.headers['x-api-secret'], 'credential headers are dropped')
    }
    t.same(up.received.filter((r) => r.url.startsWith('/zk/')).length > 0, true)
    for (const body of bodies) t.equal(mentionsCredential(body), undefined, 'error body carries no credential')
    const output = gw.output.join('\n')
    t.ok(output.includes('"path":"/privnet/zkpaas/***/'), 'logs show the key param redacted')
    t.equal(mentionsCredential(output), undefined, 'no key or secret in the process output')
  })

  await t.test('`tollgate usage` prints what the admin endpoint returns', async (t) => {
    const answer = await admin(gw, '/admin/projects/acme/usage?granularity=hour')
    const parse = (stdout: string) =>
      stdout.trim().split('\n').slice(1).map((line) => line.trim().split(/\s+/))
        .map(([project, bucket, apiType, requests, credits, errors]) => ({ project, bucket, apiType, requests: +requests, credits: +credits, errors: +errors }))
    const expected = answer.json.rows.map((row: object) => ({ project: 'acme', ...row }))
    // While the gateway runs it holds the database: the CLI asks it through the admin API.
    const live = await run(process.execPath, [BIN, 'usage', '-c', gw.configFile, '--project', 'acme', '--granularity', 'hour', '--admin', gw.adminUrl, '--token', ADMIN_TOKEN])
    t.same(parse(live.stdout), expected, 'the CLI prints the rows of the running gateway')
    t.equal(await gw.stop(), 0)
    const cli = await run(process.execPath, [BIN, 'usage', '-c', gw.configFile, '--project', 'acme', '--granularity', 'hour'])
    const printed = parse(cli.stdout)
    t.ok(printed.length >= 2, 'rows for several API types')
    t.same(printed, expected, 'after a stop the CLI reads the same rows from the store')
  })
})

t.test('key-in-path-auth refuses at load a route that would leak its key param', async (t) => {
  const dir = tempDir('tollgate-kipa-')
  const check = async (route: string) => {
    const file = join(dir, `gateway-${randomBytes(4).toString('hex')}.yaml`)
    writeFileSync(
      file,
      `version: 1
upstreams: { echo: { url: 'http://127.0.0.1:9' } }
routes:
${route}`,
    )
    return run(process.execPath, [BIN, 'check', '-c', file]).then(
      () => ({ code: 0, stderr: '' }),
      (error: { code: number; stderr: string }) => ({ code: error.code, stderr: error.stderr }),
    )
  }
  const leaky = await check(`  - name: leaky
    path: /rpc/:apiKey
    rewrite: /keys/:apiKey
    upstream: echo
    plugins: [{ name: key-in-path-auth, config: { scope: rpc } }]`)
  t.equal(leaky.code, 1)
  t.match(leaky.stderr, /would send the API key \(:apiKey\) upstream/)
  const missing = await check(`  - name: missing
    path: /rpc/:key
    upstream: echo
    plugins: [{ name: key-in-path-auth, config: { param: apiKey, scope: rpc } }]`)
  t.equal(missing.code, 1)
  t.match(missing.stderr, /param "apiKey" is not a param of the route path \/rpc\/:key \(its params: :key\)/)
  const example = await run(process.execPath, [BIN, 'check', '-c', fileURLToPath(new URL('../../examples/config/auth-metering.yaml', import.meta.url))])
  t.match(example.stdout, /ok \(5 routes/, 'examples/config/auth-metering.yaml loads')
})
