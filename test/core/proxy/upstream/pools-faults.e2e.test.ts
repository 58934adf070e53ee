/**
 * Upstream pools end to end: a real gateway process, two real stand-ins per route family (mirror
 * node, node JSON-RPC, proof server), each behind an HTTP status front (503, 429 + Retry-After,
 * slow head) behind a TCP fault proxy (refuse, reset before the head, garbage). Target `a` is
 * weighted so it takes every first attempt; `b` is the spare. For every fault: what the client
 * sees, what the ledger charged (once, whatever was retried), and the load the upstreams got.
 * Writes (POST not marked idempotent, prove, non-read-only JSON-RPC) are never sent twice.
 */
import t from 'tap'
import { startGatewayProcess, type GatewayProcess } from '../../../helpers/gateway-process.ts'
import { startStatusFront, type StatusFront } from '../../../helpers/status-front.ts'
import { startFaultProxy, type FaultProxy, type ProxyMode } from '../../../reliability/harness/fault-proxy.ts'
import { ADMIN_TOKEN, KEY, PROJECT } from '../../../reliability/harness/environment.ts'
import { creditsUsed, settledCreditsUsed, metric } from '../../../reliability/harness/admin.ts'
import { call, type Outcome } from '../../../reliability/harness/client.ts'
import { hashCredential } from '../../../../core/projects/projects.ts'
import { startMirror } from '../../../../examples/upstreams/mirror.ts'
import { startNodeRpc } from '../../../../examples/upstreams/node-rpc.ts'
import { startProofServer } from '../../../../examples/upstreams/proof-server.ts'

t.setTimeout(600_000)

interface Side {
  front: StatusFront
  proxy: FaultProxy
  close(): Promise<void>
}

async function side(url: string): Promise<Side> {
  const front = await startStatusFront(url)
  const proxy = await startFaultProxy(front.url)
  return { front, proxy, close: async () => (await proxy.close(), await front.close()) }
}

// Ejection is tested on its own upstream: elsewhere one fault per case must not take target a out.
const pool = (a: Side, b: Side, suffix = '', extra = '', failures = 50) =>
  `{ targets: [{ url: '${a.proxy.url}${suffix}', name: a, weight: 1000, zone: z1 }, { url: '${b.proxy.url}${suffix}', name: b, zone: z2 }], timeouts: { connectMs: 500, headersMs: 3000, bodyMs: 3000 }, health: { consecutiveFailures: ${failures}, baseEjectionMs: 500 }, breaker: { recoverMs: 300 }${extra} }`

function config(m: [Side, Side], n: [Side, Side], p: [Side, Side]): string {
  const auth = (scope: string) => `{ name: header-auth, config: { header: x-api-key, scope: ${scope} } }`
  const meter = (api: string) => `{ name: credit-meter, config: { apiType: ${api}, cost: 1 } }`
  return `version: 1
server: { listen: { host: 127.0.0.1, port: 0 }, drainTimeoutMs: 1000 }
admin: { listen: { host: 127.0.0.1, port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
log: { level: info, access: true }
projects:
  - id: ${PROJECT}
    plan: enterprise
    scopes: [zkpaas, rpc, mirror]
    credits: { allocation: 1000000, period: month }
    keys: [{ label: k, hash: ${hashCredential(KEY)} }]
upstreams:
  mirror: ${pool(m[0], m[1], '/api/v1')}
  mirror-hedged: ${pool(m[0], m[1], '/api/v1', ', hedge: { afterMs: 150 }')}
  mirror-eject: ${pool(m[0], m[1], '/api/v1', '', 3)}
  node: ${pool(n[0], n[1])}
  proof: ${pool(p[0], p[1])}
routes:
  - { name: mirror-get, methods: [GET], path: '/m/*rest', rewrite: '/*rest', upstream: mirror, apiType: MIRROR, plugins: [${auth('mirror')}, ${meter('MIRROR')}] }
  - { name: mirror-hedged, methods: [GET], path: '/h/*rest', rewrite: '/*rest', upstream: mirror-hedged, apiType: MIRROR, plugins: [${auth('mirror')}, ${meter('MIRROR')}] }
  - { name: mirror-eject, methods: [GET], path: '/e/*rest', rewrite: '/*rest', upstream: mirror-eject, apiType: MIRROR, plugins: [${auth('mirror')}, ${meter('MIRROR')}] }
  - { name: mirror-post, methods: [POST], path: '/mp/*rest', rewrite: '/*rest', upstream: mirror, apiType: MIRROR, plugins: [${auth('mirror')}, ${meter('MIRROR')}] }
  - { name: mirror-post-idempotent, methods: [POST], path: '/mi/*rest', rewrite: '/*rest', upstream: mirror, idempotent: true, apiType: MIRROR, plugins: [${auth('mirror')}, ${meter('MIRROR')}] }
  - { name: prove, methods: [POST], path: /prove, upstream: proof, apiType: PRIVNET_ZKPAAS, plugins: [${auth('zkpaas')}, ${meter('PRIVNET_ZKPAAS')}] }
  - name: rpc
    methods: [POST]
    path: /rpc
    apiType: PRIVNET_RPC
    errorFormat: jsonrpc
    handler: { name: jsonrpc, config: { upstream: node, form: post, allow: [system_chain, system_name], readOnly: [system_chain] } }
    plugins: [${auth('rpc')}, ${meter('PRIVNET_RPC')}]
`
}

