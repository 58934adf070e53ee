/**
 * Node JSON-RPC through a real gateway process running the routes of examples/config/privnet.yaml
 * in front of the stand-in node: validation, allow-list and neutral names, the composed
 * privnet_chainInfo, batches and notifications, the GET form, and gateway errors rendered as
 * JSON-RPC error objects.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { request } from 'undici'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { privnetConfig, privnetEnv } from '../helpers/privnet.ts'
import { startNodeRpc, type StandIn } from '../../examples/upstreams/node-rpc.ts'

const fresh = (name: string) => `rk_${name}_${randomBytes(10).toString('hex')}`
const KEY = { rpc: fresh('rpc'), zkOnly: fresh('zk'), tiny: fresh('tiny') }

let node: StandIn
let gw: GatewayProcess

t.before(async () => {
  node = await startNodeRpc()
  const projects = [
    { id: 'rpc', key: KEY.rpc, scopes: ['rpc'], allocation: 100000 },
    { id: 'zk-only', key: KEY.zkOnly, scopes: ['zkpaas'] },
    { id: 'tiny', key: KEY.tiny, scopes: ['rpc'], allocation: 1 },
  ]
  gw = await startGatewayProcess(privnetConfig(projects, { adminToken: fresh('admin') }), { env: privnetEnv({ node: node.url }) })
})
t.teardown(async () => {
  await gw?.stop('SIGKILL')
  await node?.close()
})
t.beforeEach(() => node.reset())

interface Answer {
  status: number
  text: string
  json(): any
}

async function send(method: 'GET' | 'POST', path: string, body?: string, contentType = 'application/json'): Promise<Answer> {
  const res = await request(gw.url + path, { method, body, headers: body === undefined ? {} : { 'content-type': contentType } })
  const text = await res.body.text()
  return { status: res.statusCode, text, json: () => JSON.parse(text) }
}
const rpc = (value: unknown, key = KEY.rpc) => send('POST', `/privnet/rpc/${key}`, typeof value === 'string' ? value : JSON.stringify(value))
const get = (query: string, key = KEY.rpc) => send('GET', `/privnet/rpc/${key}?${query}`)

/** What the stand-in node itself answers, to compare the composed chainInfo with. */
async function direct(method: string, params: unknown[] = []): Promise<unknown> {
  const res = await request(node.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) })
  return ((await res.body.json()) as any).result
}

t.test('single calls: allow-listed and neutral names, ids kept as sent', async (t) => {
  const chain = await rpc({ jsonrpc: '2.0', id: 1, method: 'system_chain', params: [] })
  t.equal(chain.status, 200)
  t.equal(chain.text, '{"jsonrpc":"2.0","id":1,"result":"privnet-preview"}')
  t.same((await rpc({ jsonrpc: '2.0', id: 'a-1', method: 'privnet_ledgerVersion', params: [] })).json(), { jsonrpc: '2.0', id: 'a-1', result: '=7.0.0' })
  t.same((await rpc({ jsonrpc: '2.0', id: null, method: 'privnet_apiVersions' })).json(), { jsonrpc: '2.0', id: null, result: [2] })
  t.same((await rpc({ jsonrpc: '2.0', id: -2.5, method: 'chain_getBlockHash', params: { number: 0 } })).json().id, -2.5, 'any JSON-RPC id works, whatever the node accepts')
  const sent = JSON.parse(node.requests.at(-1)!.body!.toString())
  t.same(sent, { jsonrpc: '2.0', method: 'chain_getBlockHash', params: { number: 0 }, id: 0 }, 'the node sees the gateway’s own id')
  t.notMatch(JSON.stringify(node.requests), KEY.rpc, 'the key never reaches the node')

  const err = await rpc({ jsonrpc: '2.0', id: 3, method: 'chain_getHeader', params: ['0x12'] })
  t.match(err.json(), { id: 3, error: { code: -32602, message: 'Invalid params' } }, "the node's own errors pass through")
})

