/**
 * Deeply nested JSON (issue 18, defect 1). V8 parses any depth but cannot serialise or walk 5,000
 * levels: such a body once reached the JSON-RPC sender, whose serialisation overflowed inside the
 * upstream call's error handling and was answered 502 upstream_unavailable, as if the node were
 * down. Every JSON the gateway reads is now refused past 64 levels with a 4xx, and a node answer
 * that nests too deep is a bad answer (502 upstream_bad_response), never a 500.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { request } from 'undici'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { privnetConfig, privnetEnv } from '../helpers/privnet.ts'
import { startNodeRpc, type StandIn } from '../../examples/upstreams/node-rpc.ts'

const KEY = `rk_deep_${randomBytes(10).toString('hex')}`
const DEEP = 5000
const deepArray = (depth: number) => '['.repeat(depth) + ']'.repeat(depth)

let node: StandIn
let gw: GatewayProcess

t.before(async () => {
  node = await startNodeRpc()
  gw = await startGatewayProcess(privnetConfig([{ id: 'deep', key: KEY, scopes: ['zkpaas', 'rpc'], allocation: 100000, features: { proveBatch: true } }], { adminToken: `adm_${randomBytes(8).toString('hex')}` }), {
    env: privnetEnv({ node: node.url }),
  })
})
t.teardown(async () => {
  await gw?.stop('SIGKILL')
  await node?.close()
})

async function send(method: 'GET' | 'POST', url: string, body?: string) {
  const res = await request(url, { method, body, headers: body === undefined ? {} : { 'content-type': 'application/json' } })
  const text = await res.body.text()
  return { status: res.statusCode, text, json: () => JSON.parse(text) }
}

t.test('POST: params nested 5,000 deep answer 400 -32700, not 502, and the node still answers', async (t) => {
  const body = `{"jsonrpc":"2.0","id":7,"method":"system_chain","params":${deepArray(DEEP)}}`
  t.ok(body.length > 10000, 'a 10 KB body')
  const direct = await send('POST', node.url, body)
  t.equal(direct.status, 200, 'the node itself accepts the body')
  const res = await send('POST', `${gw.url}/privnet/rpc/${KEY}`, body)
  t.equal(res.status, 400)
  t.match(res.json(), { jsonrpc: '2.0', error: { code: -32700, message: /more than 64 levels deep/, data: { code: 'invalid_json', status: 400 } } })
  const ok = await send('POST', `${gw.url}/privnet/rpc/${KEY}`, '{"jsonrpc":"2.0","id":8,"method":"system_chain","params":[[[[1]]]]}')
  t.equal(ok.status, 200, 'ordinary nesting still goes through')
  t.notOk(gw.output.some((line) => /upstream_unavailable|Maximum call stack/.test(line)), 'nothing reports the node down or a blown stack')
})

t.test('GET: params nested 5,000 deep answer -32700 naming the parameter', async (t) => {
  const res = await send('GET', `${gw.url}/privnet/rpc/${KEY}?method=system_chain&id=3&params=${deepArray(DEEP)}`)
  t.equal(res.status, 200, 'a call-level error, as for any invalid params JSON')
  t.match(res.json(), { id: 3, error: { code: -32700, data: /query parameter params nests .* more than 64 levels deep/ } })
})

t.test('batches of the other APIs: a deep body is 400 invalid_json', async (t) => {
  const rpcBatch = await send('POST', `${gw.url}/privnet/rpc/${KEY}`, `[{"jsonrpc":"2.0","id":1,"method":"system_chain","params":${deepArray(DEEP)}}]`)
  t.equal(rpcBatch.status, 400)
  const proofs = await send('POST', `${gw.url}/privnet/zkpaas/${KEY}/prove-batch`, `{"proofs":[${deepArray(DEEP)}]}`)
  t.equal(proofs.status, 400)
  t.match(proofs.json(), { error: { code: 'invalid_json', message: /request body nests arrays or objects more than 64 levels deep/ } })
})

t.test('a node answering JSON nested past the bound is a bad answer (502), not a crash', async (t) => {
  const deepNode: Server = createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(`{"jsonrpc":"2.0","id":0,"result":${deepArray(DEEP)}}`)
    })
  })
  await new Promise<void>((done) => deepNode.listen(0, '127.0.0.1', done))
  const nodeUrl = `http://127.0.0.1:${(deepNode.address() as AddressInfo).port}`
  const second = await startGatewayProcess(privnetConfig([{ id: 'deep', key: KEY, scopes: ['rpc'], allocation: 100 }], { adminToken: `adm_${randomBytes(8).toString('hex')}` }), {
    env: privnetEnv({ node: nodeUrl }),
  })
  t.teardown(async () => {
    await second.stop('SIGKILL')
    await new Promise((done) => deepNode.close(done))
  })
  const res = await send('POST', `${second.url}/privnet/rpc/${KEY}`, '{"jsonrpc":"2.0","id":1,"method":"system_chain","params":[]}')
  t.equal(res.status, 502)
  t.match(res.json(), { id: 1, error: { code: -32603, data: { code: 'upstream_bad_response' }, message: /answered JSON that nests/ } })
})
