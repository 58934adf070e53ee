import t from 'tap'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { startProofServer } from '../../../examples/upstreams/proof-server.ts'
import { startNodeRpc } from '../../../examples/upstreams/node-rpc.ts'
import {
  buildCheckPayload,
  buildKPayload,
  buildProvePayload,
  buildProveTxPayload,
  PROOF_TAGS,
} from '../../../examples/upstreams/tagged.ts'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))

async function call(url: string, init: RequestInit = {}) {
  const res = await fetch(url, init)
  const bytes = Buffer.from(await res.arrayBuffer())
  return { status: res.status, type: res.headers.get('content-type'), bytes, text: bytes.toString('utf8') }
}

const post = (url: string, body: Buffer | string, headers: Record<string, string> = {}) =>
  call(url, { method: 'POST', body, headers })

t.test('proof server: read-only routes answer like proof server 7.0.0', async (t) => {
  const server = await startProofServer()
  t.teardown(() => server.close())
  for (const path of ['/', '/health']) {
    const res = await call(server.url + path)
    t.equal(res.status, 200)
    t.equal(res.type, 'application/json')
    const body = JSON.parse(res.text)
    t.equal(body.status, 'ok')
    t.match(body.timestamp, /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{1,9} \+00:00:00$/)
  }
  const ready = await call(`${server.url}/ready`)
  t.equal(ready.status, 200)
  t.match(JSON.parse(ready.text), { status: 'ok', jobsProcessing: 0, jobsPending: 0, jobCapacity: 0 })
  t.equal((await call(`${server.url}/version`)).text, '7.0.0')
  const versions = await call(`${server.url}/proof-versions`)
  t.equal(versions.text, '["V2"]')
  t.equal(versions.type, 'text/plain; charset=utf-8')

  const wrong: Array<[string, string]> = [
    ['GET', '/prove'], ['GET', '/check'], ['GET', '/prove-tx'], ['GET', '/k'], ['POST', '/health'],
    ['GET', '/fetch-params/10'], ['GET', '/nope'], ['POST', '/prove-batch'],
  ]
  for (const [method, path] of wrong) {
    const res = await call(server.url + path, { method, body: method === 'POST' ? 'x' : undefined })
    t.equal(res.status, 404, `${method} ${path} is 404`)
    t.equal(res.text, '')
  }
})

t.test('proof server: tagged-header checks give the upstream error texts', async (t) => {
  const server = await startProofServer()
  t.teardown(() => server.close())
  const prove = `${server.url}/prove`
  let res = await post(prove, '{"a":1}', { 'content-type': 'application/json' })
  t.equal(res.status, 400)
  t.equal(res.type, 'text/plain; charset=utf-8')
  t.equal(res.text, `expected header tag '${PROOF_TAGS.prove.request}', got '��a�:1�'`)

  res = await post(prove, '')
  t.equal(res.text, `expected header tag '${PROOF_TAGS.prove.request}', got ''`)

  // A /prove payload sent to /check: the echo is cut at the expected header's length.
  const checkHeader = PROOF_TAGS.check.request
  res = await post(`${server.url}/check`, buildProvePayload(Buffer.from('x')))
  t.equal(res.status, 400)
  t.equal(res.text, `expected header tag '${checkHeader}', got '${PROOF_TAGS.prove.request.slice(0, checkHeader.length)}'`)

  res = await post(`${server.url}/prove-tx`, Buffer.from('midnight:transaction[v8] é\x00'))
  t.equal(res.text, `expected header tag '${PROOF_TAGS.proveTx.request}', got 'midnight:transaction[v8]���'`)

  const header = Buffer.from(PROOF_TAGS.prove.request)
  res = await post(prove, Buffer.concat([header, Buffer.from([0]), Buffer.from('x')]))
  t.equal(res.text, 'invalid old discriminant for ProofPreimageVersioned: 0')
  res = await post(`${server.url}/check`, Buffer.concat([Buffer.from(checkHeader), Buffer.from([7, 1])]))
  t.equal(res.text, 'unknown discriminant for ProofPreimageVersioned: 7')
  for (const body of [header, Buffer.concat([header, Buffer.from([1])])]) {
    res = await post(prove, body)
    t.same([res.status, res.text], [400, 'failed to fill whole buffer'], 'a body cut short after the header')
  }
  res = await post(`${server.url}/prove-tx`, Buffer.from(PROOF_TAGS.proveTx.request))
  t.same([res.status, res.text], [400, 'failed to fill whole buffer'])
})