t.test('privnet_chainInfo is composed from the node’s calls', async (t) => {
  const res = await rpc({ jsonrpc: '2.0', id: 9, method: 'privnet_chainInfo', params: [] })
  t.equal(res.status, 200)
  const { result } = res.json()
  t.same(result, {
    chain: 'privnet-preview',
    nodeName: 'privnet-node',
    nodeVersion: await direct('system_version'),
    properties: await direct('system_properties'),
    genesisHash: await direct('chain_getBlockHash', [0]),
    bestBlock: { number: 4096, hash: await direct('chain_getBlockHash', [4096]) },
    finalizedBlock: { number: 4094, hash: await direct('chain_getFinalizedHead') },
    ledgerVersion: '=7.0.0',
    apiVersions: [2],
  })
  const withParams = await rpc({ jsonrpc: '2.0', id: 10, method: 'privnet_chainInfo', params: [1] })
  t.same(withParams.json(), { jsonrpc: '2.0', id: 10, error: { code: -32602, message: 'Invalid params', data: 'privnet_chainInfo takes no params' } })
})

t.test('invalid calls: JSON-RPC errors, HTTP 200', async (t) => {
  const cases: [string, unknown, unknown][] = [
    ['wrong version', { jsonrpc: '1.0', id: 1, method: 'system_chain' }, { id: 1, error: { code: -32600, data: 'jsonrpc must be "2.0"' } }],
    ['no method', { jsonrpc: '2.0', id: 2 }, { id: 2, error: { code: -32600, data: 'method must be a non-empty string' } }],
    ['method not a string', { jsonrpc: '2.0', id: 3, method: 5 }, { id: 3, error: { code: -32600 } }],
    ['params a string', { jsonrpc: '2.0', id: 4, method: 'system_chain', params: 'x' }, { id: 4, error: { code: -32600, data: 'params must be an array or an object' } }],
    ['id an object', { jsonrpc: '2.0', id: {}, method: 'system_chain' }, { id: null, error: { code: -32600, data: 'id must be a number, a string or null' } }],
    ['not an object', 42, { id: null, error: { code: -32600, message: 'Invalid Request' } }],
    ['not allowed', { jsonrpc: '2.0', id: 5, method: 'author_submitExtrinsic', params: ['0x00'] }, { id: 5, error: { code: -32601, message: 'Method not found' } }],
    ['node name not offered', { jsonrpc: '2.0', id: 6, method: 'midnight_ledgerVersion', params: [] }, { id: 6, error: { code: -32601 } }],
    ['empty batch', [], { id: null, error: { code: -32600 } }],
  ]
  for (const [name, body, expected] of cases) {
    const res = await rpc(body)
    t.equal(res.status, 200, `${name}: status`)
    t.match(res.json(), { jsonrpc: '2.0', ...(expected as object) }, name)
  }
  t.equal(node.requests.length, 0, 'none reached the node')
})

t.test('request-level errors keep their HTTP status and read as JSON-RPC', async (t) => {
  const parse = await rpc('{"jsonrpc": "2.0", "id": 1,')
  t.equal(parse.status, 400)
  t.match(parse.json(), { jsonrpc: '2.0', id: null, error: { code: -32700, data: { code: 'invalid_json', status: 400 } } })
  const empty = await rpc('')
  t.match([empty.status, empty.json().error.code], [400, -32700])
  const media = await send('POST', `/privnet/rpc/${KEY.rpc}`, '{}', 'text/plain')
  t.match([media.status, media.json().error], [415, { code: -32600, data: { code: 'unsupported_media_type' } }])
  const big = await rpc(Array.from({ length: 101 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'system_chain' })))
  t.match([big.status, big.json().error], [400, { code: -32600, message: 'batch has 101 calls; the limit is 100', data: { code: 'batch_too_large' } }])
  t.equal((await rpc(Array.from({ length: 100 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'system_chain' })))).json().length, 100, '100 is fine')

  const badKey = await rpc({ jsonrpc: '2.0', id: 77, method: 'system_chain' }, 'nope')
  t.same([badKey.status, badKey.json()], [401, { jsonrpc: '2.0', id: null, error: { code: -32000, message: 'invalid API key', data: { code: 'invalid_api_key', status: 401 } } }])
  const scope = await rpc({ jsonrpc: '2.0', id: 78, method: 'system_chain' }, KEY.zkOnly)
  t.match([scope.status, scope.json().error], [403, { code: -32000, data: { code: 'forbidden' } }])
  t.equal((await rpc({ jsonrpc: '2.0', id: 1, method: 'system_chain' }, KEY.tiny)).status, 200)
  const broke = await rpc({ jsonrpc: '2.0', id: 79, method: 'system_chain' }, KEY.tiny)
  t.match([broke.status, broke.json()], [402, { jsonrpc: '2.0', error: { code: -32000, data: { code: 'credits_exhausted', status: 402 } } }])
})

