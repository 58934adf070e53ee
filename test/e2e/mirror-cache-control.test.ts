/**
 * response-cache following the upstream's Cache-Control on mirror routes (issue 30, item 5): a real
 * gateway process with two `auto` mounts in front of the stand-in mirror node, whose
 * cache-control each test sets. `/f` follows the upstream (default `followUpstream: true`); `/k`
 * keeps the route classes over it (`followUpstream: false`). Blocks by number are the
 * `immutable` class (kept 1 h by class); the network supply is `current` (no class TTL).
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { hashCredential } from '../../core/projects/projects.ts'
import { startMirror, type MirrorStandIn } from '../../examples/upstreams/mirror.ts'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { mirrorGet } from '../helpers/mirror.ts'

const KEY = `cc_${randomBytes(12).toString('hex')}`
const ADMIN = `cc_admin_${randomBytes(12).toString('hex')}`

function route(name: string, mount: string, cache: string): string {
  return `  - name: ${name}
    methods: [GET]
    path: /${mount}/api/v1/*rest
    rewrite: /*rest
    upstream: mirror
    apiType: MIRROR
    errorFormat: mirror
    plugins:
      - { name: header-auth, config: { scope: mirror } }
      - { name: credit-meter, config: { cost: 1 } }
      - { name: response-cache, config: ${cache} }
      - { name: mirror-validate, config: { route: auto } }`
}

function config(mirror: MirrorStandIn): string {
  return `version: 1
server: { listen: { port: 0 } }
admin: { listen: { port: 0 }, tokenHash: ${hashCredential(ADMIN)} }
store: { dataDir: '{{DIR}}/data' }
log: { access: false }
watch: false
projects:
  - { id: main, scopes: [mirror], credits: { allocation: 100000 }, keys: [{ hash: ${hashCredential(KEY)} }] }
upstreams:
  mirror: { url: '${mirror.url}/api/v1' }
routes:
${route('follow', 'f', '{ maxTtlSeconds: 3600 }')}
${route('classes', 'k', '{ maxTtlSeconds: 3600, followUpstream: false }')}
`
}

let mirror: MirrorStandIn
let gw: GatewayProcess

t.before(async () => {
  mirror = await startMirror({ network: 'mainnet' })
  gw = await startGatewayProcess(config(mirror), { startTimeoutMs: 90_000 })
})
t.teardown(async () => {
  await gw?.stop()
  await mirror?.close()
})
t.beforeEach(() => {
  mirror.reset()
  mirror.cacheControl = undefined
})

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const cacheOf = async (path: string) => {
  const answer = await mirrorGet(gw.url, path, KEY)
  return answer.status === 200 ? answer.headers['x-cache'] : `status ${answer.status}`
}

t.test("max-age present: the upstream's wins over the immutable class", async (t) => {
  mirror.cacheControl = 'public, max-age=1'
  t.same([await cacheOf('/f/api/v1/blocks/11'), await cacheOf('/f/api/v1/blocks/11')], ['MISS', 'HIT'])
  t.same([await cacheOf('/k/api/v1/blocks/11'), await cacheOf('/k/api/v1/blocks/11')], ['MISS', 'HIT'])
  await sleep(1400)
  t.equal(await cacheOf('/f/api/v1/blocks/11'), 'MISS', 'expired after the upstream’s 1 s, not the class hour')
  t.equal(await cacheOf('/k/api/v1/blocks/11'), 'HIT', 'followUpstream: false keeps the class TTL')
  t.equal(mirror.requests.length, 3)
})

t.test('s-maxage is the shared-cache freshness: it wins over max-age', async (t) => {
  mirror.cacheControl = 'public, max-age=600, s-maxage=1'
  t.same([await cacheOf('/f/api/v1/blocks/12'), await cacheOf('/f/api/v1/blocks/12')], ['MISS', 'HIT'])
  await sleep(1400)
  t.equal(await cacheOf('/f/api/v1/blocks/12'), 'MISS')
})

t.test('no cache-control: fall back to the route classes', async (t) => {
  mirror.cacheControl = null
  t.equal(await cacheOf('/f/api/v1/blocks/14'), 'MISS')
  await sleep(1400)
  t.equal(await cacheOf('/f/api/v1/blocks/14'), 'HIT', 'immutable class: kept (1 h)')
  t.same([await cacheOf('/f/api/v1/network/supply'), await cacheOf('/f/api/v1/network/supply')], ['MISS', 'MISS'],
    'current class has no TTL of its own: not stored without an upstream max-age')
})

t.test('no-store, private and no-cache: never stored, whatever the class', async (t) => {
  for (const [i, control] of ['no-store', 'private, max-age=600', 'no-cache'].entries()) {
    mirror.cacheControl = control
    for (const mount of ['f', 'k']) {
      const path = `/${mount}/api/v1/blocks/${20 + i}`
      t.same([await cacheOf(path), await cacheOf(path)], ['MISS', 'MISS'], `${control} on /${mount}`)
    }
  }
  t.equal(mirror.requests.length, 12, 'every request went upstream')
})

t.test("the node's own per-route values (no override): current class kept for its max-age", async (t) => {
  // /network/supply: the node sends public, max-age=1 (stand-in as the node).
  t.same([await cacheOf('/f/api/v1/network/supply'), await cacheOf('/f/api/v1/network/supply')], ['MISS', 'HIT'])
  await sleep(1400)
  t.equal(await cacheOf('/f/api/v1/network/supply'), 'MISS')
})
