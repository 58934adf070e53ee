/**
 * The EVM facilitator on a pool of chain RPCs (`rpcUpstream`, plugins/x402-facilitator/rpc-pool.ts)
 * against a real local chain: reads fail over from a target that answers 503 or refuses
 * connections, and eth_sendRawTransaction is sent to one target once, never again elsewhere, even
 * when that target fails (the settlement is then pending, and no money moved). The gateway-level
 * path (gateway.yaml, metrics) is test/e2e/x402-rpc-pool.test.ts.
 */
import t from 'tap'
import { createUpstream } from '../../../core/proxy/http/upstreams.ts'
import { normaliseUpstream, type RawUpstream } from '../../../core/proxy/upstream/config.ts'
import { createEvmChainContext } from '../../../plugins/x402-facilitator/evm/context.ts'
import { settleExact, type SettleLogger } from '../../../plugins/x402-facilitator/evm/settle.ts'
import { verifyExact } from '../../../plugins/x402-facilitator/evm/verify.ts'
import { poolFetch, poolPlaceholderUrl, readOnlyBody } from '../../../plugins/x402-facilitator/rpc-pool.ts'
import { startFaultyRpc, type FaultyRpc } from '../../helpers/rpc-faults.ts'
import { closedPort } from '../../helpers/upstream.ts'
import { price, sdkBodyV2, sdkSigner, startFixture } from './evm-helpers.ts'

const f = await startFixture(84532)
t.teardown(() => f.close())
const { accounts } = f.chain
const payer = sdkSigner(accounts.payer.privateKey)
const log: SettleLogger = { info() {}, warn() {}, error() {} }

const servers: FaultyRpc[] = []
t.teardown(() => Promise.all(servers.map((s) => s.close())))
async function rpc(answer: (methods: string[]) => number | undefined): Promise<FaultyRpc> {
  const server = await startFaultyRpc(f.chain.rpcUrl, answer)
  servers.push(server)
  return server
}

/** A pool whose first target (weight 100) is always chosen first and never ejected: every call meets the fault. */
function pool(name: string, targets: RawUpstream['targets'], health = { consecutiveFailures: 1000 }, hedge?: RawUpstream['hedge']) {
  const upstream = createUpstream(name, normaliseUpstream({
    targets, connections: 8, timeouts: { connectMs: 500, headersMs: 5000, bodyMs: 5000 }, keepAliveTimeoutMs: 4000,
    health, retry: { maxRetries: 2, minPerWindow: 10_000 }, ...(hedge ? { hedge } : {}),
  }))
  t.teardown(() => upstream.destroy())
  return upstream
}

function contextOn(upstream: ReturnType<typeof pool>) {
  return createEvmChainContext({
    network: 84532, rpcUrl: poolPlaceholderUrl(upstream), rpcFetch: poolFetch(upstream),
    signerPrivateKey: accounts.facilitator.privateKey, assets: f.ctx.assets, pollingIntervalMs: 20,
  })
}

const sends = (server: FaultyRpc) => server.methods.filter((m) => m === 'eth_sendRawTransaction').length

t.test('only bodies whose every call is a read are retry-safe', async (t) => {
  t.equal(readOnlyBody('{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[]}'), true)
  t.equal(readOnlyBody('[{"method":"eth_getCode"},{"method":"eth_call"},{"method":"eth_getTransactionCount"}]'), true)
  t.equal(readOnlyBody('{"method":"eth_sendRawTransaction","params":["0x00"]}'), false)
  t.equal(readOnlyBody('[{"method":"eth_call"},{"method":"eth_sendRawTransaction"}]'), false, 'a batch with one write is a write')
  t.equal(readOnlyBody('{"method":"sendTransaction"}'), false, 'Solana send')
  t.equal(readOnlyBody('{"method":"eth_somethingNew"}'), false, 'an unknown method is not assumed to be a read')
  t.equal(readOnlyBody('[]'), false)
  t.equal(readOnlyBody('not json'), false)
})

t.test('reads fail over from a target answering 503; the send goes to it once and is not retried', async (t) => {
  const busy = await rpc(() => 503)
  const node = await rpc(() => undefined)
  const upstream = pool('chain-busy', [{ url: busy.url, name: 'busy', weight: 100 }, { url: node.url, name: 'node' }])
  const ctx = contextOn(upstream)
  const body = await sdkBodyV2(f, payer)

  const verdict = await verifyExact(ctx, body)
  t.same([verdict.isValid, verdict.invalidReason], [true, null], 'verify answers through the healthy target')
  t.ok(busy.requests() >= 1, 'the busy target was tried first')
  const [busyT, nodeT] = upstream.targets
  t.ok(nodeT.counters.retries >= 1, 'the read was retried on the node')
  t.ok(busyT.counters.errors >= 1, 'the 503 counts as an error of the busy target')

  const [payerBefore, payeeBefore] = await Promise.all([f.balanceOf(accounts.payer.address), f.balanceOf(accounts.payee.address)])
  const result = await settleExact(ctx, body, { receiptTimeoutMs: 1500, records: f.records, log })
  t.equal(sends(busy), 1, 'eth_sendRawTransaction reached the busy target exactly once')
  t.equal(sends(node), 0, 'and was never sent again to the other target')
  t.match(result, { success: false, errorReason: 'settlement_pending', transaction: /^0x[0-9a-f]{64}$/ }, 'the client learns the hash, not a failure to retry')
  t.same(await Promise.all([f.balanceOf(accounts.payer.address), f.balanceOf(accounts.payee.address)]), [payerBefore, payeeBefore], 'no money moved')
})