t.test('proof server: valid payloads get tagged answers derived from the input', async (t) => {
  const server = await startProofServer({ provingDelayMs: 20 })
  t.teardown(() => server.close())
  const a = await post(`${server.url}/prove`, buildProvePayload(Buffer.from('preimage-a')))
  const a2 = await post(`${server.url}/prove`, buildProvePayload(Buffer.from('preimage-a')))
  const b = await post(`${server.url}/prove`, buildProvePayload(Buffer.from('preimage-b')))
  t.equal(a.status, 200)
  t.equal(a.type, null, 'raw bytes, no content type, as upstream')
  const proofHeader = Buffer.from(PROOF_TAGS.prove.response)
  t.same(a.bytes.subarray(0, proofHeader.length), proofHeader)
  t.equal(a.bytes[proofHeader.length], 0x01, 'ProofVersioned::V2')
  t.equal(a.bytes.length, proofHeader.length + 1 + 32)
  t.same(a.bytes, a2.bytes, 'same input, same proof')
  t.notSame(a.bytes, b.bytes, 'different inputs, different proofs')

  const check = await post(`${server.url}/check`, buildCheckPayload(Buffer.from('preimage-a')))
  t.equal(check.status, 200)
  t.ok(check.bytes.toString('latin1').startsWith(PROOF_TAGS.check.response))
  const tx = await post(`${server.url}/prove-tx`, buildProveTxPayload(Buffer.from('tx-body')), {
    'content-type': 'application/octet-stream',
  })
  t.equal(tx.status, 200)
  t.ok(tx.bytes.toString('latin1').startsWith(PROOF_TAGS.proveTx.response))

  const k = await post(`${server.url}/k`, buildKPayload(Buffer.from('ir')))
  t.equal(k.status, 200)
  t.ok(Number(k.text) >= 10 && Number(k.text) <= 15, `k=${k.text}`)
  for (const body of [Buffer.from('nonsense'), Buffer.from(PROOF_TAGS.k.request)]) {
    const bad = await post(`${server.url}/k`, body)
    t.same([bad.status, bad.text], [400, 'Unsupported ZKIR version'])
  }
})

t.test('proof server: failure hooks and request recording', async (t) => {
  const server = await startProofServer()
  t.teardown(() => server.close())
  let res = await post(`${server.url}/prove`, buildProvePayload(Buffer.from('FAIL500 please')))
  t.same([res.status, res.text, res.type], [500, 'internal error', 'text/plain; charset=utf-8'])
  res = await post(`${server.url}/check`, buildCheckPayload(Buffer.from('BADINPUT')))
  t.same([res.status, res.text], [400, 'bad input'])
  res = await post(`${server.url}/prove-tx`, buildProveTxPayload(Buffer.from('FAIL500')))
  t.same([res.status, res.text], [500, 'internal error'])

  server.reset()
  const payload = buildProvePayload(Buffer.from('recorded'))
  await post(`${server.url}/prove?x=1`, payload, { 'x-trace': 'abc' })
  t.equal(server.requests.length, 1)
  const [seen] = server.requests
  t.match(seen, { method: 'POST', path: '/prove?x=1', bodyBytes: payload.length })
  t.equal(seen.headers['x-trace'], 'abc')
  t.same(seen.body, payload)
  t.equal(seen.headers['x-api-key'], undefined)
})

