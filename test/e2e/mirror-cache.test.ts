/**
 * response-cache end to end on mirror routes: a real gateway process in front of stand-in mirror
 * nodes (one fast, one slower than its timeout) and a closed port. Hits, key normalisation, TTL
 * expiry, the byte bound, coalescing of 100 identical misses, shared upstream errors, charging of
 * hits, and a cache kept across a reload.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { hashCredential } from '../../core/projects/projects.ts'
import { startMirror, type MirrorStandIn } from '../../examples/upstreams/mirror.ts'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { closedPort } from '../helpers/upstream.ts'
import { creditsUsed, metricValue, mirrorGet, type MirrorAnswer } from '../helpers/mirror.ts'

const fresh = (name: string) => `ck_${name}_${randomBytes(12).toString('hex')}`
const PROJECTS = ['main', 'other', 'herd', 'free', 'fail'] as const
const KEY = Object.fromEntries(PROJECTS.map((p) => [p, fresh(p)])) as Record<(typeof PROJECTS)[number], string>
const ADMIN = fresh('admin')
const SLOW_LATENCY_MS = 3000
const SLOW_TIMEOUT_MS = 1000

interface Route {
  name: string
  path: string
  rewrite: string
  upstream: string
  rule: string
  cache: string
}

const ROUTES: Route[] = [
  { name: 'accounts-list', path: '/c/api/v1/accounts', rewrite: '/accounts', upstream: 'fast', rule: 'accounts.list', cache: '{}' },
  { name: 'accounts-get', path: '/c/api/v1/accounts/:id', rewrite: '/accounts/:id', upstream: 'fast', rule: 'accounts.get', cache: '{ pool: small, maxBytes: 5000 }' },
  { name: 'accounts-get-2', path: '/c2/api/v1/accounts/:id', rewrite: '/accounts/:id', upstream: 'fast', rule: 'accounts.get', cache: '{ pool: small, maxBytes: 5000 }' },
  { name: 'tokens-list', path: '/c/api/v1/tokens', rewrite: '/tokens', upstream: 'fast', rule: 'tokens.list', cache: '{}' },
  { name: 'tokens-ttl', path: '/ttl/api/v1/tokens/:tokenId', rewrite: '/tokens/:tokenId', upstream: 'fast', rule: 'tokens.get', cache: '{ maxTtlSeconds: 1 }' },
  { name: 'tokens-free', path: '/free/api/v1/tokens/:tokenId', rewrite: '/tokens/:tokenId', upstream: 'fast', rule: 'tokens.get', cache: '{ chargeHits: false }' },
  { name: 'slow-tokens', path: '/slow/api/v1/tokens', rewrite: '/tokens', upstream: 'slow', rule: 'tokens.list', cache: '{}' },
  { name: 'down-tokens', path: '/down/api/v1/tokens', rewrite: '/tokens', upstream: 'down', rule: 'tokens.list', cache: '{}' },
]

function config(fast: MirrorStandIn, slow: MirrorStandIn, downPort: number, extraProject = ''): string {
  const projects = PROJECTS.map((id) => `  - { id: ${id}, scopes: [mirror], credits: { allocation: 100000 }, keys: [{ hash: ${hashCredential(KEY[id])} }] }`)
  const routes = ROUTES.map((r) => `  - name: ${r.name}
    path: ${r.path}
    rewrite: ${r.rewrite}
    upstream: ${r.upstream}
    apiType: MIRROR
    errorFormat: mirror
    plugins:
      - { name: header-auth, config: { scope: mirror } }
      - { name: credit-meter, config: { cost: 1 } }
      - { name: mirror-validate, config: { route: ${r.rule} } }
      - { name: mirror-links }
      - { name: response-cache, config: ${r.cache} }`)
  return `version: 1
server: { listen: { port: 0 } }
admin: { listen: { port: 0 }, tokenHash: ${hashCredential(ADMIN)} }
store: { dataDir: '{{DIR}}/data' }
log: { access: false }
watch: false
projects:
${projects.join('\n')}
${extraProject}
upstreams:
  fast: { url: '${fast.url}/api/v1', connections: 128 }
  slow: { url: '${slow.url}/api/v1', timeouts: { headersMs: ${SLOW_TIMEOUT_MS} } }
  down: { url: 'http://127.0.0.1:${downPort}/api/v1' }
routes:
${routes.join('\n')}
`
}

let fast: MirrorStandIn
let slow: MirrorStandIn
let downPort: number
let gw: GatewayProcess

t.before(async () => {
  fast = await startMirror({ network: 'mainnet' })
  slow = await startMirror({ network: 'mainnet', latencyMs: SLOW_LATENCY_MS })
  downPort = await closedPort()
  gw = await startGatewayProcess(config(fast, slow, downPort), { startTimeoutMs: 90_000 })
})
t.teardown(async () => {
  await gw?.stop()
  await fast?.close()
  await slow?.close()
})

const get = (path: string, key: string = KEY.main) => mirrorGet(gw.url, path, key)
const used = (project: string) => creditsUsed(gw.adminUrl, ADMIN, project)
const cacheOf = (answers: MirrorAnswer[]) => answers.map((a) => a.headers['x-cache'])
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

t.test('hits: same answer without the upstream; query normalised; credentials not in the key', async (t) => {
  fast.reset()
  const miss = await get('/c/api/v1/accounts?limit=2&order=asc')
  const hit = await get('/c/api/v1/accounts?Order=ASC&limit=2')
  const otherProject = await get('/c/api/v1/accounts?limit=2&order=asc', KEY.other)
  t.same(cacheOf([miss, hit, otherProject]), ['MISS', 'HIT', 'HIT'])
  t.equal(fast.requests.length, 1, 'one upstream request for three answers')
  for (const answer of [hit, otherProject]) {
    t.equal(answer.status, 200)
    t.equal(answer.text, miss.text, 'the stored body, links already under the mount')
    t.same([answer.headers['content-type'], answer.headers['cache-control'], answer.headers.link],
      [miss.headers['content-type'], miss.headers['cache-control'], miss.headers.link])
    t.match(answer.headers.age, /^\d+$/, 'Age header on hits')
    t.equal(Number(answer.headers['content-length']), Buffer.byteLength(answer.text))
  }
  t.match(miss.json.links.next, /^\/c\/api\/v1\/accounts\?/)
  t.equal(await used('other'), 1, 'hits are charged by default')

  const notFound = [await get('/c/api/v1/accounts/0.0.9999'), await get('/c/api/v1/accounts/0.0.9999')]
  t.same([notFound.map((a) => a.status), cacheOf(notFound)], [[404, 404], ['MISS', 'MISS']], 'only 200 answers are stored')
  const refused = await get('/c/api/v1/accounts?limit=0')
  t.same([refused.status, refused.headers['x-cache']], [400, undefined], 'refused before the cache')
})

t.test('TTL: the upstream max-age capped by maxTtlSeconds; expired entries are fetched again', async (t) => {
  fast.reset()
  const first = [await get('/ttl/api/v1/tokens/0.0.2001'), await get('/ttl/api/v1/tokens/0.0.2001')]
  t.same(cacheOf(first), ['MISS', 'HIT'])
  t.equal(first[0].headers['cache-control'], 'public, max-age=5', "the upstream's cache-control is passed through")
  await sleep(1300)
  const later = await get('/ttl/api/v1/tokens/0.0.2001')
  t.equal(later.headers['x-cache'], 'MISS', 'expired after the 1 s cap, not the upstream 5 s')
  t.equal(fast.requests.length, 2)
})

t.test('byte bound: least recently used entries are evicted past maxBytes, shared by a pool', async (t) => {
  fast.reset()
  const evictedBefore = await metricValue(gw.adminUrl, 'tollgate_cache_evictions_total', { cache: 'small' })
  // Each account answer is 1.6-2.5 kB; the pool's 5000 bytes hold two, whichever route stored them.
  const paths = ['/c/api/v1/accounts/0.0.1001', '/c2/api/v1/accounts/0.0.1002', '/c/api/v1/accounts/0.0.1003']
  for (const path of paths) t.equal((await get(path)).headers['x-cache'], 'MISS', `${path} first`)
  t.equal((await get('/c2/api/v1/accounts/0.0.1002')).headers['x-cache'], 'HIT', 'kept')
  t.equal((await get('/c/api/v1/accounts/0.0.1003')).headers['x-cache'], 'HIT', 'kept')
  t.equal((await get('/c2/api/v1/accounts/0.0.1003')).headers['x-cache'], 'MISS', 'keys hold the route')
  t.equal((await get('/c/api/v1/accounts/0.0.1001')).headers['x-cache'], 'MISS', 'the least recently used was evicted')
  t.equal(fast.requests.length, 5)
  t.ok((await metricValue(gw.adminUrl, 'tollgate_cache_evictions_total', { cache: 'small' })) > evictedBefore, 'evictions are counted')
})

t.test('coalescing: 100 concurrent identical misses make exactly one upstream request', async (t) => {
  fast.reset()
  fast.latencyMs = 300
  t.teardown(() => void (fast.latencyMs = 0))
  const coalescedBefore = await metricValue(gw.adminUrl, 'tollgate_coalesced_requests_total', { route: 'tokens-list' })
  const answers = await Promise.all(Array.from({ length: 100 }, () => get('/c/api/v1/tokens?limit=5&order=desc', KEY.herd)))
  t.equal(fast.requests.length, 1, 'one upstream request')
  t.same(new Set(answers.map((a) => a.status)), new Set([200]))
  t.equal(new Set(answers.map((a) => a.text)).size, 1, 'every client got the same body')
  t.equal(cacheOf(answers).filter((c) => c === 'MISS').length, 1, 'one MISS (the leader)')
  t.equal(cacheOf(answers).filter((c) => c === 'HIT').length, 99, 'the others are served from its answer')
  t.equal(await used('herd'), 100, 'every answer is charged')
  t.equal(await metricValue(gw.adminUrl, 'tollgate_coalesced_requests_total', { route: 'tokens-list' }) - coalescedBefore, 99, 'coalesced requests are counted')
})

t.test('a leader whose client goes away: the waiting requests elect a new one', async (t) => {
  fast.reset()
  fast.latencyMs = 300
  t.teardown(() => void (fast.latencyMs = 0))
  const path = '/c/api/v1/tokens?limit=4&order=desc'
  const leaving = new AbortController()
  const leader = mirrorGet(gw.url, path, KEY.main, {}, leaving.signal).catch((error: Error) => error)
  while (fast.requests.length === 0) await sleep(10)
  const followers = Array.from({ length: 5 }, () => get(path))
  await sleep(50)
  leaving.abort()
  const answers = await Promise.all(followers)
  t.ok((await leader) instanceof Error, 'the leader’s client went away')
  t.same(answers.map((a) => a.status), [200, 200, 200, 200, 200])
  t.equal(new Set(answers.map((a) => a.text)).size, 1)
  t.equal(fast.requests.length, 2, 'the abandoned request and one for all five followers')
})

t.test('a failed leader: waiting requests get the same gateway error, in the mirror shape, refunded', async (t) => {
  slow.reset()
  const timedOut = await Promise.all(Array.from({ length: 20 }, () => get('/slow/api/v1/tokens', KEY.fail)))
  t.equal(slow.requests.length, 1, 'one upstream request for twenty clients')
  for (const answer of timedOut) {
    t.equal(answer.status, 504)
    t.same(answer.json, { _status: { messages: [{ message: 'upstream slow did not answer in time' }] } })
  }
  const down = await Promise.all(Array.from({ length: 5 }, () => get('/down/api/v1/tokens', KEY.fail)))
  for (const answer of down) t.same([answer.status, answer.json], [502, { _status: { messages: [{ message: 'upstream down is unavailable' }] } }])
  t.equal(await used('fail'), 0, 'gateway errors are refunded')
})

t.test('chargeHits: false refunds answers served from the cache', async (t) => {
  const answers = [await get('/free/api/v1/tokens/0.0.2002', KEY.free), await get('/free/api/v1/tokens/0.0.2002', KEY.free), await get('/free/api/v1/tokens/0.0.2002', KEY.free)]
  t.same(cacheOf(answers), ['MISS', 'HIT', 'HIT'])
  t.equal(await used('free'), 1, 'only the miss is charged')
})

t.test('reload: an unchanged route keeps its cache', async (t) => {
  fast.reset()
  t.equal((await get('/c/api/v1/tokens?limit=3')).headers['x-cache'], 'MISS')
  gw.writeConfig(config(fast, slow, downPort, `  - { id: late, scopes: [mirror], keys: [{ hash: ${hashCredential(fresh('late'))} }] }`))
  gw.child.kill('SIGHUP')
  await gw.waitFor(/config reloaded/)
  t.equal((await get('/c/api/v1/tokens?limit=3')).headers['x-cache'], 'HIT', 'still cached after the reload')
  t.equal(fast.requests.length, 1)
})
