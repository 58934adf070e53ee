/**
 * Low-balance alerts against a real gateway process and a real local webhook receiver:
 * - each threshold (percent and absolute) fires once per period, signed with HMAC-SHA256 over
 *   "<timestamp>.<body>" (checked here with node:crypto directly, and with verifyWebhook);
 * - a receiver that fails twice then succeeds gets three attempts, spaced by the backoff, all recorded;
 * - a receiver that always fails ends `failed` after maxAttempts, with every attempt listed;
 * - once per period holds across a restart (the record is in the store);
 * - the per-route usage export (by=route, CSV and NDJSON) counts the same traffic.
 */
import t from 'tap'
import { createHmac, randomBytes } from 'node:crypto'
import { request } from 'undici'
import { hashCredential } from '../../core/projects/projects.ts'
import { verifyWebhook } from '../../core/alerts/signature.ts'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream, type TestUpstream } from '../helpers/upstream.ts'
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.ts'
import { tempDir } from '../helpers/temp.ts'
import { meteredRpcYaml } from '../helpers/metered-rpc-yaml.ts'

const KEY = `tk_alert_${randomBytes(12).toString('hex')}`
const KEY_B = `tk_alertb_${randomBytes(12).toString('hex')}`
const ADMIN_TOKEN = `admin_${randomBytes(12).toString('hex')}`
const SECRET = `whsec_${randomBytes(16).toString('hex')}`

function config(up: TestUpstream, hook: WebhookReceiver, failing: WebhookReceiver): string {
  return `
version: 1
server: { listen: { port: 0 } }
admin: { listen: { port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
log: { access: false }
watch: false
alerts: { checkIntervalMs: 100 }
projects:
  - id: acme
    plan: enterprise
    scopes: [rpc]
    credits: { allocation: 10, period: month }
    keys: [{ hash: ${hashCredential(KEY)} }]
    alerts:
      url: '${hook.url}'
      secret: '\${ALERT_SECRET}'
      thresholds: [{ percent: 50 }, { remaining: 2 }]
      retryBaseMs: 300
      maxAttempts: 5
  - id: beta
    plan: enterprise
    scopes: [rpc]
    credits: { allocation: 4, period: month }
    keys: [{ hash: ${hashCredential(KEY_B)} }]
    alerts:
      url: '${failing.url}'
      secret: '\${ALERT_SECRET}'
      thresholds: [{ remaining: 3 }]
      retryBaseMs: 100
      maxAttempts: 3
` + meteredRpcYaml({ upstreamUrl: up.url, cost: 1 })
}

async function calls(gw: GatewayProcess, key: string, n: number, path = 'ok'): Promise<number[]> {
  const statuses: number[] = []
  for (let i = 0; i < n; i++) {
    const res = await request(`${gw.url}/rpc/${key}/${path}`)
    await res.body.text()
    statuses.push(res.statusCode)
  }
  return statuses
}