t.test('proof server: job capacity gives 503 busy and 429 Job Queue full', async (t) => {
  // Jobs never finish during the test; close() drops them.
  const server = await startProofServer({ provingDelayMs: 600_000, workers: 1, jobCapacity: 1 })
  const inFlight = [1, 2].map((n) => post(`${server.url}/prove`, buildProvePayload(Buffer.from(`job-${n}`))).catch(() => null))
  let ready = await call(`${server.url}/ready`)
  while (JSON.parse(ready.text).jobsPending < 1) {
    await new Promise((resolve) => setTimeout(resolve, 10))
    ready = await call(`${server.url}/ready`)
  }
  t.equal(ready.status, 503)
  t.match(JSON.parse(ready.text), { status: 'busy', jobsProcessing: 1, jobsPending: 1, jobCapacity: 1 })
  const refused = await post(`${server.url}/prove`, buildProvePayload(Buffer.from('job-3')))
  t.same([refused.status, refused.text], [429, 'Job Queue full'])
  const badHeader = await post(`${server.url}/prove`, 'junk')
  t.equal(badHeader.status, 400, 'parsing comes before the queue')
  await server.close()
  await Promise.all(inFlight)
})

const rpcHeaders = { 'content-type': 'application/json' }

t.test('node rpc: methods answer in jsonrpsee shapes', async (t) => {
  const node = await startNodeRpc({ bestNumber: 100 })
  t.teardown(() => node.close())
  const rpc = async (method: string, params?: unknown, id: unknown = 1) => {
    const res = await post(node.url, JSON.stringify({ jsonrpc: '2.0', id, method, params }), rpcHeaders)
    return JSON.parse(res.text)
  }
  const first = await post(node.url, '{"jsonrpc":"2.0","method":"system_chain","params":[],"id":7}', rpcHeaders)
  t.equal(first.status, 200)
  t.equal(first.type, 'application/json; charset=utf-8')
  t.equal(first.text, '{"jsonrpc":"2.0","id":7,"result":"privnet-preview"}')

  t.type((await rpc('system_name')).result, 'string')
  t.type((await rpc('system_version')).result, 'string')
  t.type((await rpc('system_properties')).result, 'object')
  t.same((await rpc('system_health', [])).result, { peers: 3, isSyncing: false, shouldHavePeers: true })
  t.equal((await rpc('midnight_ledgerVersion', [])).result, '=7.0.0')
  t.same((await rpc('midnight_apiVersions', [])).result, [2])
  t.equal((await rpc('chain_getHeader')).result.number, '0x64', 'best header by default')
  const genesis = (await rpc('chain_getBlockHash', [0])).result
  t.match(genesis, /^0x[0-9a-f]{64}$/)
  t.equal((await rpc('chain_getBlockHash', { number: '0x0' })).result, genesis, 'named params, hex number')
  const header0 = (await rpc('chain_getHeader', [genesis])).result
  t.match(header0, { number: '0x0', parentHash: `0x${'0'.repeat(64)}`, digest: { logs: [] } })
  t.equal((await rpc('chain_getBlockHash', [101])).result, null, 'beyond the best block')
  t.same((await rpc('chain_getBlockHash', [[1, 1]])).result.length, 2, 'list of numbers')
  const finalized = (await rpc('chain_getFinalizedHead')).result
  t.equal((await rpc('chain_getHeader', [finalized])).result.number, '0x62')
  t.equal((await rpc('chain_getHeader', [`0x${'a'.repeat(64)}`])).result, null, 'unknown block')
  const methods = (await rpc('rpc_methods')).result.methods
  t.ok(methods.includes('midnight_ledgerVersion') && methods.includes('chain_getHeader'))

  t.same(await rpc('privnet_chainInfo', [], 'x'), {
    jsonrpc: '2.0', id: 'x', error: { code: -32601, message: 'Method not found' },
  })
  const badParams = await rpc('chain_getHeader', ['zz'])
  t.match(badParams, { id: 1, error: { code: -32602, message: 'Invalid params', data: String } })
  t.match(await rpc('midnight_ledgerVersion', [`0x${'b'.repeat(64)}`]), { error: { code: -32602 } })
})

