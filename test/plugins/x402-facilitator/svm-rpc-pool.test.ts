/**
 * The Solana facilitator on a pool of cluster RPCs (`rpcUpstream`, plugins/x402-facilitator/
 * rpc-pool.ts) against the local SVM: reads (getAccountInfo, simulateTransaction,
 * getSignatureStatuses...) fail over from a target answering 503 or refusing connections, and
 * sendTransaction goes to one target once, never again elsewhere, even when that target fails.
 */
import t from 'tap'
import pino from 'pino'
import { createUpstream } from '../../../core/proxy/http/upstreams.ts'
import { normaliseUpstream, type RawUpstream } from '../../../core/proxy/upstream/config.ts'
import { poolFetch, poolPlaceholderUrl } from '../../../plugins/x402-facilitator/rpc-pool.ts'
import { SvmFacilitator } from '../../../plugins/x402-facilitator/svm/facilitator.ts'
import { signerFromSecretKey } from '../../../plugins/x402-facilitator/svm/keys.ts'
import { svmNetworkForPath } from '../../../plugins/x402-facilitator/svm/networks.ts'
import { startFaultyRpc, type FaultyRpc } from '../../helpers/rpc-faults.ts'
import { closedPort } from '../../helpers/upstream.ts'
import { officialBody, price, settings, startSvmFixture } from './svm-helpers.ts'

const f = await startSvmFixture()
t.teardown(() => f.close())
const payee = f.local.accounts.payee.address
const servers: FaultyRpc[] = []
t.teardown(() => Promise.all(servers.map((s) => s.close())))
async function rpc(answer: (methods: string[]) => number | undefined): Promise<FaultyRpc> {
  const server = await startFaultyRpc(f.local.rpcUrl, answer)
  servers.push(server)
  return server
}

/** A facilitator whose RPC is a pool of `targets` (the first, weight 100, is always chosen first). */
async function pooled(name: string, targets: RawUpstream['targets'], health: RawUpstream['health'] = { consecutiveFailures: 1000 }) {
  const upstream = createUpstream(name, normaliseUpstream({
    targets, connections: 8, timeouts: { connectMs: 500, headersMs: 5000, bodyMs: 5000 }, keepAliveTimeoutMs: 4000,
    health, retry: { maxRetries: 2, minPerWindow: 10_000 },
  }))
  const facilitator = await SvmFacilitator.open('solana/testnet', svmNetworkForPath('testnet')!, [signerFromSecretKey(f.local.accounts.facilitator.secretKey)],
    settings(poolPlaceholderUrl(upstream), { rpcFetch: poolFetch(upstream), confirmTimeoutMs: 1500, assets: [{ address: f.local.mint, decimals: 6 }] }),
    f.records, pino({ level: 'silent' }))
  t.teardown(async () => {
    await facilitator.close()
    await upstream.destroy()
  })
  return { upstream, facilitator }
}

const sends = (server: FaultyRpc) => server.methods.filter((m) => m === 'sendTransaction').length

t.test('reads fail over from a 503 target; sendTransaction reaches it once and is not sent elsewhere', async (t) => {
  const busy = await rpc(() => 503)
  const node = await rpc(() => undefined)
  const { upstream, facilitator } = await pooled('svm-busy', [{ url: busy.url, name: 'busy', weight: 100 }, { url: node.url, name: 'node' }])
  const body = await officialBody(f, 2)
  const verified = await facilitator.verify(body)
  t.same([verified.status, verified.body.isValid], [200, true], 'verify answers through the healthy target')
  t.ok(busy.requests() >= 1, 'the busy target was tried')
  t.ok(upstream.targets[1].counters.retries >= 1, 'reads retried on the node')

  const before = await f.local.tokenBalance(payee)
  const executed = f.local.front.executed.length
  const settled = await facilitator.settle(body)
  t.equal(sends(busy), 1, 'sendTransaction reached the busy target exactly once')
  t.equal(sends(node), 0, 'and was never sent to the other target')
  t.match(settled.body, { success: false, errorReason: 'settlement_pending' }, 'the outcome is unknown to the facilitator: pending with the signature')
  t.equal(f.local.front.executed.length, executed, 'nothing executed on the SVM')
  t.equal(await f.local.tokenBalance(payee), before, 'no money moved')
})

t.test('behind a dead target and a 503 target (ejected on their first failure), verify and settle work; one send', async (t) => {
  const dead = `http://127.0.0.1:${await closedPort()}`
  const busy = await rpc(() => 503)
  const node = await rpc(() => undefined)
  const { upstream, facilitator } = await pooled('svm-dead', [
    { url: dead, name: 'dead', weight: 100 }, { url: busy.url, name: 'busy', weight: 100 }, { url: node.url, name: 'node' },
  ], { consecutiveFailures: 1, baseEjectionMs: 60_000, maxEjectionMs: 60_000 })
  const body = await officialBody(f, 2)
  const before = await f.local.tokenBalance(payee)
  t.same((await facilitator.verify(body)).body.isValid, true)
  const settled = await facilitator.settle(body)
  t.match(settled.body, { success: true, errorReason: null })
  t.equal(await f.local.tokenBalance(payee), before + BigInt(price), 'paid once')
  t.equal(sends(node) + sends(busy), 1, 'one sendTransaction in all')
  t.same(upstream.targets.map((target) => target.counters.ejections), [1, 1, 0], 'dead and busy ejected once each')
})
