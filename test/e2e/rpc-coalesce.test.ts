/**
 * Coalescing of identical read-only JSON-RPC requests, end to end: a real gateway process in front
 * of the stand-in node (answers held 800 ms so calls overlap). N identical concurrent reads make
 * one node request, each client gets its own id back and is charged once; a method not marked
 * readOnly (a write, as far as the gateway knows) is never coalesced; different params are not
 * the same request; a client that goes away does not take the others' answer with it.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { request } from 'undici'
import { hashCredential } from '../../core/projects/projects.ts'
import { startNodeRpc, type StandIn } from '../../examples/upstreams/node-rpc.ts'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { creditsUsed, metricValue } from '../helpers/mirror.ts'

const fresh = (name: string) => `rc_${name}_${randomBytes(10).toString('hex')}`
const PROJECTS = ['herd', 'write', 'mixed', 'leave', 'off'] as const
const KEY = Object.fromEntries(PROJECTS.map((p) => [p, fresh(p)])) as Record<(typeof PROJECTS)[number], string>
const ADMIN = fresh('admin')
const LATENCY_MS = 800
const READ_ONLY = ['system_chain', 'system_name', 'system_version', 'system_properties', 'chain_getHeader', 'chain_getBlockHash', 'midnight_ledgerVersion', 'midnight_apiVersions']

function config(nodeUrl: string): string {
  const projects = PROJECTS.map((id) => `  - { id: ${id}, scopes: [rpc], credits: { allocation: 100000 }, keys: [{ hash: ${hashCredential(KEY[id])} }] }`)
  const route = (name: string, method: string, form: string, coalesce: boolean, path = '/rpc/:apiKey') => `  - name: ${name}
    methods: [${method}]
    path: ${path}
    apiType: PRIVNET_RPC
    errorFormat: jsonrpc
    handler:
      name: jsonrpc
      config:
        upstream: node
        form: ${form}
        coalesce: ${coalesce}
        allow: [system_chain, system_name, system_version, system_properties, system_health, chain_getHeader, chain_getBlockHash]
        aliases: { privnet_ledgerVersion: midnight_ledgerVersion }
        readOnly: [${READ_ONLY.join(', ')}]
        chainInfo: { method: privnet_chainInfo }
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: rpc } }
      - { name: credit-meter, config: { apiType: PRIVNET_RPC, cost: 1 } }`
  return `version: 1
server: { listen: { port: 0 } }
admin: { listen: { port: 0 }, tokenHash: ${hashCredential(ADMIN)} }
store: { dataDir: '{{DIR}}/data' }
log: { access: false }
watch: false
projects:
${projects.join('\n')}
upstreams:
  node: { url: '${nodeUrl}', connections: 64 }
routes:
${route('rpc', 'POST', 'post', true)}
${route('rpc-get', 'GET', 'get', true)}
${route('rpc-off', 'POST', 'post', false, '/off/rpc/:apiKey')}
`
}

let node: StandIn
let gw: GatewayProcess

t.before(async () => {
  node = await startNodeRpc({ latencyMs: LATENCY_MS })
  gw = await startGatewayProcess(config(node.url), { startTimeoutMs: 90_000 })
})
t.teardown(async () => {
  await gw?.stop()
  await node?.close()
})
t.beforeEach(() => node.reset())

const post = async (body: unknown, key: string, path = '/rpc', signal?: AbortSignal) => {
  const res = await request(`${gw.url}${path}/${key}`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' }, signal })
  return { status: res.statusCode, json: (await res.body.json()) as any }
}
const used = (project: string) => creditsUsed(gw.adminUrl, ADMIN, project)
const coalescedOn = (route: string) => metricValue(gw.adminUrl, 'tollgate_coalesced_requests_total', { route })

t.test('20 identical read-only calls: one node request, 20 answers each with its own id, 20 charges', async (t) => {
  const before = await coalescedOn('rpc')
  const poolBefore = await metricValue(gw.adminUrl, 'tollgate_upstream_coalesced_total', { upstream: 'node' })
  const ids = Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? i : `client-${i}`))
  const answers = await Promise.all(ids.map((id) => post({ jsonrpc: '2.0', id, method: 'chain_getBlockHash', params: [7] }, KEY.herd)))
  t.equal(node.requests.length, 1, 'one node request')
  const hash = answers[0].json.result
  t.match(hash, /^0x[0-9a-f]{64}$/)
  answers.forEach((answer, i) => {
    t.equal(answer.status, 200)
    t.same(answer.json, { jsonrpc: '2.0', id: ids[i], result: hash }, `client ${i} gets its own id`)
  })
  t.equal(await used('herd'), 20, 'each coalesced request is charged as one request')
  t.equal((await coalescedOn('rpc')) - before, 19, 'the metric counts the 19 that joined')
  t.equal((await metricValue(gw.adminUrl, 'tollgate_upstream_coalesced_total', { upstream: 'node' })) - poolBefore, 19, 'so does the pool (the dashboard panel shows it beside the targets)')
})

t.test('the GET form and an alias coalesce on what is sent to the node', async (t) => {
  const viaGet = Array.from({ length: 5 }, (_, i) =>
    request(`${gw.url}/rpc/${KEY.herd}?method=privnet_ledgerVersion&id=${i}`).then(async (r) => (await r.body.json()) as any))
  const viaPost = Array.from({ length: 5 }, (_, i) => post({ jsonrpc: '2.0', id: 100 + i, method: 'privnet_ledgerVersion' }, KEY.herd).then((a) => a.json))
  const answers = await Promise.all([...viaGet, ...viaPost])
  t.equal(node.requests.length, 1, 'both routes share the node request (same upstream, same body)')
  t.same(answers.map((a) => a.id), [0, 1, 2, 3, 4, 100, 101, 102, 103, 104], 'the GET form gives numeric ids back as sent')
  t.same(new Set(answers.map((a) => a.result)), new Set(['=7.0.0']))
})

t.test('a method not marked readOnly is never coalesced', async (t) => {
  const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => post({ jsonrpc: '2.0', id: i, method: 'system_health', params: [] }, KEY.write)))
  t.equal(node.requests.length, 6, 'one node request per client')
  answers.forEach((answer, i) => t.same([answer.json.id, typeof answer.json.result], [i, 'object']))
  // A batch with one write in it is not coalesced either, even beside reads.
  node.reset()
  const batch = [{ jsonrpc: '2.0', id: 1, method: 'system_chain' }, { jsonrpc: '2.0', id: 2, method: 'system_health' }]
  await Promise.all([post(batch, KEY.write), post(batch, KEY.write), post(batch, KEY.write)])
  t.equal(node.requests.length, 3)
  t.equal(await used('write'), 9)
})

t.test('different params or methods are different requests; identical batches coalesce', async (t) => {
  await Promise.all([1, 2, 3].map((n) => post({ jsonrpc: '2.0', id: 1, method: 'chain_getBlockHash', params: [n] }, KEY.mixed)))
  t.equal(node.requests.length, 3, 'one per distinct params')
  node.reset()
  const batch = (a: number, b: string) => [{ jsonrpc: '2.0', id: a, method: 'system_chain' }, { jsonrpc: '2.0', id: b, method: 'system_name' }]
  const answers = await Promise.all([post(batch(1, 'x'), KEY.mixed), post(batch(2, 'y'), KEY.mixed), post(batch(3, 'z'), KEY.mixed)])
  t.equal(node.requests.length, 1, 'identical batches (ids aside) make one node request')
  t.same(answers.map((a) => a.json.map((e: any) => e.id)), [[1, 'x'], [2, 'y'], [3, 'z']])
  t.same(answers[2].json.map((e: any) => e.result), ['privnet-preview', 'privnet-node'])
})

t.test('coalesce: false sends every request', async (t) => {
  await Promise.all(Array.from({ length: 4 }, (_, i) => post({ jsonrpc: '2.0', id: i, method: 'system_chain' }, KEY.off, '/off/rpc')))
  t.equal(node.requests.length, 4)
})

t.test('a client that goes away: the others still get the answer from the one node request', async (t) => {
  const leaving = new AbortController()
  const first = post({ jsonrpc: '2.0', id: 'gone', method: 'system_version' }, KEY.leave, '/rpc', leaving.signal).catch((error: Error) => error)
  while (node.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 10))
  const others = Array.from({ length: 4 }, (_, i) => post({ jsonrpc: '2.0', id: i, method: 'system_version' }, KEY.leave))
  await new Promise((resolve) => setTimeout(resolve, 50))
  leaving.abort()
  const answers = await Promise.all(others)
  t.ok((await first) instanceof Error, 'the first client went away')
  t.same(answers.map((a) => [a.status, a.json.id, typeof a.json.result]), [0, 1, 2, 3].map((i) => [200, i, 'string']))
  t.equal(node.requests.length, 1, 'the exchange carried on for the clients still waiting')
})