t.test('node rpc: protocol errors, notifications and batches', async (t) => {
  const node = await startNodeRpc({ maxRequestBytes: 1024 })
  t.teardown(() => node.close())
  const send = (body: string) => post(node.url, body, rpcHeaders)
  const parseError = '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}'
  t.same(await send('{ ').then((r) => [r.status, r.text]), [200, parseError])
  t.same(await send('{}').then((r) => [r.status, r.text]), [200, parseError])
  t.same(await send('garbage').then((r) => [r.status, r.text]), [400, parseError])
  t.same(await send('').then((r) => [r.status, r.text]), [400, parseError])
  t.equal((await send('{"method":"system_chain","id":3}')).text,
    '{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"Invalid request"}}')
  t.equal((await send('[]')).text, '{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request"}}')

  const notification = await send('{"jsonrpc":"2.0","method":"system_chain","params":[]}')
  t.same([notification.status, notification.text], [200, ''])
  const allNotifications = await send('[{"jsonrpc":"2.0","method":"system_chain"},{"jsonrpc":"2.0","method":"nope"}]')
  t.same([allNotifications.status, allNotifications.text], [200, ''])

  const mixed = await send(JSON.stringify([
    { jsonrpc: '2.0', id: 1, method: 'midnight_apiVersions', params: [] },
    { jsonrpc: '2.0', method: 'system_chain' },
    { foo: 'boo' },
    { jsonrpc: '2.0', id: '5', method: 'nope' },
  ]))
  t.equal(mixed.text, '[{"jsonrpc":"2.0","id":1,"result":[2]},' +
    '{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request"}},' +
    '{"jsonrpc":"2.0","id":"5","error":{"code":-32601,"message":"Method not found"}}]')

  const tooBig = await send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'x', params: ['a'.repeat(2000)] }))
  t.equal(tooBig.status, 413)
  t.match(JSON.parse(tooBig.text), { id: null, error: { code: -32007, message: 'Request is too big' } })

  const wrongType = await post(node.url, '{"jsonrpc":"2.0","id":1,"method":"system_chain"}', { 'content-type': 'text/plain' })
  t.same([wrongType.status, wrongType.type], [415, 'text/plain'])
  t.match(wrongType.text, /Content-Type: application\/json is required/)
  const get = await call(node.url)
  t.same([get.status, get.text], [405, 'Used HTTP Method is not allowed. POST is required\n'])

  const health = await call(`${node.url}/health`)
  t.same([health.status, health.type], [200, 'application/json; charset=utf-8'])
  t.same(JSON.parse(health.text), { peers: 3, isSyncing: false, shouldHavePeers: true })
  t.equal((await call(`${node.url}/health/readiness`)).status, 200)
  t.equal((await post(`${node.url}/health`, '{}', rpcHeaders)).status, 405)
})

t.test('stand-ins run standalone, print their URL and stop on SIGTERM', async (t) => {
  for (const script of ['examples/upstreams/proof-server.ts', 'examples/upstreams/node-rpc.ts']) {
    const child = spawn(process.execPath, ['--import', 'tsx', script, '--port', '0', '--delay', '0'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    let out = ''
    for await (const chunk of child.stdout) {
      out += chunk
      if (out.includes('\n')) break
    }
    const url = /listening on (http:\/\/\S+)/.exec(out)?.[1]
    t.ok(url, `${script} printed its URL`)
    const res = await call(script.includes('proof') ? `${url}/version` : `${url}/health`)
    t.equal(res.status, 200)
    child.kill('SIGTERM')
    const [code] = await once(child, 'exit')
    t.equal(code, 0, `${script} exited cleanly`)
  }
})
