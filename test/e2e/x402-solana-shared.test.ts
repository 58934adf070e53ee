/**
 * The Solana facilitator on the shared store engine: two gateway processes (examples/config/x402.yaml
 * with `store.engine: shared` on one real PostgreSQL + Redis) settle payments the official
 * @x402/svm client made on one local SVM. The settlement record (keyed on the message hash) is
 * shared, so one payment sends one transaction whichever instances it reaches, and a repeat on
 * the other instance returns the original result. Also: the x402 route's rate-limit bucket,
 * shared across the instances, answers 429 on a Solana path once exhausted.
 */
import t, { type Test } from 'tap'
import { randomBytes } from 'node:crypto'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { freshPrefix, freshSchema, needServers, PG_URL, REDIS_URL } from '../helpers/shared-servers.ts'
import { dumpOnFailure } from '../helpers/shared-gateway.ts'
import { call, x402Config, type Answer } from '../helpers/x402.ts'
import { officialBody, price, startSvmFixture } from '../plugins/x402-facilitator/svm-helpers.ts'

// Two gateway processes start slowly on a busy 2-core machine: more than the runner's default.
t.setTimeout(360_000)
const START = { startTimeoutMs: 90_000 }
/**
 * The x402 route's bucket (per project, refill ~0): small enough for the `limited` project to
 * exhaust quickly, large enough for the ~25 calls of the `payments` project in the settle tests.
 */
const BUCKET = 40

const fresh = (name: string) => `xk_${name}_${randomBytes(10).toString('hex')}`
const KEY = { x402: fresh('x402'), limited: fresh('limited') }

