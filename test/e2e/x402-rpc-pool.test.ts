/**
 * The x402 facilitator on a pool of chain RPCs, through a real gateway process: examples/config/
 * x402.yaml with base/testnet's `rpcUrl` replaced by `rpcUpstream: chain-rpc`, an upstream of three
 * targets in front of a local chain: one refusing connections, one answering 503, one forwarding to
 * the node. The gateway starts, verify and settle work, the transaction is broadcast once in all,
 * and /metrics shows each target under tollgate_upstream_target_* (names, never URLs). The paywall
 * route of the same file keeps its single `rpcUrl` (unchanged). Write-once against a failing target
 * is test/plugins/x402-facilitator/evm-rpc-pool.test.ts.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { x402Client } from '@x402/core/client'
import { ExactEvmScheme } from '@x402/evm/exact/client'
import { decodePaymentResponseHeader, wrapFetchWithPayment } from '@x402/fetch'
import type { LocalAccount } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { execFile } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { BIN, startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { tempDir } from '../helpers/temp.ts'
import { metricValue } from '../helpers/mirror.ts'
import { startFaultyRpc, type FaultyRpc } from '../helpers/rpc-faults.ts'
import { closedPort } from '../helpers/upstream.ts'
import { call, x402Config, x402Env } from '../helpers/x402.ts'
import { price, sdkBodyV2, sdkSigner, startFixture } from '../plugins/x402-facilitator/evm-helpers.ts'

const KEY = `xk_pool_${randomBytes(10).toString('hex')}`
const f = await startFixture(84532)
const { accounts } = f.chain
let gw: GatewayProcess
let busy: FaultyRpc
let node: FaultyRpc
let content: Server

t.before(async () => {
  content = createServer((req, res) => void req.resume().on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"data":"paid"}')))
  await new Promise<void>((resolve) => content.listen(0, '127.0.0.1', resolve))
  busy = await startFaultyRpc(f.chain.rpcUrl, () => 503)
  node = await startFaultyRpc(f.chain.rpcUrl, () => undefined)
  const dead = `http://127.0.0.1:${await closedPort()}`
  const pool = `upstreams:
  chain-rpc:
    targets:
      - { name: dead, url: "${dead}", weight: 100, zone: eu-1 }
      - { name: busy, url: "${busy.url}", weight: 100 }
      - { name: node, url: "${node.url}", zone: us-1 }
    timeouts: { connectMs: 500 }
    health: { consecutiveFailures: 1, baseEjectionMs: 60000, maxEjectionMs: 60000 }
    retry: { maxRetries: 2 }
`
  const config = x402Config([{ id: 'payments', key: KEY, scopes: ['x402'], allocation: 100000 }], (text) => {
    // Both the facilitator route and the paywall route's in-process facilitator use the pool.
    return text.replace('upstreams:\n', pool).replaceAll('rpcUrl: "${EVM_RPC_URL:-http://127.0.0.1:18545}"', 'rpcUpstream: chain-rpc')
  })
  t.equal(config.match(/rpcUpstream: chain-rpc/g)?.length, 2)
  const mirror = `http://127.0.0.1:${(content.address() as AddressInfo).port}`
  gw = await startGatewayProcess(config, { env: x402Env(f.chain, { MIRROR_TESTNET_URL: mirror }), startTimeoutMs: 90_000 })
})
t.teardown(async () => {
  await gw?.stop('SIGKILL')
  await Promise.all([busy?.close(), node?.close(), new Promise((resolve) => content?.close(resolve))])
  await f.close()
})

const at = (endpoint: string) => `${gw.url}/x402/base/testnet/${KEY}/${endpoint}`
const sends = (server: FaultyRpc) => server.methods.filter((m) => m === 'eth_sendRawTransaction').length

t.test('the facilitator serves from the healthy target; verify and settle work; one broadcast', async (t) => {
  const health = await call(at('health'))
  t.same([health.status, health.json()], [200, { status: 'ok' }])
  const body = await sdkBodyV2(f, sdkSigner(accounts.payer.privateKey))
  const verified = await call(at('verify'), { body })
  t.same([verified.status, verified.json().isValid], [200, true])
  const before = await Promise.all([f.balanceOf(accounts.payer.address), f.balanceOf(accounts.payee.address)])
  const settled = await call(at('settle'), { body })
  t.equal(settled.status, 200)
  t.match(settled.json(), { success: true, transaction: /^0x[0-9a-f]{64}$/ })
  t.same(await Promise.all([f.balanceOf(accounts.payer.address), f.balanceOf(accounts.payee.address)]),
    [before[0] - BigInt(price), before[1] + BigInt(price)], 'one transfer on chain')
  t.equal(sends(busy) + sends(node), 1, 'eth_sendRawTransaction sent once in all')
  t.ok(busy.requests() >= 1, 'the 503 target was tried (at start) and failed over')
})

t.test('the paywall route, on the same pool, takes a payment from the official client: one more broadcast', async (t) => {
  const buyer = new x402Client()
    .register('eip155:84532', new ExactEvmScheme(privateKeyToAccount(accounts.payer.privateKey) as LocalAccount))
    .setSpendControls({ allowedAssets: [{ network: 'eip155:84532', asset: f.chain.token, maxAmountPerPayment: '10000' }] })
  const sent = sends(busy) + sends(node)
  const payeeBefore = await f.balanceOf(accounts.payee.address)
  const res = await wrapFetchWithPayment(fetch, buyer)(`${gw.url}/paid/mirror/accounts`)
  t.equal(res.status, 200)
  t.equal(await res.text(), '{"data":"paid"}')
  t.match(decodePaymentResponseHeader(res.headers.get('payment-response')!), { success: true, transaction: /^0x[0-9a-f]{64}$/ })
  t.equal(await f.balanceOf(accounts.payee.address), payeeBefore + 10000n, 'paid once')
  t.equal(sends(busy) + sends(node), sent + 1, 'one more eth_sendRawTransaction')
})

t.test('/metrics shows every target of the pool by name and zone, never its URL', async (t) => {
  const value = (name: string, target: string, zone = '') => metricValue(gw.adminUrl, name, { upstream: 'chain-rpc', target, zone })
  t.ok(await value('tollgate_upstream_target_errors_total', 'dead', 'eu-1') >= 1, 'the refused connection is an error of dead')
  t.ok(await value('tollgate_upstream_target_errors_total', 'busy') >= 1, 'the 503 is an error of busy')
  t.equal(await value('tollgate_upstream_target_ejections_total', 'dead', 'eu-1'), 1, 'dead ejected')
  t.equal(await value('tollgate_upstream_target_ejections_total', 'busy'), 1, 'busy ejected')
  t.ok(await value('tollgate_upstream_target_retries_total', 'node', 'us-1') >= 1, 'reads retried on node')
  t.ok(await value('tollgate_upstream_target_requests_total', 'node', 'us-1') >= 3, 'node carried the traffic')
  t.equal(await value('tollgate_upstream_target_healthy', 'node', 'us-1'), 1)
  t.equal(await value('tollgate_upstream_target_healthy', 'dead', 'eu-1'), 0)
  const text = await (await fetch(`${gw.adminUrl}/metrics`)).text()
  t.notMatch(text.split('\n').filter((l) => l.startsWith('tollgate_upstream_target') && l.includes('chain-rpc')).join('\n'), /127\.0\.0\.1/, 'no URL in labels')
})

t.test('tollgate check refuses an unknown rpcUpstream, rpcUrl with rpcUpstream, and a target URL with a query string', async (t) => {
  const dir = tempDir('x402-rpc-pool-check-')
  const cases = [
    { edit: (text: string) => text.replace('rpcUrl: "${EVM_RPC_URL:-http://127.0.0.1:18545}"', 'rpcUpstream: nowhere'), message: 'base/testnet: unknown rpcUpstream "nowhere"' },
    {
      edit: (text: string) => text.replace('upstreams:\n', `upstreams:\n  chain-rpc: { url: "${node.url}" }\n`)
        .replace('rpcUrl: "${EVM_RPC_URL:-http://127.0.0.1:18545}"', 'rpcUrl: "${EVM_RPC_URL}"\n              rpcUpstream: chain-rpc'),
      message: 'base/testnet: set only one of rpcUrl, rpcUpstream (in-process) or upstream, not rpcUrl and rpcUpstream',
    },
    {
      edit: (text: string) => text.replace('upstreams:\n', `upstreams:\n  chain-rpc: { targets: [{ name: keyed, url: "${node.url}/?apikey=secret" }] }\n`)
        .replace('rpcUrl: "${EVM_RPC_URL:-http://127.0.0.1:18545}"', 'rpcUpstream: chain-rpc'),
      message: 'base/testnet: rpcUpstream "chain-rpc" target keyed has a query string, which pools do not send; put the key in the path',
    },
  ]
  for (const [i, { edit, message }] of cases.entries()) {
    const file = join(dir, `gateway-${i}.yaml`)
    writeFileSync(file, x402Config([{ id: 'payments', key: KEY, scopes: ['x402'], allocation: 100000 }], edit))
    const { code, stderr } = await new Promise<{ code: number; stderr: string }>((resolve) => {
      execFile(process.execPath, [BIN, 'check', '-c', file], { env: { ...process.env, ...x402Env(f.chain), TOLLGATE_DATA_DIR: join(dir, `data-${i}`) } }, (error, _stdout, stderr) =>
        resolve({ code: error ? (error as { code?: number }).code ?? 1 : 0, stderr }))
    })
    t.equal(code, 1, message)
    t.match(stderr, message)
    t.notMatch(stderr, 'apikey=secret', 'the URL is not printed')
  }
})