const key = { 'x-api-key': KEY }
const json = { ...key, 'content-type': 'application/json' }

interface Measured {
  o: Outcome
  a: number
  b: number
  charged: number
}

t.test('faults × route families: client outcome, charge, upstream load', async (t) => {
  const mirror = [await startMirror({ network: 'testnet' }), await startMirror({ network: 'testnet' })]
  const nodes = [await startNodeRpc({}), await startNodeRpc({})]
  const proofs = [await startProofServer({ provingDelayMs: 0 }), await startProofServer({ provingDelayMs: 0 })]
  const m: [Side, Side] = [await side(mirror[0].url), await side(mirror[1].url)]
  const n: [Side, Side] = [await side(nodes[0].url), await side(nodes[1].url)]
  const p: [Side, Side] = [await side(proofs[0].url), await side(proofs[1].url)]
  const gw: GatewayProcess = await startGatewayProcess(config(m, n, p), { startTimeoutMs: 120_000 })
  t.teardown(async () => {
    await gw.stop()
    for (const s of [...m, ...n, ...p]) await s.close()
    await Promise.allSettled([...mirror, ...nodes, ...proofs].map((s) => s.close()))
  })

  const sides = { mirror: m, node: n, proof: p }
  async function measure(family: keyof typeof sides, send: () => Promise<Outcome>): Promise<Measured> {
    const [a, b] = sides[family]
    const before = { a: a.front.hits, b: b.front.hits, used: await creditsUsed(gw.adminUrl) }
    const o = await send()
    const used = await settledCreditsUsed(gw.adminUrl)
    return { o, a: a.front.hits - before.a, b: b.front.hits - before.b, charged: used - before.used }
  }
  async function withFault<T>(family: keyof typeof sides, fault: ProxyMode | '503' | '429' | 'slow-head', run: () => Promise<T>): Promise<T> {
    const [a] = sides[family]
    if (fault === '503' || fault === '429' || fault === 'slow-head') a.front.mode = fault
    else await a.proxy.setMode(fault)
    try {
      return await run()
    } finally {
      a.front.mode = 'pass'
      await a.proxy.setMode('pass')
      // Past any 429 back-off (1 s + 300 ms ramp) so the next case starts on target a again.
      await new Promise((r) => setTimeout(r, fault === '429' ? 1600 : 50))
    }
  }

  const getAccounts = () => call(gw.url, '/m/accounts?limit=2', { headers: key })
  const baseline = await measure('mirror', getAccounts)
  t.same([baseline.o.status, baseline.a, baseline.b, baseline.charged], [200, 1, 0, 1], 'no fault: target a answers, one credit')

  // Safe reads: failover to b, charged once, one extra attempt at most.
  const readCases: [string, ProxyMode | '503' | '429', number][] = [
    ['refuse', 'refuse', 0],
    ['reset-before-head', 'reset-before-head', 1],
    ['garbage', 'garbage', 0],
    ['503', '503', 1],
    ['429', '429', 1],
  ]
  for (const [label, fault, aHits] of readCases) {
    const r = await withFault('mirror', fault, () => measure('mirror', getAccounts))
    t.same({ status: r.o.status, charged: r.charged, a: r.a, b: r.b }, { status: 200, charged: 1, a: aHits, b: 1 }, `mirror GET, ${label}: retried on b, charged once`)
  }

  // 429 + Retry-After: target a gets nothing while it lasts, then traffic climbs back.
  await withFault('mirror', '429', async () => {
    const first = await measure('mirror', getAccounts)
    t.equal(first.o.status, 200, '429: answered by b')
    m[0].front.mode = 'pass'
    const during = await measure('mirror', async () => {
      let last!: Outcome
      for (let i = 0; i < 5; i++) last = await getAccounts()
      return last
    })
    t.same([during.a, during.b], [0, 5], 'during Retry-After nothing goes to a')
    await new Promise((r) => setTimeout(r, 1500))
    const after = await measure('mirror', getAccounts)
    t.equal(after.a, 1, 'after Retry-After and the ramp, a takes traffic again')
  })

  // Hedged reads: a slow head on a gets a second attempt on b after 150 ms.
  m[0].front.delayMs = 1500
  const hedged = await withFault('mirror', 'slow-head', () => measure('mirror', () => call(gw.url, '/h/accounts?limit=2', { headers: key })))
  t.same({ status: hedged.o.status, charged: hedged.charged, a: hedged.a, b: hedged.b }, { status: 200, charged: 1, a: 1, b: 1 }, 'slow head: hedged to b, charged once')
  t.ok(hedged.o.ms < 1200, `the hedge answered before the slow target (${hedged.o.ms} ms)`)
  const unhedged = await withFault('mirror', 'slow-head', () => measure('mirror', getAccounts))
  t.same([unhedged.o.status, unhedged.a, unhedged.b], [200, 1, 0], 'slow head on a route without hedging: waits, no extra load')

  // Writes: never sent twice.
  const postCall = () => call(gw.url, '/mp/contracts/call', { method: 'POST', headers: json, body: JSON.stringify({ data: '0x', to: '0x0000000000000000000000000000000000000001' }) })
  const post503 = await withFault('mirror', '503', () => measure('mirror', postCall))
  t.same({ status: post503.o.status, charged: post503.charged, a: post503.a, b: post503.b }, { status: 503, charged: 0, a: 1, b: 0 }, 'mirror POST, 503: passed through, not retried, not charged')
  const postReset = await withFault('mirror', 'reset-before-head', () => measure('mirror', postCall))
  t.same({ status: postReset.o.status, charged: postReset.charged, a: postReset.a, b: postReset.b }, { status: 502, charged: 0, a: 1, b: 0 }, 'mirror POST, reset: 502, not retried')
  const idem = await withFault('mirror', '503', () =>
    measure('mirror', () => call(gw.url, '/mi/contracts/call', { method: 'POST', headers: json, body: JSON.stringify({ data: '0x', to: '0x0000000000000000000000000000000000000001' }) })),
  )
  t.same({ a: idem.a, b: idem.b, charged: idem.charged }, { a: 1, b: 1, charged: idem.o.status === 200 ? 1 : 0 }, 'a POST route marked idempotent is retried')

  const prove = () => call(gw.url, '/prove', { method: 'POST', headers: { ...key, 'content-type': 'application/octet-stream' }, body: Buffer.from('payload') })
  const prove503 = await withFault('proof', '503', () => measure('proof', prove))
  t.same({ status: prove503.o.status, charged: prove503.charged, a: prove503.a, b: prove503.b }, { status: 503, charged: 0, a: 1, b: 0 }, 'prove, 503: never retried')
  const proveSlow = await withFault('proof', 'reset-before-head', () => measure('proof', prove))
  t.same([proveSlow.o.status, proveSlow.a, proveSlow.b, proveSlow.charged], [502, 1, 0, 0], 'prove, reset: 502, never retried')

  const rpc = (method: string) => () => call(gw.url, '/rpc', { method: 'POST', headers: json, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: [] }) })
  const readOnly = await withFault('node', '503', () => measure('node', rpc('system_chain')))
  t.same({ status: readOnly.o.status, charged: readOnly.charged, a: readOnly.a, b: readOnly.b }, { status: 200, charged: 1, a: 1, b: 1 }, 'JSON-RPC read-only method, 503: retried on b, charged once')
  t.match(readOnly.o.body, /"result"/)
  const write = await withFault('node', '503', () => measure('node', rpc('system_name')))
  t.same({ a: write.a, b: write.b, charged: write.charged }, { a: 1, b: 0, charged: 0 }, 'JSON-RPC method not marked read-only: sent once')
  const rpcRefuse = await withFault('node', 'refuse', () => measure('node', rpc('system_chain')))
  t.same([rpcRefuse.o.status, rpcRefuse.a, rpcRefuse.b, rpcRefuse.charged], [200, 0, 1, 1], 'JSON-RPC read-only, refused: b answers')

  // Outlier ejection: a refusing target leaves the choice after 3 failures; a half-open probe brings it back.
  await m[0].proxy.setMode('refuse')
  const refusedBefore = m[0].proxy.connections.refuse ?? 0
  let ok = 0
  const getEject = () => call(gw.url, '/e/accounts?limit=2', { headers: key })
  for (let i = 0; i < 10; i++) if ((await getEject()).status === 200) ok++
  t.equal(ok, 10, 'every read answered while a is down')
  t.ok((m[0].proxy.connections.refuse ?? 0) - refusedBefore <= 4, 'a was tried at most 3 times + one half-open probe, then ejected')
  await m[0].proxy.setMode('pass')
  await new Promise((r) => setTimeout(r, 1200))
  const back = await measure('mirror', getEject)
  t.equal(back.a, 1, 'after the ejection, the half-open probe succeeds and a takes traffic again')

  // Metrics per target: labelled by name, never URL.
  t.ok((await metric(gw.adminUrl, 'tollgate_upstream_target_retries_total', { upstream: 'mirror', target: 'b' })) >= 5, 'retries counted on b')
  t.ok((await metric(gw.adminUrl, 'tollgate_upstream_target_hedges_total', { upstream: 'mirror-hedged', target: 'b' })) >= 1, 'hedge counted')
  t.ok((await metric(gw.adminUrl, 'tollgate_upstream_target_ejections_total', { upstream: 'mirror-eject', target: 'a' })) >= 1, 'ejection counted')
  const text = await (await fetch(`${gw.adminUrl}/metrics`)).text()
  t.notMatch(text.split('\n').filter((l) => l.startsWith('tollgate_upstream_target')).join('\n'), /127\.0\.0\.1/, 'no URL in target labels')
  // Attempts in the access log.
  t.ok(gw.output.some((line) => line.includes('"attempts":2') && line.includes('"upstreamTarget":"b"')), 'access line records attempts and the target that answered')
})
