/**
 * The Solana facilitator on a pool of cluster RPCs through a real gateway process: examples/config/
 * x402.yaml with solana/testnet's `rpcUrl` replaced by `rpcUpstream: svm-rpc`, an upstream whose
 * first targets refuse connections or answer 503 and whose last forwards to the local SVM
 * (LiteSVM behind its JSON-RPC front). The gateway starts, health, verify and settle work with the
 * official client's payment, sendTransaction is sent once in all, and /metrics names each target.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { metricValue } from '../helpers/mirror.ts'
import { startFaultyRpc, type FaultyRpc } from '../helpers/rpc-faults.ts'
import { closedPort } from '../helpers/upstream.ts'
import { call, x402Config } from '../helpers/x402.ts'
import { officialBody, price, startSvmFixture } from '../plugins/x402-facilitator/svm-helpers.ts'

const KEY = `xk_svmpool_${randomBytes(10).toString('hex')}`
const f = await startSvmFixture()
let gw: GatewayProcess
let busy: FaultyRpc
let node: FaultyRpc

t.before(async () => {
  busy = await startFaultyRpc(f.local.rpcUrl, () => 503)
  node = await startFaultyRpc(f.local.rpcUrl, () => undefined)
  const pool = `upstreams:
  svm-rpc:
    targets:
      - { name: dead, url: "http://127.0.0.1:${await closedPort()}", weight: 100 }
      - { name: busy, url: "${busy.url}", weight: 100 }
      - { name: node, url: "${node.url}" }
    timeouts: { connectMs: 500 }
    health: { consecutiveFailures: 1, baseEjectionMs: 60000, maxEjectionMs: 60000 }
    retry: { maxRetries: 2 }
`
  const config = x402Config([{ id: 'payments', key: KEY, scopes: ['x402'], allocation: 100000 }], (text) =>
    text.replace('upstreams:\n', pool).replace('rpcUrl: "${SOLANA_RPC_URL:-}"', 'rpcUpstream: svm-rpc'))
  t.match(config, /rpcUpstream: svm-rpc/)
  gw = await startGatewayProcess(config, {
    startTimeoutMs: 90_000,
    env: {
      TOLLGATE_PORT: '0', TOLLGATE_ADMIN_PORT: '0', MIRROR_TESTNET_URL: 'http://127.0.0.1:9',
      // No EVM chain here: base/testnet is unreachable (503), which leaves Solana unaffected.
      EVM_RPC_URL: 'http://127.0.0.1:9', X402_FACILITATOR_KEY: '11'.repeat(32), X402_ASSET: `0x${'22'.repeat(20)}`, X402_PAY_TO: `0x${'33'.repeat(20)}`,
      X402_SOLANA_FACILITATOR_KEY: f.local.accounts.facilitator.secretKeyBase58, X402_SOLANA_ASSET: f.local.mint,
    },
  })
})
t.teardown(async () => {
  await gw?.stop('SIGKILL')
  await Promise.all([busy?.close(), node?.close()])
  await f.close()
})

const at = (endpoint: string) => `${gw.url}/x402/solana/testnet/${KEY}/${endpoint}`
const sends = (server: FaultyRpc) => server.methods.filter((m) => m === 'sendTransaction').length

t.test('health, verify and settle work behind a dead and a 503 target; one sendTransaction', async (t) => {
  const health = await call(at('health'))
  t.same([health.status, health.json()], [200, { status: 'ok' }])
  const body = await officialBody(f, 2)
  const verified = await call(at('verify'), { body })
  t.same([verified.status, verified.json().isValid], [200, true])
  const payee = f.local.accounts.payee.address
  const before = await f.local.tokenBalance(payee)
  const settled = await call(at('settle'), { body })
  t.equal(settled.status, 200)
  t.match(settled.json(), { success: true, errorReason: null })
  t.equal(await f.local.tokenBalance(payee), before + BigInt(price), 'paid once')
  t.equal(sends(busy) + sends(node), 1, 'sendTransaction sent once in all')
  t.ok(busy.requests() >= 1, 'the 503 target was tried and failed over')
})

t.test('/metrics names each target of the Solana pool', async (t) => {
  const value = (name: string, target: string) => metricValue(gw.adminUrl, name, { upstream: 'svm-rpc', target })
  t.equal(await value('tollgate_upstream_target_ejections_total', 'dead'), 1)
  t.equal(await value('tollgate_upstream_target_ejections_total', 'busy'), 1)
  t.ok(await value('tollgate_upstream_target_retries_total', 'node') >= 1)
  t.ok(await value('tollgate_upstream_target_requests_total', 'node') >= 3)
})
