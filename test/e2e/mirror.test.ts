/**
 * The mirror-node REST proxy end to end: a real gateway process running examples/config/mirror.yaml
 * (ports, store, projects and limits adjusted for the test) in front of two stand-in mirror nodes.
 * Validation parity with the node, the `_status` shape of gateway errors, auth, credits, rate
 * limits, pass-through, and pagination followed through the gateway's mounts.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { hashCredential } from '../../core/projects/projects.ts'
import { startMirror, type MirrorStandIn } from '../../examples/upstreams/mirror.ts'
import { INVALID_TRANSACTION_ID } from '../../plugins/mirror-validate/transaction-id.ts'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { creditsUsed, followNext, mirrorGet, type MirrorAnswer } from '../helpers/mirror.ts'

const EXAMPLE = fileURLToPath(new URL('../../examples/config/mirror.yaml', import.meta.url))
const fresh = (name: string) => `mk_${name}_${randomBytes(12).toString('hex')}`
const KEY = { acme: fresh('acme'), val: fresh('val'), meter: fresh('meter'), tiny: fresh('tiny'), burst: fresh('burst'), events: fresh('events'), off: fresh('off') }
const ADMIN = fresh('admin')
const MAIN = '/ledger/mainnet/api/v1'
const TEST = '/ledger/testnet/api/v1'
const COST = 3
const RATE_CAPACITY = 60

/** The example config, pointed at the test's store and ports, with the test's projects and limits. */
function testConfig(): string {
  const project = (id: string, key: string, extra = '') =>
    `  - { id: ${id}, scopes: [mirror], credits: { allocation: 100000, period: month }, keys: [{ label: main, hash: ${hashCredential(key)} }]${extra} }\n`
  const projects =
    'projects:\n' +
    project('acme', KEY.acme).replace('}]', `}, { label: off, hash: ${hashCredential(KEY.off)}, disabled: true }]`) +
    project('val', KEY.val) +
    project('meter', KEY.meter) +
    project('burst', KEY.burst) +
    `  - { id: tiny, scopes: [mirror], credits: { allocation: ${2 * COST}, period: month }, keys: [{ hash: ${hashCredential(KEY.tiny)} }] }\n` +
    `  - { id: events-only, scopes: [events], credits: { allocation: 100 }, keys: [{ hash: ${hashCredential(KEY.events)} }] }\n`
  const text = readFileSync(EXAMPLE, 'utf8')
    .replace('port: 8080', 'port: 0')
    .replace('port: 8081', 'port: 0')
    .replace(/tokenHash: \S+/, `tokenHash: ${hashCredential(ADMIN)}`)
    .replace('dataDir: ./data', "dataDir: '{{DIR}}/data'\nwatch: false")
    .replace(/projects:\n(  .*\n|    .*\n)*/, projects + '\n')
    .replace('capacity: 200, refillPerSecond: 100', `capacity: ${RATE_CAPACITY}, refillPerSecond: 0.01`)
    .replace('cost: 1 }', `cost: ${COST} }`)
  if (!text.includes(`cost: ${COST} }`) || !text.includes(`capacity: ${RATE_CAPACITY}`) || !text.includes('id: tiny')) throw new Error('examples/config/mirror.yaml changed shape')
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

/** GET through the gateway; `null` sends no key at all. */
const viaGateway = (path: string, key: string | null = KEY.acme) => mirrorGet(gw.url, path, key ?? undefined)
const direct = (standIn: MirrorStandIn, path: string) => mirrorGet(standIn.url, path)
const messages = (answer: MirrorAnswer) => answer.json?._status?.messages

t.test('validation: the node’s own 400/404 texts and order, before anything goes upstream, not charged', async (t) => {
  // [gateway path below the mount, upstream path below /api/v1, status, messages]
  const cases: [string, number, unknown[]][] = [
    ['/accounts?limit=0&order=x', 400, [{ message: 'Invalid parameter: limit' }, { message: 'Invalid parameter: order' }]],
    ['/accounts?foo=1&limit=0', 400, [{ message: 'Unknown query parameter: foo' }, { message: 'Invalid parameter: limit' }]],
    ['/transactions?foo=1&limit=0', 400, [{ message: 'Invalid parameter: limit' }, { message: 'Unknown query parameter: foo' }]],
    ['/transactions?timestamp=gt:1&timestamp=gte:2', 400, [{ message: 'Multiple gt or gte operators not permitted for timestamp param' }]],
    ['/transactions?transactionType=nope&Limit=0', 400, [{ message: 'Invalid parameter: transactiontype' }, { message: 'Invalid parameter: limit' }]],
    ['/transactions/0.0.10-1-x', 400, [{ message: INVALID_TRANSACTION_ID }]],
    ['/accounts/0.0.1.2.3', 400, [{ message: 'Invalid parameter: idOrAliasOrEvmAddress' }]],
    ['/tokens?name=abc&token.id=0.0.1', 400, [{ message: 'token.id and name can not be used together. Use a more specific name instead.' }]],
    ['/tokens/0xac384c53f03855fa1b3616052f8ba32c6c2a2fec', 400, [{ message: 'Invalid parameter: tokenid' }]],
    ['/topics/abc', 404, [{ message: 'Not found' }]],
    ['/topics/0.0.999999999999999', 400, [{ message: 'Bad Request', detail: "Failed to convert 'id'" }]],
    ['/topics/0.0.x/messages', 400, [{ message: 'Invalid parameter: topic.id' }]],
    ['/topics/0.0.3001/messages?encoding=hex&order=up', 400, [{ message: 'Invalid parameter: encoding' }, { message: 'Invalid parameter: order' }]],
  ]
  const before = mainnet.requests.length
  const answers: MirrorAnswer[] = []
  for (const [path, status, expected] of cases) {
    const answer = await viaGateway(MAIN + path, KEY.val)
    answers.push(answer)
    t.equal(answer.status, status, `${path}: status`)
    t.same(messages(answer), expected, `${path}: messages`)
    t.match(answer.headers['content-type'], /^application\/json/)
  }
  const above = await viaGateway(`${MAIN}/accounts?limit=101`, KEY.val)
  t.same([above.status, messages(above)], [400, [{ message: 'Invalid parameter: limit' }]], 'the spec range 1-100: above it is refused')
  t.equal(mainnet.requests.length, before, 'no refused request reached the mirror node')
  t.equal(await creditsUsed(gw.adminUrl, ADMIN, 'val'), 0, 'refused requests cost nothing')

  // The stand-in answers as the real node: the gateway's refusals are byte-identical to its own.
  for (const [i, [path]] of cases.entries()) {
    const own = await direct(mainnet, '/api/v1' + path)
    t.same([answers[i].status, answers[i].text], [own.status, own.text], `${path}: same as the node`)
  }
})

t.test('gateway errors use the mirror shape: 401, 403, 402, 429', async (t) => {
  const expectMirrorError = async (answer: MirrorAnswer, status: number, message: string | RegExp, what: string) => {
    t.equal(answer.status, status, `${what}: status`)
    t.match(answer.headers['content-type'], /^application\/json/, `${what}: content type`)
    t.same(Object.keys(answer.json), ['_status'], `${what}: only _status`)
    t.equal(messages(answer).length, 1)
    t.same(Object.keys(messages(answer)[0]), ['message'])
    t.match(messages(answer)[0].message, message, `${what}: message`)
  }
  await expectMirrorError(await viaGateway(`${MAIN}/accounts`, null), 401, 'the x-api-key header is required', 'missing key')
  await expectMirrorError(await viaGateway(`${MAIN}/accounts`, fresh('nobody')), 401, 'invalid API key', 'unknown key')
  await expectMirrorError(await viaGateway(`${MAIN}/accounts`, KEY.off), 401, 'invalid API key', 'disabled key')
  await expectMirrorError(await viaGateway(`${TEST}/tokens`, KEY.events), 403, 'the API key must be scoped to a mirror project', 'wrong scope')

  t.equal((await viaGateway(`${MAIN}/tokens/0.0.2001`, KEY.tiny)).status, 200)
  t.equal((await viaGateway(`${MAIN}/tokens/0.0.2002`, KEY.tiny)).status, 200)
  await expectMirrorError(await viaGateway(`${MAIN}/tokens/0.0.2003`, KEY.tiny), 402, /^project tiny has 0 of 6 credits left/, 'credits exhausted')

  let limited: MirrorAnswer | undefined
  for (let i = 0; i <= RATE_CAPACITY + 5 && !limited; i++) {
    const answer = await viaGateway(`${TEST}/tokens?limit=1`, KEY.burst)
    if (answer.status === 429) limited = answer
  }
  t.ok(limited, 'the rate limit refuses past its capacity')
  await expectMirrorError(limited!, 429, new RegExp(`^rate limit of ${RATE_CAPACITY} requests exceeded`), 'rate limited')
  t.match(limited!.headers['retry-after'], /^\d+$/)

  const unknownPath = await viaGateway(`${MAIN}/no-such-resource`)
  t.equal(unknownPath.status, 404, 'an unknown path under the mount')
  t.same(unknownPath.json, { _status: { messages: [{ message: 'Not found' }] } }, "is the node's own 404")
  const wrongMethod = await fetch(`${gw.url}${MAIN}/accounts`, { method: 'POST', headers: { 'x-api-key': KEY.acme } })
  t.equal(wrongMethod.status, 405)
  t.equal(wrongMethod.headers.get('allow'), 'GET, HEAD')
  t.same(await wrongMethod.json(), { _status: { messages: [{ message: 'method POST is not allowed here; allowed: GET, HEAD' }] } }, 'a wrong method too')
})

t.test('auth and credits: the key never goes upstream; cost per call, hits and upstream 404s charged', async (t) => {
  mainnet.reset()
  const first = await viaGateway(`${MAIN}/accounts/0.0.1010`, KEY.meter)
  const again = await viaGateway(`${MAIN}/accounts/0.0.1010`, KEY.meter)
  const missing = await viaGateway(`${MAIN}/accounts/0.0.9999`, KEY.meter)
  await viaGateway(`${MAIN}/accounts/not-an-id!`, KEY.meter)
  t.same([first.status, again.status, missing.status], [200, 200, 404])
  t.same([first.headers['x-cache'], again.headers['x-cache']], ['MISS', 'HIT'])
  t.equal(await creditsUsed(gw.adminUrl, ADMIN, 'meter'), 3 * COST, 'MISS, HIT and the upstream 404 are charged; the refusal is not')
  t.same(mainnet.requests.map((r) => r.path), ['/api/v1/accounts/0.0.1010', '/api/v1/accounts/0.0.9999'])
  for (const received of [...mainnet.requests, ...testnet.requests]) {
    t.equal(received.headers['x-api-key'], undefined, `${received.path}: no x-api-key upstream`)
    t.notOk(Object.values(received.headers).some((v) => String(v).includes('mk_')), `${received.path}: no credential upstream`)
  }
})

t.test('pass-through: status, body, content type and cache-control as the node sent them', async (t) => {
  for (const [path, status] of [['/tokens/0.0.2001', 200], ['/accounts/0.0.9999', 404], ['/topics/0.0.3002', 200], ['/transactions/0.0.1001-1700099999-000000000', 200]] as const) {
    const own = await direct(mainnet, '/api/v1' + path)
    const proxied = await viaGateway(MAIN + path)
    t.equal(proxied.status, status, `${path}: status`)
    t.same([proxied.status, proxied.text, proxied.headers['content-type'], proxied.headers['cache-control']],
      [own.status, own.text, own.headers['content-type'], own.headers['cache-control']], `${path}: as the node`)
  }
  const testnetAccount = await viaGateway(`${TEST}/accounts/0.0.1001`)
  t.match(testnetAccount.json.memo, /^testnet /, 'the testnet mount reaches the testnet node')
})

t.test('pagination: links.next and Link followed through the gateway until null, same records as the node', async (t) => {
  const walks: [MirrorStandIn, string, string, string][] = [
    [mainnet, MAIN, '/accounts', 'accounts'],
    [testnet, TEST, '/accounts?limit=20&order=desc', 'accounts'],
    [mainnet, MAIN, '/transactions?limit=25', 'transactions'],
    [testnet, TEST, '/tokens?limit=7', 'tokens'],
    [mainnet, MAIN, '/topics/0.0.3001/messages?limit=15', 'messages'],
    [mainnet, MAIN, '/accounts/0.0.1010?limit=2', 'transactions'],
  ]
  for (const [standIn, mount, path, listKey] of walks) {
    const own = await followNext(standIn.url, '/api/v1' + path)
    const proxied = await followNext(gw.url, mount + path, KEY.acme)
    t.ok(own.length > 1, `${path}: more than one page`)
    t.equal(proxied.length, own.length, `${path}: same number of pages`)
    t.same(proxied.map((p) => p.json[listKey]), own.map((p) => p.json[listKey]), `${path}: same records, page by page`)
    for (const [i, page] of proxied.entries()) {
      const next: string | null = own[i].json.links.next
      const expected = next === null ? null : mount + next.slice('/api/v1'.length)
      t.equal(page.json.links.next, expected, `${path} page ${i + 1}: links.next under the mount`)
      t.equal(page.headers.link, expected === null ? undefined : `<${expected}>; rel="next"`, `${path} page ${i + 1}: Link header`)
      t.equal(Number(page.headers['content-length']), Buffer.byteLength(page.text), 'content-length fits the rewritten body')
    }
  }
})