t.test('behind a dead target and a 503 target (ejected on their first failure), verify and settle work; one send', async (t) => {
  const dead = `http://127.0.0.1:${await closedPort()}`
  const busy = await rpc(() => 503)
  const node = await rpc(() => undefined)
  const upstream = pool('chain-dead', [
    { url: dead, name: 'dead', weight: 100 }, { url: busy.url, name: 'busy', weight: 100 }, { url: node.url, name: 'node' },
  ], { consecutiveFailures: 1, baseEjectionMs: 60_000, maxEjectionMs: 60_000 } as never)
  const ctx = contextOn(upstream)
  const body = await sdkBodyV2(f, payer)
  const [payerBefore, payeeBefore] = await Promise.all([f.balanceOf(accounts.payer.address), f.balanceOf(accounts.payee.address)])

  t.same((await verifyExact(ctx, body)).isValid, true)
  const result = await settleExact(ctx, body, { receiptTimeoutMs: 10_000, records: f.records, log })
  t.match(result, { success: true, transaction: /^0x[0-9a-f]{64}$/ })
  t.same(await Promise.all([f.balanceOf(accounts.payer.address), f.balanceOf(accounts.payee.address)]),
    [payerBefore - BigInt(price), payeeBefore + BigInt(price)], 'one transfer on chain')
  t.equal(sends(node) + sends(busy), 1, 'one eth_sendRawTransaction in all')
  const [deadT, busyT] = upstream.targets
  t.same([deadT.counters.ejections, busyT.counters.ejections], [1, 1], 'each bad target ejected once (then left alone)')
  t.equal(busy.requests(), 1, 'the 503 target saw one request only')
})

t.test('targets with and without a path prefix (a key in the path) both receive the calls', async (t) => {
  const busy = await rpc(() => 503)
  const node = await rpc(() => undefined)
  const upstream = pool('chain-paths', [{ url: `${busy.url}/v2/some-key`, name: 'keyed', weight: 100 }, { url: node.url, name: 'plain' }])
  const ctx = contextOn(upstream)
  t.equal(await ctx.publicClient.getChainId(), 84532, 'the read failed over from /v2/some-key to the target without a path')
  t.ok(busy.requests() >= 1 && node.requests() >= 1)
})

t.test('with a hedge threshold, reads stuck at a slow target are hedged to another; a slow send is not', async (t) => {
  // Reads: every answer of the first target comes after 1.5 s.
  const slowNode = await startFaultyRpc(f.chain.rpcUrl, () => undefined, () => 1500)
  servers.push(slowNode)
  const node = await rpc(() => undefined)
  const reads = pool('chain-slow', [{ url: slowNode.url, name: 'slow', weight: 100 }, { url: node.url, name: 'node' }], { consecutiveFailures: 1000 }, { afterMs: 100 })
  const body = await sdkBodyV2(f, payer)
  const started = Date.now()
  t.same((await verifyExact(contextOn(reads), body)).isValid, true)
  t.ok(Date.now() - started < 1400, `verify answered before the slow target would have (${Date.now() - started} ms)`)
  t.ok(reads.targets[1].counters.hedges >= 1, 'a hedge went to the node')

  // The send: the first target answers reads at once but holds eth_sendRawTransaction for 1 s.
  const slowSend = await startFaultyRpc(f.chain.rpcUrl, () => undefined, (methods) => (methods.includes('eth_sendRawTransaction') ? 1000 : 0))
  servers.push(slowSend)
  const other = await rpc(() => undefined)
  const sendPool = pool('chain-slow-send', [{ url: slowSend.url, name: 'slow-send', weight: 100 }, { url: other.url, name: 'other' }], { consecutiveFailures: 1000 }, { afterMs: 100 })
  const result = await settleExact(contextOn(sendPool), body, { receiptTimeoutMs: 10_000, records: f.records, log })
  t.match(result, { success: true })
  t.equal(sends(slowSend), 1, 'the send went to the chosen target')
  t.equal(sends(other), 0, 'and was not hedged to the other one after 100 ms')
})
