/**
 * ZK-PaaS through a real gateway process running the routes of examples/config/privnet.yaml, in
 * front of three stand-in proof servers (default, TEE and relay pools): binary validation, the
 * pass-through probes, prove-batch with its caps, per-item failures and per-proof credits, and the
 * project feature gates, including a toggle applied by a real config reload.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { Readable } from 'node:stream'
import { Agent, request } from 'undici'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { privnetConfig, privnetEnv, type TestProject } from '../helpers/privnet.ts'
import { startProofServer, type StandIn } from '../../examples/upstreams/proof-server.ts'
import { buildCheckPayload, buildProvePayload, buildProveTxPayload, digest, headerMismatch, PROOF_TAGS } from '../../examples/upstreams/tagged.ts'

const fresh = (name: string) => `pk_${name}_${randomBytes(10).toString('hex')}`
const ADMIN = fresh('admin')
const KEY = { full: fresh('full'), plain: fresh('plain'), relay: fresh('relay'), standard: fresh('std'), toggle: fresh('toggle') }
const MAX_BODY = 65536

function projects(toggle: TestProject['features']): TestProject[] {
  return [
    { id: 'full', key: KEY.full, features: { proveBatch: true, sponsoredWallet: true, tee: true } },
    { id: 'plain', key: KEY.plain },
    { id: 'relay', key: KEY.relay, features: { relayToConfidentialSpace: true, tee: true, proveBatch: true } },
    { id: 'standard', key: KEY.standard, plan: 'standard' },
    { id: 'toggle', key: KEY.toggle, features: toggle },
  ]
}

let proof: StandIn, tee: StandIn, relay: StandIn
let gw: GatewayProcess

t.before(async () => {
  ;[proof, tee, relay] = await Promise.all([startProofServer(), startProofServer(), startProofServer()])
  gw = await startGatewayProcess(privnetConfig(projects({}), { adminToken: ADMIN, maxBodyBytes: MAX_BODY }), {
    env: privnetEnv({ proof: proof.url, tee: tee.url, relay: relay.url }),
  })
})
t.teardown(async () => {
  await gw?.stop('SIGKILL')
  await Promise.all([proof, tee, relay].map((s) => s?.close()))
})
t.beforeEach(() => [proof, tee, relay].forEach((s) => s.reset()))

interface Answer {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: Buffer
  json(): any
}

async function call(method: 'GET' | 'POST', path: string, body?: Buffer | string, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await request(gw.url + path, { method, body, headers })
  const bytes = Buffer.from(await res.body.arrayBuffer())
  return { status: res.statusCode, headers: res.headers, body: bytes, json: () => JSON.parse(bytes.toString()) }
}
const octet = { 'content-type': 'application/octet-stream' }
const postBinary = (path: string, payload: Buffer | string, headers: Record<string, string> = {}) => call('POST', path, payload, { ...octet, ...headers })
const postJson = (path: string, value: unknown) => call('POST', path, JSON.stringify(value), { 'content-type': 'application/json' })

async function remaining(project: string): Promise<number> {
  const res = await request(`${gw.adminUrl}/admin/projects/${project}/usage`, { headers: { authorization: `Bearer ${ADMIN}` } })
  return ((await res.body.json()) as any).balance.remaining
}

const proofOf = (payload: Buffer) => Buffer.concat([Buffer.from(PROOF_TAGS.prove.response), Buffer.from([1]), digest(payload)]).toString('base64')

t.test('single proofs pass through with the key kept out of the upstream request', async (t) => {
  const payload = buildProveTxPayload(Buffer.from('tx-body'))
  const res = await postBinary(`/privnet/zkpaas/${KEY.full}/prove-tx`, payload)
  t.equal(res.status, 200)
  t.ok(res.body.subarray(0, PROOF_TAGS.proveTx.response.length).equals(Buffer.from(PROOF_TAGS.proveTx.response)))
  const seen = proof.requests[0]
  t.equal(seen.path, '/prove-tx')
  t.ok(seen.body?.equals(payload), 'the payload arrives unchanged')
  t.notMatch(JSON.stringify(seen), KEY.full, 'the API key never reaches the proof server')

  const prove = buildProvePayload(Buffer.from('preimage'))
  const proved = await postBinary(`/privnet/zkpaas/${KEY.full}/prove`, prove)
  t.equal(proved.status, 200)
  t.equal(proved.body.toString('base64'), proofOf(prove))
  const checked = await postBinary(`/privnet/zkpaas/${KEY.full}/check`, buildCheckPayload(Buffer.alloc(32)))
  t.equal(checked.status, 200)
  t.ok(checked.body.toString('latin1').startsWith(PROOF_TAGS.check.response))
})

t.test('binary validation refuses before the proof server, in its own words', async (t) => {
  const path = `/privnet/zkpaas/${KEY.full}/prove-tx`
  const json = '{"tx":"00"}'
  const cases: [string, Promise<Answer>, number, string, string?][] = [
    ['json content type', call('POST', path, buildProveTxPayload(Buffer.from('x')), { 'content-type': 'application/json' }), 415, 'unsupported_media_type'],
    ['no content type', call('POST', path, buildProveTxPayload(Buffer.from('x'))), 415, 'unsupported_media_type'],
    ['json body', postBinary(path, json), 400, 'invalid_tagged_header', headerMismatch(Buffer.from(json), PROOF_TAGS.proveTx.request)!],
    ['empty body', postBinary(path, ''), 400, 'invalid_tagged_header', `expected header tag '${PROOF_TAGS.proveTx.request}', got ''`],
    ['older ledger', postBinary(path, PROOF_TAGS.proveTx.request.replace('[v9]', '[v8]') + 'x'), 400, 'header_tag_mismatch'],
    ['a /prove payload', postBinary(path, buildProvePayload(Buffer.from('x'))), 400, 'header_tag_mismatch'],
    ['no second colon', postBinary(path, 'midnight:' + 'a'.repeat(600)), 400, 'invalid_tagged_header'],
    ['header only', postBinary(path, PROOF_TAGS.proveTx.request), 400, 'truncated_payload', 'failed to fill whole buffer'],
    ['too large', postBinary(path, buildProveTxPayload(Buffer.alloc(MAX_BODY))), 413, 'body_too_large'],
  ]
  for (const [name, pending, status, code, message] of cases) {
    const res = await pending
    t.equal(res.status, status, `${name}: status`)
    t.equal(res.json().error.code, code, `${name}: code`)
    if (message) t.equal(res.json().error.message, message, `${name}: message`)
  }

  const prove = `/privnet/zkpaas/${KEY.full}/prove`
  const header = Buffer.from(PROOF_TAGS.prove.request)
  const zero = await postBinary(prove, Buffer.concat([header, Buffer.from([0, 5])]))
  t.same([zero.status, zero.json().error], [400, { code: 'invalid_discriminant', message: 'invalid old discriminant for ProofPreimageVersioned: 0' }])
  const two = await postBinary(prove, Buffer.concat([header, Buffer.from([2, 5])]))
  t.equal(two.json().error.message, 'unknown discriminant for ProofPreimageVersioned: 2')

  // A chunked body past the cap is counted as it streams. Own agent: after this 413 the core keeps
  // the half-read socket open (reported to the lead), so it must not go back to the shared pool.
  const agent = new Agent()
  t.teardown(() => agent.destroy())
  const chunked = await new Promise<number>((resolve, reject) => {
    const stream = async function* () {
      yield Buffer.from(PROOF_TAGS.proveTx.request)
      for (let i = 0; i < 20; i++) yield Buffer.alloc(8192)
    }
    request(gw.url + path, { method: 'POST', headers: octet, body: Readable.from(stream()), dispatcher: agent }).then(async (res) => {
      await res.body.dump()
      resolve(res.statusCode)
    }, reject)
  })
  t.equal(chunked, 413, 'chunked body over the cap')
  t.equal(proof.requests.length, 0, 'nothing reached the proof server')
})

t.test('probes pass through; fetch-params and unknown endpoints are not routed', async (t) => {
  const health = await call('GET', `/privnet/zkpaas/${KEY.full}/health`)
  t.equal(health.status, 200)
  t.equal(health.json().status, 'ok')
  const version = await call('GET', `/privnet/zkpaas/${KEY.full}/version`)
  t.equal(version.body.toString(), '7.0.0')
  const ready = await call('GET', `/privnet/zkpaas/${KEY.full}/ready`)
  t.match(ready.json(), { status: 'ok', jobsPending: 0 })
  for (const path of ['fetch-params/10', 'k', 'proof-versions']) {
    const res = await call('GET', `/privnet/zkpaas/${KEY.full}/${path}`)
    t.equal(res.status, 404, path)
  }
  t.equal((await call('GET', `/privnet/zkpaas/not-a-key/health`)).status, 401, 'probes need a key')
  t.equal((await postBinary(`/privnet/zkpaas/${KEY.standard}/prove`, buildProvePayload(Buffer.from('x')))).json().error.code, 'forbidden')
})

t.test('prove-batch: caps, shape and feature', async (t) => {
  const path = `/privnet/zkpaas/${KEY.full}/prove-batch`
  const item = (n: number) => ({ endpoint: 'prove', payload: buildProvePayload(Buffer.from(`p${n}`)).toString('base64') })
  const many = (n: number) => Array.from({ length: n }, (_, i) => item(i))

  const twenty = await postJson(path, { proofs: many(20) })
  t.equal(twenty.status, 200, '20 proofs are accepted')
  t.same(
    twenty.json().results.map((r: any) => r.proof),
    many(20).map((i) => proofOf(Buffer.from(i.payload, 'base64'))),
    'results in input order',
  )
  t.equal(proof.requests.length, 20)

  const refusals: [string, unknown, string, string][] = [
    ['21 proofs', { proofs: many(21) }, 'batch_too_large', 'proofs has 21 items; the limit is 20'],
    ['zero proofs', { proofs: [] }, 'batch_empty', 'proofs must contain at least one proof'],
    ['not an array', { proofs: 'x' }, 'invalid_batch', 'proofs must be an array (got string)'],
    ['missing', { proof: [] }, 'invalid_batch', 'proofs must be an array (got missing)'],
    ['not an object', [item(0)], 'invalid_batch', 'request body must be a JSON object with a proofs array'],
  ]
  for (const [name, body, code, message] of refusals) {
    const res = await postJson(path, body)
    t.same([res.status, res.json().error], [400, { code, message }], name)
  }
  const badJson = await call('POST', path, '{"proofs": [', { 'content-type': 'application/json' })
  t.same([badJson.status, badJson.json().error.code], [400, 'invalid_json'])
  const wrongType = await call('POST', path, '{}', { 'content-type': 'text/plain' })
  t.equal(wrongType.status, 415)
  const off = await postJson(`/privnet/zkpaas/${KEY.plain}/prove-batch`, { proofs: many(1) })
  t.same([off.status, off.json().error], [403, { code: 'feature_disabled', message: 'ZK Prove Batch is not enabled for this project' }])
  t.equal(proof.requests.length, 20, 'no refused batch reached the proof server')
})

t.test('prove-batch: one bad item never fails the others; failed items are refunded', async (t) => {
  const path = `/privnet/zkpaas/${KEY.full}/prove-batch`
  const good = [buildProvePayload(Buffer.from('g1')), buildCheckPayload(Buffer.from('g2')), buildProveTxPayload(Buffer.from('g3'))]
  const proofs = [
    { endpoint: 'prove', payload: good[0].toString('base64') },
    { endpoint: 'prove', payload: buildProvePayload(Buffer.from('FAIL500')).toString('base64') },
    { endpoint: 'check', payload: good[0].toString('base64') },
    { endpoint: 'prove', payload: buildProvePayload(Buffer.from('BADINPUT')).toString('base64') },
    { endpoint: 'prove', payload: '%%%' },
    { endpoint: 'fetch-params', payload: 'AA==' },
    { endpoint: 'check', payload: good[1].toString('base64') },
    { endpoint: 'prove-tx', payload: good[2].toString('base64') },
  ]
  const before = await remaining('full')
  const res = await postJson(path, { proofs })
  t.equal(res.status, 200)
  const results = res.json().results
  t.equal(results.length, 8)
  t.same(results[0], { ok: true, proof: proofOf(good[0]) })
  t.same(results[1], { ok: false, error: { code: 'upstream_error', message: 'internal error', status: 500 } })
  t.match(results[2], { ok: false, error: { code: 'header_tag_mismatch', status: 400, message: /^expected header tag 'midnight:\(proof-preimage-versioned,option\(wrapped-ir\)\):', got / } })
  t.same(results[3], { ok: false, error: { code: 'proof_rejected', message: 'bad input', status: 400 } })
  t.same(results[4], { ok: false, error: { code: 'invalid_item', message: 'proofs[4].payload must be a non-empty standard base64 string', status: 400 } })
  t.same(results[5], { ok: false, error: { code: 'invalid_item', message: 'proofs[5].endpoint must be one of prove, check or prove-tx', status: 400 } })
  t.equal(results[6].ok, true)
  t.ok(Buffer.from(results[7].proof, 'base64').toString('latin1').startsWith(PROOF_TAGS.proveTx.response))
  t.same(proof.requests.map((r) => r.path).sort(), ['/check', '/prove', '/prove', '/prove', '/prove-tx'], 'invalid items are not sent')
  t.equal(before - (await remaining('full')), 3, '8 reserved, 5 failed handed back')
})

t.test('credits: one per proof; refusals and upstream failures cost nothing', async (t) => {
  const before = await remaining('full')
  const path = `/privnet/zkpaas/${KEY.full}/prove`
  t.equal((await postBinary(path, buildProvePayload(Buffer.from('paid')))).status, 200)
  t.equal((await postBinary(path, 'not tagged')).status, 400)
  t.equal((await postBinary(path, buildProvePayload(Buffer.from('FAIL500')))).status, 500)
  const batch = { proofs: [1, 2, 3].map((n) => ({ endpoint: 'prove', payload: buildProvePayload(Buffer.from(`b${n}`)).toString('base64') })) }
  t.equal((await postJson(`/privnet/zkpaas/${KEY.full}/prove-batch`, batch)).status, 200)
  t.equal((await postJson(`/privnet/zkpaas/${KEY.full}/prove-batch`, { proofs: [] })).status, 400)
  t.equal(before - (await remaining('full')), 4, '1 single proof + 3 batch proofs')
})

t.test('sponsored header: strict, forwarded only when the project has Sponsored Wallet', async (t) => {
  const payload = buildProvePayload(Buffer.from('s'))
  const send = (key: string, value?: string) => postBinary(`/privnet/zkpaas/${key}/prove`, payload, value === undefined ? {} : { sponsored: value })
  for (const value of ['true', '1']) {
    proof.reset()
    t.equal((await send(KEY.full, value)).status, 200)
    t.equal(proof.requests[0].headers.sponsored, 'true', `${value} is forwarded as true`)
  }
  for (const value of ['false', '0', undefined]) {
    proof.reset()
    t.equal((await send(KEY.full, value)).status, 200)
    t.equal(proof.requests[0].headers.sponsored, undefined, `${value} is not forwarded`)
  }
  for (const value of ['yes', 'TRUE', '', 'true, true']) {
    const res = await send(KEY.full, value)
    t.same([res.status, res.json().error], [400, { code: 'invalid_header', message: 'header sponsored must be true, false, 1 or 0' }], `'${value}'`)
  }
  const off = await send(KEY.plain, 'true')
  t.same([off.status, off.json().error], [403, { code: 'feature_disabled', message: 'Sponsored Wallet is not enabled for this project' }])
  proof.reset()
  t.equal((await send(KEY.plain, 'false')).status, 200)
  t.equal(proof.requests[0].headers.sponsored, undefined, 'stripped when off')

  proof.reset()
  const batch = { proofs: [{ endpoint: 'prove', payload: payload.toString('base64') }] }
  const res = await call('POST', `/privnet/zkpaas/${KEY.full}/prove-batch`, JSON.stringify(batch), { 'content-type': 'application/json', sponsored: '1' })
  t.equal(res.status, 200)
  t.equal(proof.requests[0].headers.sponsored, 'true', 'batch jobs carry it too')
})

t.test('tee_enabled and zk_relay_to_space choose the proof pool', async (t) => {
  const payload = buildProvePayload(Buffer.from('t'))
  const prove = (key: string, query = '') => postBinary(`/privnet/zkpaas/${key}/prove${query}`, payload)
  const counts = () => [proof.requests.length, tee.requests.length, relay.requests.length]

  t.equal((await prove(KEY.full, '?tee_enabled=true')).status, 200)
  t.same(counts(), [0, 1, 0], 'TEE pool')
  t.equal(tee.requests[0].path, '/prove', 'the flag is not passed upstream')
  t.equal((await prove(KEY.full, '?tee_enabled=0')).status, 200)
  t.same(counts(), [1, 1, 0], 'tee_enabled=0: default pool')
  const bad = await prove(KEY.full, '?tee_enabled=on')
  t.same([bad.status, bad.json().error.code], [400, 'invalid_query'])
  const twice = await prove(KEY.full, '?tee_enabled=1&tee_enabled=1')
  t.equal(twice.status, 400)
  const off = await prove(KEY.plain, '?tee_enabled=1')
  t.same([off.status, off.json().error.message], [403, 'TEE proving is not enabled for this project'])

  t.equal((await prove(KEY.relay)).status, 200)
  t.same(counts(), [1, 1, 1], 'relay project: relay pool')
  t.equal((await prove(KEY.relay, '?tee_enabled=true')).status, 200)
  t.same(counts(), [1, 2, 1], 'an explicit TEE request wins over the relay')

  const batch = { proofs: [0, 1].map((n) => ({ endpoint: 'prove', payload: buildProvePayload(Buffer.from(`tb${n}`)).toString('base64') })) }
  const res = await call('POST', `/privnet/zkpaas/${KEY.full}/prove-batch?tee_enabled=true`, JSON.stringify(batch), { 'content-type': 'application/json' })
  t.equal(res.status, 200)
  t.same(counts(), [1, 4, 1], 'a TEE batch runs every job in the TEE pool')
})

t.test('feature toggles take effect on a real reload', async (t) => {
  const batch = { proofs: [{ endpoint: 'prove', payload: buildProvePayload(Buffer.from('r')).toString('base64') }] }
  const path = `/privnet/zkpaas/${KEY.toggle}`
  const reload = async (features: TestProject['features']) => {
    const marker = gw.output.length
    gw.writeConfig(privnetConfig(projects(features), { adminToken: ADMIN, maxBodyBytes: MAX_BODY }))
    await gw.waitFor(/"msg":"config reloaded"/)
    t.ok(gw.output.slice(marker).some((line) => line.includes('config reloaded')))
  }
  t.equal((await postJson(`${path}/prove-batch`, batch)).status, 403, 'off')
  t.equal((await postBinary(`${path}/prove`, buildProvePayload(Buffer.from('r')), { sponsored: 'true' })).status, 403)

  await reload({ proveBatch: true, sponsoredWallet: true, relayToConfidentialSpace: true })
  t.equal((await postJson(`${path}/prove-batch`, batch)).status, 200, 'on after reload')
  relay.reset()
  t.equal((await postBinary(`${path}/prove`, buildProvePayload(Buffer.from('r')), { sponsored: 'true' })).status, 200)
  t.equal(relay.requests[0]?.headers.sponsored, 'true', 'sponsored, and relayed')

  gw.output.length = 0
  await reload({})
  t.equal((await postJson(`${path}/prove-batch`, batch)).status, 403, 'off again')
})