t.test('batches: one answer per call in order, notifications unanswered', async (t) => {
  const res = await rpc([
    { jsonrpc: '2.0', id: 'a', method: 'system_chain' },
    { jsonrpc: '2.0', method: 'system_health' },
    { jsonrpc: '2.0', id: 'b', method: 'nope' },
    { jsonrpc: '2.0', method: 'nope_notification' },
    7,
    { jsonrpc: '2.0', id: 'c', method: 'privnet_chainInfo' },
    { jsonrpc: '2.0', id: 'd', method: 'privnet_ledgerVersion', params: [] },
  ])
  t.equal(res.status, 200)
  const answers = res.json()
  t.same(
    answers.map((a: any) => [a.id, a.error?.code ?? 'ok']),
    [['a', 'ok'], ['b', -32601], [null, -32600], ['c', 'ok'], ['d', 'ok']],
  )
  t.equal(answers[0].result, 'privnet-preview')
  t.equal(answers[3].result.chain, 'privnet-preview')
  t.equal(answers[4].result, '=7.0.0')
  const first = JSON.parse(node.requests[0].body!.toString())
  t.ok(first.some((call: any) => call.method === 'system_health' && !('id' in call)), 'the notification reached the node, without an id')

  node.reset()
  const notifications = await rpc([{ jsonrpc: '2.0', method: 'system_health' }, { jsonrpc: '2.0', method: 'system_chain', params: [] }])
  t.same([notifications.status, notifications.text], [204, ''], 'only notifications: no content')
  t.equal(node.requests.length, 1)
  const single = await rpc({ jsonrpc: '2.0', method: 'system_chain' })
  t.same([single.status, single.text], [204, ''])
  const ignored = await rpc({ jsonrpc: '2.0', method: 'author_rotateKeys' })
  t.same([ignored.status, ignored.text], [204, ''], 'a notification of a method not offered is dropped silently')
})

t.test('GET form: the call in the query, sent to the node as a POST', async (t) => {
  const chain = await get('method=system_chain&id=7')
  t.same([chain.status, chain.json()], [200, { jsonrpc: '2.0', id: 7, result: 'privnet-preview' }])
  const seen = node.requests[0]
  t.equal(seen.method, 'POST')
  t.equal(seen.path, '/')
  t.match(seen.headers['content-type'], /^application\/json/)
  t.same(JSON.parse(seen.body!.toString()), { jsonrpc: '2.0', method: 'system_chain', id: 0 })

  t.same((await get(`method=chain_getBlockHash&params=${encodeURIComponent('[0]')}&id=x1`)).json(), {
    jsonrpc: '2.0',
    id: 'x1',
    result: await direct('chain_getBlockHash', [0]),
  })
  t.equal((await get('method=privnet_chainInfo')).json().result.bestBlock.number, 4096, 'no id: answered with id null')
  t.equal((await get('method=privnet_chainInfo')).json().id, null)

  const cases: [string, number, string?][] = [
    ['id=1', -32600, 'query parameter method is required'],
    ['method=system_chain&params=[1,&id=2', -32700, 'query parameter params is not valid JSON'],
    ['method=system_chain&params=3&id=2', -32600, 'params must be an array or an object'],
    ['method=system_chain&foo=1', -32600],
    ['method=system_chain&method=system_name', -32600, 'query parameter method must appear once'],
    ['method=author_rotateKeys&id=2', -32601],
  ]
  for (const [query, code, data] of cases) {
    const res = await get(query)
    t.equal(res.status, 200, query)
    t.match(res.json().error, data ? { code, data } : { code }, query)
  }
  const badKey = await get('method=system_chain&id=5', 'nope')
  t.same([badKey.status, badKey.json().id, badKey.json().error.code], [401, 5, -32000], 'gateway errors carry the GET id')
})

t.test('a node that is down is a 502 JSON-RPC error', async (t) => {
  await node.close()
  const res = await rpc({ jsonrpc: '2.0', id: 1, method: 'system_chain' })
  t.match([res.status, res.json()], [502, { jsonrpc: '2.0', id: 1, error: { code: -32603, data: { code: 'upstream_unavailable' } } }])
})