t.test('Solana settle through two gateways on the shared store', async (t) => {
  if (!(await needServers(t))) return
  const f = await startSvmFixture()
  t.teardown(() => f.close())
  const schema = freshSchema(t)
  const prefix = freshPrefix(t)
  const projects = [
    { id: 'payments', key: KEY.x402, scopes: ['x402'], allocation: 100000 },
    { id: 'limited', key: KEY.limited, scopes: ['x402'], allocation: 100000 },
  ]
  const text = x402Config(projects, (yaml) => yaml
    .replace(/^store:\n {2}dataDir: .*\n/m,
      `store: { engine: shared, postgres: '${PG_URL}', redis: '${REDIS_URL}', schema: ${schema}, keyPrefix: '${prefix}', instanceTimeoutMs: 5000 }\n`)
    .replace(/capacity: \d+, refillPerSecond: \d+, bucket: x402 }/, `capacity: ${BUCKET}, refillPerSecond: 0.001, bucket: x402 }`))
  t.ok(text.includes('engine: shared') && text.includes(`capacity: ${BUCKET},`), 'the example config, on the shared engine with a tiny bucket')
  const env = {
    TOLLGATE_PORT: '0', TOLLGATE_ADMIN_PORT: '0', MIRROR_TESTNET_URL: 'http://127.0.0.1:9',
    // No EVM chain here: base/testnet is unreachable (503), which leaves Solana unaffected.
    EVM_RPC_URL: 'http://127.0.0.1:9', X402_FACILITATOR_KEY: '11'.repeat(32), X402_ASSET: `0x${'22'.repeat(20)}`, X402_PAY_TO: `0x${'33'.repeat(20)}`,
    SOLANA_RPC_URL: f.local.rpcUrl, X402_SOLANA_FACILITATOR_KEY: f.local.accounts.facilitator.secretKeyBase58, X402_SOLANA_ASSET: f.local.mint,
  }
  // One after the other: two tsx starts at once can exceed the start timeout on a busy machine.
  const a = await startGatewayProcess(text, { ...START, env })
  t.teardown(() => a.stop('SIGKILL'))
  const b = await startGatewayProcess(text, { ...START, env })
  t.teardown(() => b.stop('SIGKILL'))
  dumpOnFailure(t, a, b)
  const at = (gw: GatewayProcess, endpoint: string, key = KEY.x402) => `${gw.url}/x402/solana/testnet/${key}/${endpoint}`
  const payee = f.local.accounts.payee.address

  const settleEverywhere = async (t: Test, body: unknown, perGateway: number, held: boolean) => {
    const before = await f.local.tokenBalance(payee)
    const sent = f.local.front.executed.length
    // Held: the cluster queues the send, so the instance that claimed the payment is still waiting
    // for confirmation while every other request, on both instances, arrives.
    if (held) f.local.front.hold()
    const answers: Promise<Answer>[] = []
    for (let i = 0; i < perGateway; i++) for (const gw of [a, b]) answers.push(call(at(gw, 'settle'), { body }))
    if (held) {
      await new Promise((r) => setTimeout(r, 1500))
      t.equal(f.local.front.executed.length, sent, 'held: nothing executed yet')
      f.local.front.release()
    }
    const responses = await Promise.all(answers)
    t.same(responses.map((r) => r.status), responses.map(() => 200), 'every answer is 200')
    const settled = responses.map((r) => r.json())
    const successes = settled.filter((r) => r.success)
    const others = settled.filter((r) => !r.success)
    t.ok(successes.length >= 1, `at least one success (${successes.length} of ${settled.length})`)
    t.equal(new Set(successes.map((r) => r.transaction)).size, 1, 'every success names the same signature')
    t.same([...new Set(others.map((r) => r.errorReason))].filter((reason) => reason !== 'duplicate_settlement'), [], 'the others are duplicate_settlement')
    t.equal(f.local.front.executed.length, sent + 1, 'one transaction sent to the SVM')
    t.equal(await f.local.tokenBalance(payee), before + BigInt(price), 'the payee was paid exactly once')
    t.comment(`${held ? 'held' : 'race'}: ${successes.length} success, ${others.length} duplicate_settlement`)
    return successes[0]
  }

  t.test('one payment settled concurrently through both gateways sends one transaction', async (t) => {
    for (const held of [false, true]) {
      const body = await officialBody(f, 2)
      const payerBefore = await f.local.tokenBalance(f.local.accounts.payer.address)
      const success = await settleEverywhere(t, body, 4, held)
      t.equal(await f.local.tokenBalance(f.local.accounts.payer.address), payerBefore - BigInt(price), 'the payer paid exactly once')
      // Once settled, either instance answers the repeat with the original result.
      for (const gw of [a, b]) {
        const again = await call(at(gw, 'settle'), { body })
        t.same(again.json(), success, 'a later repeat is the original success')
      }
    }
  })

  t.test('a repeat of a settled payment on the other gateway returns the original result', async (t) => {
    for (const version of [2, 1] as const) {
      const body = await officialBody(f, version)
      const before = await f.local.tokenBalance(payee)
      const sent = f.local.front.executed.length
      const first = await call(at(a, 'settle'), { body })
      t.match(first.json(), { success: true, errorReason: null, payer: f.local.accounts.payer.address }, `v${version}: settled on gateway A`)
      const repeat = await call(at(b, 'settle'), { body })
      t.equal(repeat.status, 200)
      t.same(repeat.json(), first.json(), `v${version}: gateway B returns A's answer (signature ${first.json().transaction})`)
      t.equal(f.local.front.executed.length, sent + 1, `v${version}: one transaction`)
      t.equal(await f.local.tokenBalance(payee), before + BigInt(price), `v${version}: paid once`)
    }
  })

  t.test('the rate limit, shared by both gateways, answers 429 on a Solana path when exhausted', async (t) => {
    const statuses: number[] = []
    for (let i = 0; i < BUCKET; i++) statuses.push((await call(at(i % 2 ? b : a, 'supported', KEY.limited))).status)
    t.same(statuses, Array(BUCKET).fill(200), `${BUCKET} calls across both gateways fill the bucket`)
    for (const gw of [a, b]) {
      const refused = await call(at(gw, 'health', KEY.limited))
      t.equal(refused.status, 429, 'the next call is 429 on either gateway')
      t.match(refused.json(), { code: 'rate_limited' })
      t.ok(Number(refused.headers['retry-after']) > 0, 'with Retry-After')
    }
    const verify = await call(at(a, 'verify', KEY.limited), { body: await officialBody(f, 2) })
    t.equal(verify.status, 429, 'verify too')
    t.equal((await call(at(b, 'health'))).status, 200, 'another project has its own bucket')
  })
})
