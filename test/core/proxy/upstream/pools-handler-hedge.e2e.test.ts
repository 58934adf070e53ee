/**
 * Hedged calls of a handler plugin (JSON-RPC) through its upstream pool, end to end: a real gateway
 * process, two real node stand-ins behind status fronts that count what they receive. Target `a`
 * (weighted to take every first attempt) holds its answer head 1.5 s; the pool hedges after 150 ms.
 * A read-only method is answered by `b` well before `a`, charged once; a method not marked
 * read-only is sent once and waits.
 */
import t from 'tap'
import { startGatewayProcess } from '../../../helpers/gateway-process.ts'
import { startStatusFront } from '../../../helpers/status-front.ts'
import { ADMIN_TOKEN, KEY, PROJECT } from '../../../reliability/harness/environment.ts'
import { metric, settledCreditsUsed } from '../../../reliability/harness/admin.ts'
import { call } from '../../../reliability/harness/client.ts'
import { hashCredential } from '../../../../core/projects/projects.ts'
import { startNodeRpc } from '../../../../examples/upstreams/node-rpc.ts'

t.setTimeout(300_000)

t.test('JSON-RPC read-only calls are hedged to another target; other calls are not', async (t) => {
  const nodes = [await startNodeRpc({}), await startNodeRpc({})]
  const [a, b] = [await startStatusFront(nodes[0].url), await startStatusFront(nodes[1].url)]
  const gw = await startGatewayProcess(
    `version: 1
server: { listen: { host: 127.0.0.1, port: 0 }, drainTimeoutMs: 1000 }
admin: { listen: { host: 127.0.0.1, port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
log: { level: info, access: true }
projects:
  - id: ${PROJECT}
    plan: enterprise
    scopes: [rpc]
    credits: { allocation: 1000000, period: month }
    keys: [{ label: k, hash: ${hashCredential(KEY)} }]
upstreams:
  node: { targets: [{ url: '${a.url}', name: a, weight: 1000 }, { url: '${b.url}', name: b }], hedge: { afterMs: 150 }, timeouts: { connectMs: 500, headersMs: 5000, bodyMs: 5000 } }
routes:
  - name: rpc
    methods: [POST]
    path: /rpc
    apiType: PRIVNET_RPC
    errorFormat: jsonrpc
    handler: { name: jsonrpc, config: { upstream: node, form: post, allow: [system_chain, system_name], readOnly: [system_chain] } }
    plugins: [{ name: header-auth, config: { header: x-api-key, scope: rpc } }, { name: credit-meter, config: { apiType: PRIVNET_RPC, cost: 1 } }]
`,
    { startTimeoutMs: 120_000 },
  )
  t.teardown(async () => {
    await gw.stop()
    await a.close()
    await b.close()
    await Promise.allSettled(nodes.map((n) => n.close()))
  })
  const rpc = (method: string) =>
    call(gw.url, '/rpc', { method: 'POST', headers: { 'x-api-key': KEY, 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 7, method, params: [] }) })
  const measure = async (method: string) => {
    const before = { a: a.hits, b: b.hits, used: await settledCreditsUsed(gw.adminUrl) }
    const o = await rpc(method)
    return { o, a: a.hits - before.a, b: b.hits - before.b, charged: (await settledCreditsUsed(gw.adminUrl)) - before.used }
  }
  const warm = await measure('system_chain')
  t.same([warm.o.status, warm.a, warm.b], [200, 1, 0], 'no fault: a answers alone')

  a.mode = 'slow-head'
  a.delayMs = 1500
  const read = await measure('system_chain')
  t.same({ status: read.o.status, a: read.a, b: read.b, charged: read.charged }, { status: 200, a: 1, b: 1, charged: 1 }, 'read-only call: hedged to b, charged once')
  t.match(read.o.body, /"result"/)
  t.match(read.o.body, /"id":7/, "the client's id comes back")
  t.ok(read.o.ms < 1200, `answered by the hedge before the slow target (${read.o.ms} ms)`)
  const write = await measure('system_name')
  t.same({ status: write.o.status, a: write.a, b: write.b }, { status: 200, a: 1, b: 0 }, 'a call not marked read-only: sent once, never hedged')
  t.ok(write.o.ms >= 1400, `and waits for the slow target (${write.o.ms} ms)`)
  a.mode = 'pass'
  t.ok((await metric(gw.adminUrl, 'tollgate_upstream_target_hedges_total', { upstream: 'node', target: 'b' })) >= 1, 'the hedge is counted on b')
})
