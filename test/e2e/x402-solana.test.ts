/**
 * The Solana facilitator through a real gateway process (examples/config/x402.yaml) against the
 * local SVM: supported with the fee payer, the official @x402/svm client's payments (v1, v2)
 * verified and settled with balances checked on the SVM, malformed bodies as 400, auth and
 * credits as on the EVM routes, the rate limit's 429 (a small bucket here), and solana/mainnet (no
 * RPC URL) answering 501.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { call, x402Config } from '../helpers/x402.ts'
import { officialBody, price, startSvmFixture } from '../plugins/x402-facilitator/svm-helpers.ts'

const fresh = (name: string) => `xk_${name}_${randomBytes(10).toString('hex')}`
const KEY = { x402: fresh('x402'), mirror: fresh('mirror'), tiny: fresh('tiny'), limited: fresh('limited') }
/** The x402 bucket, per project, refill ~0: above the ~20 calls any other project makes here. */
const BUCKET = 30

const f = await startSvmFixture()
let gw: GatewayProcess

t.before(async () => {
  const projects = [
    { id: 'payments', key: KEY.x402, scopes: ['x402'], allocation: 100000 },
    { id: 'mirror-only', key: KEY.mirror, scopes: ['mirror'] },
    { id: 'tiny', key: KEY.tiny, scopes: ['x402'], allocation: 3 },
    { id: 'limited', key: KEY.limited, scopes: ['x402'], allocation: 100000 },
  ]
  const config = x402Config(projects, (text) => text.replace(/capacity: \d+, refillPerSecond: \d+, bucket: x402 }/, `capacity: ${BUCKET}, refillPerSecond: 0.001, bucket: x402 }`))
  gw = await startGatewayProcess(config, {
    startTimeoutMs: 90_000, // tsx compiles slowly on a loaded machine
    env: {
      TOLLGATE_PORT: '0', TOLLGATE_ADMIN_PORT: '0', MIRROR_TESTNET_URL: 'http://127.0.0.1:9',
      // No EVM chain here: base/testnet is unreachable (503), which leaves Solana unaffected.
      EVM_RPC_URL: 'http://127.0.0.1:9', X402_FACILITATOR_KEY: '11'.repeat(32), X402_ASSET: `0x${'22'.repeat(20)}`, X402_PAY_TO: `0x${'33'.repeat(20)}`,
      SOLANA_RPC_URL: f.local.rpcUrl, X402_SOLANA_FACILITATOR_KEY: f.local.accounts.facilitator.secretKeyBase58, X402_SOLANA_ASSET: f.local.mint,
    },
  })
})
t.teardown(async () => {
  await gw?.stop('SIGKILL')
  await f.close()
})

const at = (endpoint: string, key = KEY.x402, path = 'solana/testnet') => `${gw.url}/x402/${path}/${key}/${endpoint}`

t.test('supported lists the v1 and v2 kinds with the fee payer; health is ok', async (t) => {
  const supported = await call(at('supported'))
  t.equal(supported.status, 200)
  const extra = { feePayer: f.feePayer }
  t.same(supported.json(), {
    kinds: [
      { x402Version: 1, scheme: 'exact', network: 'solana-testnet', extra },
      { x402Version: 2, scheme: 'exact', network: 'solana:4uhcVJyU9pJkvQyS88uRDiswHXSCkY3z', extra },
    ],
    extensions: [],
    signers: { 'solana:*': [f.feePayer] },
  })
  const health = await call(at('health'))
  t.same([health.status, health.json()], [200, { status: 'ok' }])
  t.equal(supported.text.includes(f.local.accounts.facilitator.secretKeyBase58), false, 'the key never shows')
})

t.test('official client payments (v2, v1) verify and settle; funds move once', async (t) => {
  for (const version of [2, 1] as const) {
    const body = await officialBody(f, version)
    const payee = f.local.accounts.payee.address
    const before = await f.local.tokenBalance(payee)
    const verified = await call(at('verify'), { body })
    t.same([verified.status, verified.json().isValid], [200, true], `v${version} verify`)
    const settled = await call(at('settle'), { body })
    t.equal(settled.status, 200)
    t.match(settled.json(), { success: true, payer: f.local.accounts.payer.address, network: body.paymentRequirements.network })
    const again = await call(at('settle'), { body })
    t.same(again.json(), settled.json(), 'a repeat returns the original answer')
    t.equal(await f.local.tokenBalance(payee), before + BigInt(price), `v${version}: paid exactly once`)
  }
})

t.test('the spec identifier solana-testnet is accepted as the v1 network', async (t) => {
  const body = await officialBody(f, 1)
  t.equal(body.paymentRequirements.network, 'solana-testnet')
  const v2 = await officialBody(f, 2)
  const renamed = structuredClone(v2)
  renamed.paymentRequirements.network = 'solana-testnet'
  renamed.paymentPayload.accepted.network = 'solana-testnet'
  t.equal((await call(at('verify'), { body: renamed })).json().isValid, true)
})

t.test('malformed bodies are 400 with a reason, never 5xx', async (t) => {
  const body = await officialBody(f, 2)
  const cases: unknown[] = [
    { ...body, paymentPayload: { ...body.paymentPayload, payload: { transaction: '%%%' } } },
    { ...body, paymentRequirements: { ...body.paymentRequirements, amount: '1e6' } },
    { x402Version: 2 },
  ]
  for (const c of cases) {
    const res = await call(at('verify'), { body: c })
    t.equal(res.status, 400)
    t.equal(res.json().isValid, false)
    t.match(res.json().invalidReason, /^invalid_/)
  }
  const truncated = structuredClone(body)
  truncated.paymentPayload.payload.transaction = body.paymentPayload.payload.transaction.slice(0, 40)
  const res = await call(at('settle'), { body: truncated })
  t.same([res.status, res.json().errorReason], [200, 'invalid_exact_svm_payload_transaction_could_not_be_decoded'])
  t.equal((await call(at('verify'), { body: 'not json', headers: { 'content-type': 'application/json' } })).status, 400)
})

t.test('auth and credits apply as on the EVM routes; solana/mainnet answers 501', async (t) => {
  t.equal((await call(at('supported', KEY.mirror))).status, 403)
  for (let i = 0; i < 3; i++) t.equal((await call(at('supported', KEY.tiny))).status, 200)
  const exhausted = await call(at('supported', KEY.tiny))
  t.equal(exhausted.status, 402)
  t.match(exhausted.json(), { code: 'credits_exhausted' })
  const mainnet = await call(at('supported', KEY.x402, 'solana/mainnet'))
  t.same([mainnet.status, mainnet.json()], [501, { code: 'network_not_configured', error: 'solana/mainnet is not configured on this gateway' }])
})

t.test('a Solana path answers 429 once the project\'s rate-limit bucket is empty', async (t) => {
  const statuses: number[] = []
  for (let i = 0; i < BUCKET; i++) statuses.push((await call(at('supported', KEY.limited))).status)
  t.same(statuses, Array(BUCKET).fill(200), `the first ${BUCKET} calls pass`)
  const refused = await call(at('verify', KEY.limited), { body: await officialBody(f, 2) })
  t.equal(refused.status, 429)
  t.match(refused.json(), { code: 'rate_limited' })
  t.ok(Number(refused.headers['retry-after']) > 0, 'with Retry-After')
  t.equal((await call(at('health', KEY.limited))).status, 429, 'every endpoint of the route')
  t.equal((await call(at('health'))).status, 200, 'another project has its own bucket')
})
