/**
 * The whole mirror-node REST API through a real gateway process running examples/config/mirror.yaml
 * (ports, store and projects adjusted) in front of two stand-in mirror nodes: every GET path of the
 * pinned OpenAPI document with one valid and one invalid request, pagination on the routes beyond
 * the original eight, cache classes, and POST /contracts/call (body checks, cap, credits, never cached).
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { request } from 'undici'
import { hashCredential } from '../../core/projects/projects.ts'
import { startMirror, type MirrorStandIn } from '../../examples/upstreams/mirror.ts'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { creditsUsed, followNext, mirrorGet } from '../helpers/mirror.ts'
import { pathCases } from '../helpers/mirror-api-cases.ts'

const EXAMPLE = fileURLToPath(new URL('../../examples/config/mirror.yaml', import.meta.url))
const fresh = (name: string) => `mk_${name}_${randomBytes(12).toString('hex')}`
const KEY = { api: fresh('api'), call: fresh('call') }
const ADMIN = fresh('admin')
const MAIN = '/ledger/mainnet/api/v1'
const TEST = '/ledger/testnet/api/v1'

function testConfig(): string {
  const project = (id: string, key: string) =>
    `  - { id: ${id}, scopes: [mirror], credits: { allocation: 1000000, period: month }, keys: [{ hash: ${hashCredential(key)} }] }\n`
  const text = readFileSync(EXAMPLE, 'utf8')
    .replace('port: 8080', 'port: 0')
    .replace('port: 8081', 'port: 0')
    .replace(/tokenHash: \S+/, `tokenHash: ${hashCredential(ADMIN)}`)
    .replace('dataDir: ./data', "dataDir: '{{DIR}}/data'\nwatch: false")
    .replace(/projects:\n(  .*\n|    .*\n)*/, 'projects:\n' + project('api', KEY.api) + project('call', KEY.call) + '\n')
    // Every path twice per network in a few seconds: more than the example's burst.
    .replace('capacity: 200, refillPerSecond: 100', 'capacity: 5000, refillPerSecond: 1000')
  if (!text.includes('capacity: 5000') || !text.includes("id: call")) throw new Error('examples/config/mirror.yaml changed shape')
  return text
}

let mainnet: MirrorStandIn
let testnet: MirrorStandIn
let gw: GatewayProcess

t.before(async () => {
  mainnet = await startMirror({ network: 'mainnet' })
  testnet = await startMirror({ network: 'testnet' })
  gw = await startGatewayProcess(testConfig(), {
    env: { MIRROR_MAINNET_URL: `${mainnet.url}/api/v1`, MIRROR_TESTNET_URL: `${testnet.url}/api/v1` },
  })
})
t.teardown(async () => {
  await gw?.stop()
  await mainnet?.close()
  await testnet?.close()
})

const viaGateway = (path: string, key: string = KEY.api) => mirrorGet(gw.url, path, key)

t.test('every GET path of the pinned OpenAPI, on both networks: valid and invalid answered as the node does', async (t) => {
  for (const [mount, standIn] of [[MAIN, mainnet], [TEST, testnet]] as const) {
    for (const c of pathCases()) {
      const own = await mirrorGet(standIn.url, '/api/v1' + c.valid)
      const proxied = await viaGateway(mount + c.valid)
      // The node's answer, with its next link moved under the gateway's mount.
      const expected = own.text.replace('"links":{"next":"/api/v1/', `"links":{"next":"${mount}/`)
      t.same([proxied.status, proxied.text], [own.status, expected], `${mount}${c.valid}: as the node`)
      standIn.reset()
      const refused = await viaGateway(mount + c.invalid)
      t.same([refused.status, refused.json?._status?.messages], [c.status, c.messages], `${mount}${c.invalid}: refused`)
      const ownRefusal = await mirrorGet(standIn.url, '/api/v1' + c.invalid)
      t.same([refused.status, refused.text], [ownRefusal.status, ownRefusal.text], `${mount}${c.invalid}: byte for byte the node's refusal`)
      t.equal(standIn.requests.length, 1, `${c.invalid}: the refused request never went upstream`)
    }
  }
})

t.test('pagination beyond the first eight routes: links.next under the mount until null', async (t) => {
  for (const path of ['/blocks?limit=2', '/accounts/0.0.1001/nfts', '/contracts/results/logs?limit=3', '/network/nodes', '/tokens/0.0.2001/balances']) {
    const own = await followNext(mainnet.url, '/api/v1' + path)
    const proxied = await followNext(gw.url, MAIN + path, KEY.api)
    t.equal(proxied.length, own.length, `${path}: same number of pages`)
    t.ok(proxied.length > 1, `${path}: it pages`)
    for (const [i, page] of proxied.entries()) {
      const next: string | null = own[i].json.links.next
      t.equal(page.json.links.next, next === null ? null : MAIN + next.slice('/api/v1'.length), `${path} page ${i + 1}: links.next`)
      t.equal(page.headers.link, next === null ? undefined : `<${MAIN}${next.slice('/api/v1'.length)}>; rel="next"`, `${path} page ${i + 1}: Link`)
    }
  }
})

