/**
 * The credit ledger under load and across a crash, against a real gateway process:
 * - 1,000 concurrent requests on a balance of 100: exactly 100 are served, 900 get 402;
 * - SIGKILL under load, then a restart: the ledger holds every charge a client received a 2xx
 *   for, plus at most the requests that were in flight at the kill (never more).
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { Pool } from 'undici'
import { hashCredential } from '../../core/projects/projects.ts'
import { periodKey } from '../../core/store/periods.ts'
import { openSqliteStore } from '../../core/store/sqlite.ts'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream, type TestUpstream } from '../helpers/upstream.ts'
import { meteredRpcYaml } from '../helpers/metered-rpc-yaml.ts'

const KEY = `tk_load_${randomBytes(12).toString('hex')}`
const ADMIN_TOKEN = `admin_${randomBytes(12).toString('hex')}`
const ALLOCATION = { hundred: 100, big: 1_000_000_000 }

function config(up: TestUpstream, project: keyof typeof ALLOCATION): string {
  return `
version: 1
server: { listen: { port: 0 } }
admin: { listen: { port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
log: { access: false }
watch: false
projects:
  - id: ${project}
    plan: enterprise
    scopes: [rpc]
    credits: { allocation: ${ALLOCATION[project]}, period: month }
    keys: [{ hash: ${hashCredential(KEY)} }]
` + meteredRpcYaml({ upstreamUrl: up.url, cost: 1, routeName: 'metered', connections: 256 })
}

async function balance(gw: GatewayProcess, project: string): Promise<{ period: string; used: number; remaining: number }> {
  const pool = new Pool(gw.adminUrl)
  try {
    const res = await pool.request({ path: `/admin/projects/${project}/usage`, method: 'GET', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    return ((await res.body.json()) as { balance: { period: string; used: number; remaining: number } }).balance
  } finally {
    await pool.close()
  }
}

t.test('1,000 concurrent requests on a balance of 100: exactly 100 served, 900 refused with 402', async (t) => {
  const up = await startTestUpstream()
  const gw = await startGatewayProcess(config(up, 'hundred'))
  const pool = new Pool(gw.url, { connections: 250, pipelining: 1 })
  t.teardown(async () => {
    await pool.destroy()
    await gw.stop()
    await up.close()
  })
  const answers = await Promise.all(
    Array.from({ length: 1000 }, async (_, i) => {
      const res = await pool.request({ path: `/rpc/${KEY}/call-${i}`, method: 'GET' })
      const body = await res.body.text()
      return `${res.statusCode} ${res.statusCode === 402 ? JSON.parse(body).error.code : ''}`.trim()
    }),
  )
  const count = (answer: string) => answers.filter((a) => a === answer).length
  t.equal(count('200'), 100, '100 served')
  t.equal(count('402 credits_exhausted'), 900, '900 refused with 402 credits_exhausted')
  t.equal(up.received.length, 100, 'the upstream saw only the 100 paid requests')
  const after = await balance(gw, 'hundred')
  t.equal(after.used, 100)
  t.equal(after.remaining, 0)
})

t.test('SIGKILL under load, then restart: the ledger equals the 2xx answers, plus at most what was in flight', async (t) => {
  const up = await startTestUpstream()
  const text = config(up, 'big')
  const first = await startGatewayProcess(text)
  const periodsTouched = new Set([periodKey('month', Date.now())])
  const CONNECTIONS = 32
  const TARGET = 600
  const pool = new Pool(first.url, { connections: CONNECTIONS, pipelining: 1 })
  let answered2xx = 0
  let answeredOther = 0
  let noAnswer = 0
  let killed = false
  const worker = async () => {
    while (!killed) {
      try {
        // A short upstream delay keeps requests in flight at every moment, so the kill lands mid-request.
        const res = await pool.request({ path: `/rpc/${KEY}/slow-headers?ms=2`, method: 'GET' })
        // The head is what tells a client it was served; a body cut by the kill does not undo that.
        if (res.statusCode >= 200 && res.statusCode < 300) answered2xx++
        else answeredOther++
        await res.body.text().catch(() => {})
      } catch {
        noAnswer++
      }
      if (answered2xx >= TARGET && !killed) {
        killed = true
        first.child.kill('SIGKILL')
      }
    }
  }
  await Promise.all(Array.from({ length: CONNECTIONS }, worker))
  t.equal(await first.exited, null, 'the gateway died of the signal')
  await pool.destroy()
  periodsTouched.add(periodKey('month', Date.now()))

  t.equal(answeredOther, 0, 'under load, every answer before the kill was a 2xx')
  t.ok(noAnswer <= CONNECTIONS, `at most one request per connection lost its answer (${noAnswer})`)

  const second = await startGatewayProcess(text, { dir: first.dir })
  t.teardown(async () => {
    await second.stop()
    await up.close()
  })
  const ledger = await balance(second, 'big')
  t.comment(second.output.find((line) => line.includes('released credit reservations')) ?? 'no reservation was pending at the kill')
  t.ok(ledger.used >= answered2xx, `every 2xx answer was charged: ledger ${ledger.used} >= ${answered2xx} answers`)
  t.ok(
    ledger.used <= answered2xx + noAnswer,
    `nothing else was: ledger ${ledger.used} <= ${answered2xx} answers + ${noAnswer} requests in flight at the kill`,
  )

  const pool2 = new Pool(second.url)
  const res = await pool2.request({ path: `/rpc/${KEY}/after-restart`, method: 'GET' })
  await res.body.text()
  await pool2.close()
  t.equal(res.statusCode, 200, 'the restarted gateway serves')
  t.equal((await balance(second, 'big')).used, ledger.used + 1, 'and charges on top of the recovered ledger')

  // The same numbers from the database itself, once the gateway has let go of it.
  await second.stop()
  const store = openSqliteStore({ dataDir: `${first.dir}/data` })
  let onDisk = 0
  for (const period of periodsTouched) onDisk += (await store.balance('big', period, ALLOCATION.big)).used
  await store.close()
  t.equal(onDisk, ledger.used + 1, 'the store holds the same ledger')
})