async function admin(gw: GatewayProcess, path: string): Promise<{ status: number; headers: Record<string, unknown>; text: string }> {
  const res = await request(`${gw.adminUrl}${path}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() }
}

async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

interface Alert {
  id: string
  state: string
  threshold: Record<string, number>
  level: number
  balance: { remaining: number }
  attempts: { n: number; status?: number; error?: string; at: string }[]
}

t.test('low-balance alerts: signed, retried with backoff, once per period, listed', async (t) => {
  t.setTimeout(240_000)
  const up = await startTestUpstream()
  // 500, 500, then 200: the first alert needs three attempts.
  const hook = await startWebhookReceiver([500, 500])
  const failing = await startWebhookReceiver(Array(20).fill(503))
  const dir = tempDir('tollgate-alerts-')
  const env = { ALERT_SECRET: SECRET }
  let gw = await startGatewayProcess(config(up, hook, failing), { dir, env, startTimeoutMs: 90_000 })
  t.teardown(async () => {
    await gw.stop()
    await Promise.all([up.close(), hook.close(), failing.close()])
  })

  t.same(await calls(gw, KEY, 4), [200, 200, 200, 200])
  await new Promise((r) => setTimeout(r, 600))
  t.equal(hook.received.length, 0, 'nothing fires while 6 of 10 credits are left')

  t.same(await calls(gw, KEY, 1), [200], 'the 5th credit: 5 left, the 50% threshold')
  await until('three attempts of the 50% alert', () => (hook.received.length >= 3 ? true : undefined))
  const [first, second, third] = hook.received
  t.same([first.status, second.status, third.status], [500, 500, 200], 'failed twice, then delivered')
  t.ok(second.at - first.at >= 250, `the first retry waited the base backoff (${second.at - first.at} ms)`)
  t.ok(third.at - second.at >= 550, `the second retry waited twice as long (${third.at - second.at} ms)`)
  for (const hit of [first, second, third]) {
    const timestamp = String(hit.headers['x-tollgate-timestamp'])
    const expected = 'v1=' + createHmac('sha256', SECRET).update(`${timestamp}.${hit.body}`).digest('hex')
    t.equal(hit.headers['x-tollgate-signature'], expected, 'HMAC-SHA256 of "<timestamp>.<body>" with the secret')
    t.ok(verifyWebhook(SECRET, { timestamp, signature: String(hit.headers['x-tollgate-signature']) }, hit.body), 'verifyWebhook accepts it')
    t.notOk(verifyWebhook('another-secret-000', { timestamp, signature: String(hit.headers['x-tollgate-signature']) }, hit.body), 'another secret does not verify')
    t.notOk(verifyWebhook(SECRET, { timestamp, signature: String(hit.headers['x-tollgate-signature']) }, hit.body.replace('"acme"', '"acmf"')), 'a changed body does not verify')
  }
  const body = JSON.parse(third.body)
  t.match(body, { type: 'credits.low_balance', project: 'acme', threshold: { percent: 50 }, level: 5, balance: { allocation: 10, used: 5, remaining: 5 } })
  t.equal(first.body, third.body, 'every attempt sends the same alert')
  t.notMatch(third.body, SECRET, 'the secret is never in the body')

  // More traffic above the next threshold: the 50% alert does not fire again.
  t.same(await calls(gw, KEY, 2), [200, 200])
  await new Promise((r) => setTimeout(r, 800))
  t.equal(hook.received.length, 3, 'still 3 deliveries: the 50% alert fired once')

  t.same(await calls(gw, KEY, 1), [200], '2 left: the absolute threshold')
  await until('the remaining:2 alert', () => (hook.received.length >= 4 ? true : undefined))
  t.match(JSON.parse(hook.received[3].body), { threshold: { remaining: 2 }, balance: { remaining: 2 } })
  t.same(await calls(gw, KEY, 3), [200, 200, 402], 'the balance runs out')
  await new Promise((r) => setTimeout(r, 800))
  t.equal(hook.received.length, 4, 'no alert twice in one period')

  // The failing receiver: three attempts, then `failed`.
  t.same(await calls(gw, KEY_B, 1), [200], 'beta: 3 of 4 left')
  await until('three failed attempts', () => (failing.received.length >= 3 ? true : undefined))
  const listed = await until('beta alert failed', async () => {
    const { text } = await admin(gw, '/admin/projects/beta/alerts')
    const alerts = JSON.parse(text).alerts as Alert[]
    return alerts[0]?.state === 'failed' ? alerts : undefined
  })
  t.equal(listed.length, 1)
  t.same(listed[0].attempts.map((a) => [a.n, a.status, a.error]), [[1, 503, 'receiver answered 503'], [2, 503, 'receiver answered 503'], [3, 503, 'receiver answered 503']])
  await new Promise((r) => setTimeout(r, 500))
  t.equal(failing.received.length, 3, 'no attempt past maxAttempts')

  const acme = JSON.parse((await admin(gw, '/admin/projects/acme/alerts')).text).alerts as Alert[]
  t.same(acme.map((a) => [a.threshold, a.state, a.attempts.length]), [[{ remaining: 2 }, 'delivered', 1], [{ percent: 50 }, 'delivered', 3]], 'newest first, each with its attempts')
  t.same(acme[1].attempts.map((a) => a.status), [500, 500, 200])
  const everything = await admin(gw, '/admin/alerts')
  t.equal(everything.status, 200)
  t.equal(JSON.parse(everything.text).alerts.length, 3, 'the operator list has every project')
  t.notMatch(everything.text, SECRET, 'the secret is never listed')
  t.equal((await admin(gw, '/admin/projects/nope/alerts')).status, 404)
  t.match(JSON.parse((await admin(gw, '/admin/alerts?limit=0')).text), { error: { code: 'invalid_query', message: /limit/ } })

  // A restart reads the records: nothing fires again in this period.
  await gw.stop()
  gw = await startGatewayProcess(config(up, hook, failing), { dir, env, startTimeoutMs: 90_000 })
  await new Promise((r) => setTimeout(r, 1000))
  t.equal(hook.received.length, 4, 'no alert again after a restart')
  t.equal(failing.received.length, 3)

  // The per-route usage of the same traffic, exported.
  t.same(await calls(gw, KEY_B, 1, 'status/404'), [404])
  const csv = await admin(gw, '/admin/projects/acme/usage?granularity=hour&by=route&format=csv')
  t.equal(csv.status, 200)
  t.match(csv.headers['content-type'], /^text\/csv/)
  const lines = csv.text.trim().split('\r\n')
  t.equal(lines[0], 'bucket,apiType,route,statusClass,requests,credits,errors,latencyMsSum,latencyMsMax')
  const cells = lines.slice(1).map((line) => line.split(','))
  t.same(cells.map((c) => [c[1], c[2], c[3], c[4], c[5], c[6]]), [
    ['PRIVNET_RPC', 'rpc', '2xx', '10', '10', '0'],
    ['PRIVNET_RPC', 'rpc', '4xx', '1', '0', '1'],
  ], '10 served and charged, one 402')
  const ndjson = await admin(gw, '/admin/projects/beta/usage?granularity=day&by=route&format=ndjson')
  t.match(ndjson.headers['content-type'], /^application\/x-ndjson/)
  const rows = ndjson.text.trim().split('\n').map((line) => JSON.parse(line))
  t.match(rows, [{ route: 'rpc', statusClass: '2xx', requests: 1, credits: 1 }, { route: 'rpc', statusClass: '4xx', requests: 1, errors: 1 }])
  t.ok(rows.every((row: { latencyMsMax: number }) => row.latencyMsMax > 0), 'latency is recorded')
  t.match(JSON.parse((await admin(gw, '/admin/projects/acme/usage?format=xml')).text), { error: { code: 'invalid_query', message: /format/ } })
  t.match(JSON.parse((await admin(gw, '/admin/projects/acme/usage?by=colour')).text), { error: { code: 'invalid_query', message: /by/ } })
})

t.test('a project on a refill schedule is checked in its schedule period', async (t) => {
  t.setTimeout(240_000)
  const up = await startTestUpstream()
  const hook = await startWebhookReceiver([])
  // Refilled monthly on a day that is not the 1st: its periods are keyed `YYYY-MM-DD/P1M`, not the
  // calendar month, and the charges are booked there.
  const refillDay = ((new Date().getUTCDate() + 14) % 27) + 2
  const text = `
version: 1
server: { listen: { port: 0 } }
admin: { listen: { port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
log: { access: false }
watch: false
alerts: { checkIntervalMs: 100 }
projects:
  - id: refilled
    scopes: [rpc]
    credits: { allocation: 2, refill: { interval: month, day: ${refillDay} } }
    keys: [{ hash: ${hashCredential(KEY)} }]
    alerts: { url: '${hook.url}', secret: '\${ALERT_SECRET}', thresholds: [{ percent: 50 }] }
` + meteredRpcYaml({ upstreamUrl: up.url, cost: 1 })
  const dir = tempDir('tollgate-alerts-refill-')
  const gw = await startGatewayProcess(text.replaceAll('{{DIR}}', dir), { dir, env: { ALERT_SECRET: SECRET }, startTimeoutMs: 90_000 })
  t.teardown(async () => {
    await gw.stop()
    await Promise.all([up.close(), hook.close()])
  })
  const credits = JSON.parse((await admin(gw, '/admin/projects/refilled/credits')).text)
  t.match(credits.period, /\/P1M$/, `the schedule period (${credits.period}) is not the calendar month`)
  t.same(await calls(gw, KEY, 1), [200], '1 of 2 credits spent: the 50% threshold')
  await until('the 50% alert of the schedule period', () => (hook.received.length >= 1 ? true : undefined))
  const body = JSON.parse(hook.received[0]!.body)
  t.match(body, { project: 'refilled', threshold: { percent: 50 }, balance: { allocation: 2, used: 1, remaining: 1 } }, 'fired on the balance of the schedule period')
  t.equal(body.period, credits.period, 'and names that period')
})