t.test('cache classes: immutable records outlive the node’s max-age; latest lists follow it', async (t) => {
  const opcodes = `${MAIN}/contracts/results/0.0.1001-1700099999-000000000/opcodes`
  const first = await viaGateway(opcodes)
  t.equal(first.status, 200)
  t.equal(first.headers['cache-control'], 'public, max-age=1', 'the node allows 1 s')
  await new Promise((resolve) => setTimeout(resolve, 1500))
  const later = await viaGateway(opcodes)
  t.equal(later.headers['x-cache'], 'HIT', 'an opcode trace is immutable: still served from the cache after 1.5 s')

  const latest = `${MAIN}/blocks?limit=1&order=desc`
  await viaGateway(latest)
  t.equal((await viaGateway(latest)).headers['x-cache'], 'HIT', 'within the node’s max-age')
  await new Promise((resolve) => setTimeout(resolve, 1500))
  t.equal((await viaGateway(latest)).headers['x-cache'], 'MISS', 'the latest blocks: gone after the node’s 1 s')
})

t.test('GET and POST /network/fees reach their own routes', async (t) => {
  t.equal((await viaGateway(`${MAIN}/network/fees`)).status, 200, 'GET falls to the read route')
  const estimate = await request(`${gw.url}${MAIN}/network/fees?mode=STATE`, {
    method: 'POST',
    headers: { 'x-api-key': KEY.api, 'content-type': 'application/protobuf' },
    body: Buffer.from([0x0a, 0x02, 0x08, 0x01]),
  })
  t.equal(estimate.statusCode, 200)
  await estimate.body.dump()
  const tooBig = await request(`${gw.url}${MAIN}/network/fees`, {
    method: 'POST',
    headers: { 'x-api-key': KEY.api, 'content-type': 'application/protobuf' },
    body: Buffer.alloc(7000),
  })
  t.equal(tooBig.statusCode, 413, 'a transaction is at most 6 KiB')
  await tooBig.body.dump()
})

t.test('POST /contracts/call: validated, capped, charged as its class, never cached', async (t) => {
  const call = async (body: string, contentType = 'application/json') => {
    const res = await request(`${gw.url}${TEST}/contracts/call`, {
      method: 'POST',
      headers: { 'x-api-key': KEY.call, 'content-type': contentType },
      body,
    })
    return { status: res.statusCode, headers: res.headers, json: (await res.body.json().catch(() => undefined)) as any }
  }
  const to = '0x' + '00'.repeat(19) + '67'
  testnet.reset()
  const ok = await call(JSON.stringify({ to, data: '0x70a08231', block: 'latest' }))
  const again = await call(JSON.stringify({ to, data: '0x70a08231', block: 'latest' }))
  t.same([ok.status, again.status], [200, 200])
  t.equal(ok.json.result, '0x' + '0'.repeat(63) + '1')
  t.equal(ok.headers['x-cache'], undefined, 'no cache on this route')
  t.equal(testnet.requests.filter((r) => r.method === 'POST').length, 2, 'both calls reached the node')
  t.equal(await creditsUsed(gw.adminUrl, ADMIN, 'call'), 10, 'a call costs 5 credits')

  const bad = await call(JSON.stringify({ to: '0x12', gas: 5 }))
  t.equal(bad.status, 400)
  t.same(bad.json, { _status: { messages: [
    { message: 'Bad Request', detail: 'gas field must be greater than or equal to 21000', data: '' },
    { message: 'Bad Request', detail: 'to field invalid hexadecimal string', data: '' },
  ] } }, "web3's own refusal")
  t.equal((await call('{"to":')).status, 400, 'malformed JSON')
  t.equal((await call(JSON.stringify({ to }), 'text/plain')).status, 415, 'JSON only')
  t.equal((await call(JSON.stringify({ to, data: '0x' + 'ab'.repeat(600000) }))).status, 413, 'past the body cap')
  t.equal(testnet.requests.filter((r) => r.method === 'POST').length, 2, 'refused calls never reached the node')
  t.equal(await creditsUsed(gw.adminUrl, ADMIN, 'call'), 10, 'refused calls cost nothing')
})
