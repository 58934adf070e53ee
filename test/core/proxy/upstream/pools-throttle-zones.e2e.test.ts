/**
 * Upstream pools end to end, two behaviours a client notices (a real gateway process, a real mirror
 * stand-in behind HTTP status fronts that count every request they receive):
 *
 * - A lone target (and a pool whose every target) answering 429 with Retry-After: while the
 *   Retry-After lasts the gateway answers 429 `upstream_throttled` itself, with a Retry-After, sends
 *   nothing and charges nothing; then the share sent climbs back over breaker.recoverMs.
 * - preferZone: the local zone takes all traffic; the other zone only while the local target is
 *   ejected, and the local one takes it back after its half-open probe.
 * - A hedge's loser runs to its end unseen: its latency counts against its target (it was
 *   cancelled before, so a slow target looked fast and kept its share).
 */
import t from 'tap'
import { request } from 'undici'
import { startGatewayProcess } from '../../../helpers/gateway-process.ts'
import { startStatusFront, type StatusFront } from '../../../helpers/status-front.ts'
import { ADMIN_TOKEN, KEY, PROJECT } from '../../../reliability/harness/environment.ts'
import { metric, settledCreditsUsed } from '../../../reliability/harness/admin.ts'
import { hashCredential } from '../../../../core/projects/projects.ts'
import { startMirror } from '../../../../examples/upstreams/mirror.ts'

t.setTimeout(300_000)

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

function config(lone: StatusFront, p1: StatusFront, p2: StatusFront, eu: StatusFront, us: StatusFront, h1: StatusFront, h2: StatusFront): string {
  const plugins = `[{ name: header-auth, config: { header: x-api-key, scope: mirror } }, { name: credit-meter, config: { apiType: MIRROR, cost: 1 } }]`
  const route = (name: string, upstream: string) => `  - { name: ${name}, methods: [GET], path: '/${name}/*rest', rewrite: '/*rest', upstream: ${upstream}, apiType: MIRROR, plugins: ${plugins} }`
  return `version: 1
server: { listen: { host: 127.0.0.1, port: 0 }, drainTimeoutMs: 1000 }
admin: { listen: { host: 127.0.0.1, port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
log: { level: info, access: true }
projects:
  - id: ${PROJECT}
    plan: enterprise
    scopes: [mirror]
    credits: { allocation: 1000000, period: month }
    keys: [{ label: k, hash: ${hashCredential(KEY)} }]
upstreams:
  lone: { url: '${lone.url}/api/v1', breaker: { recoverMs: 3000 } }
  pair: { targets: [{ url: '${p1.url}/api/v1', name: a }, { url: '${p2.url}/api/v1', name: b }], breaker: { recoverMs: 300 } }
  zoned:
    targets: [{ url: '${eu.url}/api/v1', name: eu1, zone: eu }, { url: '${us.url}/api/v1', name: us1, zone: us }]
    preferZone: us
    health: { consecutiveFailures: 2, baseEjectionMs: 1500 }
  hedged: { targets: [{ url: '${h1.url}/api/v1', name: h1, weight: 1000 }, { url: '${h2.url}/api/v1', name: h2 }], hedge: { afterMs: 150 } }
routes:
${route('lone', 'lone')}
${route('pair', 'pair')}
${route('zoned', 'zoned')}
${route('hedged', 'hedged')}
`
}

interface Answer {
  status: number
  code?: string
  retryAfter?: string
}

t.test('429 from every target: the gateway answers itself, sends nothing, charges nothing, then recovers gradually; preferZone', async (t) => {
  const mirror = await startMirror({ network: 'testnet' })
  const fronts: StatusFront[] = []
  for (let i = 0; i < 7; i++) fronts.push(await startStatusFront(mirror.url))
  const [lone, p1, p2, eu, us, h1, h2] = fronts
  const gw = await startGatewayProcess(config(lone, p1, p2, eu, us, h1, h2), { startTimeoutMs: 120_000 })
  t.teardown(async () => {
    await gw.stop()
    for (const f of fronts) await f.close()
    await mirror.close()
  })
  const get = async (route: string): Promise<Answer> => {
    const res = await request(`${gw.url}/${route}/accounts?limit=1`, { headers: { 'x-api-key': KEY } })
    const text = await res.body.text()
    let code: string | undefined
    try {
      code = (JSON.parse(text) as { error?: { code?: string } }).error?.code
    } catch {}
    const retryAfter = res.headers['retry-after'] as string | undefined
    return { status: res.statusCode, ...(code ? { code } : {}), ...(retryAfter ? { retryAfter } : {}) }
  }
  const used = () => settledCreditsUsed(gw.adminUrl)
  t.equal((await get('lone')).status, 200, 'lone target answers')

  // A lone target answers 429 with Retry-After: 3 (requests below stop at 1.5 s: margin for a loaded machine).
  lone.mode = '429'
  lone.retryAfterS = 3
  const creditsBefore = await used()
  const first = await get('lone')
  const throttledAt = Date.now()
  t.equal(first.status, 429, "the upstream's own 429 reaches the client")
  lone.mode = 'pass'
  const hitsBefore = lone.hits
  const during: Answer[] = []
  for (let i = 0; i < 8 && Date.now() - throttledAt < 1500; i++) during.push(await get('lone'))
  t.ok(during.length >= 1, `requests sent inside the Retry-After (${during.length})`)
  t.ok(during.every((a) => a.status === 429 && a.code === 'upstream_throttled'), 'inside Retry-After: 429 upstream_throttled from the gateway')
  t.ok(during.every((a) => Number(a.retryAfter) >= 1 && Number(a.retryAfter) <= 3), `with Retry-After (${during.map((a) => a.retryAfter).join(',')})`)
  t.equal(lone.hits - hitsBefore, 0, 'nothing sent to the throttled target')
  t.equal((await used()) - creditsBefore, 1, "the upstream's 429 is charged as any answer of the upstream (refund policy: 502/504 and 5xx), the gateway's own 429s are not")

  // After the Retry-After: a share that climbs over recoverMs (3 s).
  await sleep(Math.max(0, throttledAt + 3100 - Date.now()))
  const rampHits = lone.hits
  const ramp: Answer[] = []
  for (let i = 0; i < 12; i++) ramp.push(await get('lone'))
  const served = ramp.filter((a) => a.status === 200).length
  const refused = ramp.filter((a) => a.code === 'upstream_throttled').length
  t.equal(served + refused, ramp.length, 'during the ramp: answered or refused by the gateway, nothing else')
  t.ok(served >= 1, `the ramp lets some through (${served}/${ramp.length})`)
  t.ok(refused >= 1, `but not all at once (${refused} refused)`)
  t.equal(lone.hits - rampHits, served, 'the target received exactly the requests that were served')
  await sleep(Math.max(0, throttledAt + 3000 + 3200 - Date.now()))
  const after: Answer[] = []
  for (let i = 0; i < 5; i++) after.push(await get('lone'))
  t.same(after.map((a) => a.status), [200, 200, 200, 200, 200], 'after the ramp: full traffic')

  // A pool whose every target answers 429: tried once each, then answered by the gateway.
  p1.mode = '429'
  p2.mode = '429'
  const before = p1.hits + p2.hits
  const pairFirst = await get('pair')
  t.equal(pairFirst.status, 429, 'both targets 429: the client gets the 429')
  t.equal(p1.hits + p2.hits - before, 2, 'each target was asked once (one retry)')
  const pairCredits = await used()
  const pairNext = [await get('pair'), await get('pair'), await get('pair')]
  t.ok(pairNext.every((a) => a.code === 'upstream_throttled' && a.retryAfter === '1'), 'then 429 upstream_throttled with Retry-After from the gateway')
  t.equal(p1.hits + p2.hits - before, 2, 'and nothing more sent')
  t.equal((await used()) - pairCredits, 0, 'not charged')
  p1.mode = 'pass'
  p2.mode = 'pass'
  await sleep(1500)
  t.equal((await get('pair')).status, 200, 'after Retry-After and the ramp the pool serves again')

  // preferZone: us takes everything while healthy.
  const zone = () => ({ eu: eu.hits, us: us.hits })
  let z0 = zone()
  for (let i = 0; i < 10; i++) t.equal((await get('zoned')).status, 200)
  t.same({ eu: eu.hits - z0.eu, us: us.hits - z0.us }, { eu: 0, us: 10 }, 'all ten to the preferred zone')
  us.mode = '503'
  z0 = zone()
  const failover: number[] = []
  for (let i = 0; i < 6; i++) failover.push((await get('zoned')).status)
  t.same(failover, [200, 200, 200, 200, 200, 200], 'the local target failing: the other zone answers every read')
  t.equal(us.hits - z0.us, 2, 'the local target was tried twice (consecutiveFailures), then ejected')
  us.mode = 'pass'
  await sleep(1700)
  z0 = zone()
  for (let i = 0; i < 5; i++) await get('zoned')
  t.same({ eu: eu.hits - z0.eu, us: us.hits - z0.us }, { eu: 0, us: 5 }, 'after its ejection the local target takes the traffic back')

  // A hedge's loser: answered by h2 after 150 ms; h1's slow answer still arrives and is timed.
  t.equal((await get('hedged')).status, 200, 'hedged upstream answers')
  h1.mode = 'slow-head'
  h1.delayMs = 1500
  const h0 = { h1: h1.hits, h2: h2.hits, used: await used() }
  const startedAt = Date.now()
  const hedged = await get('hedged')
  const ms = Date.now() - startedAt
  t.same({ status: hedged.status, h1: h1.hits - h0.h1, h2: h2.hits - h0.h2, charged: (await used()) - h0.used }, { status: 200, h1: 1, h2: 1, charged: 1 }, 'slow head: hedged, charged once')
  t.ok(ms < 1200, `answered by the hedge (${ms} ms)`)
  await sleep(1700)
  h1.mode = 'pass'
  const seconds = await metric(gw.adminUrl, 'tollgate_upstream_target_answer_seconds_total', { upstream: 'hedged', target: 'h1' })
  t.ok(seconds >= 1.4, `the abandoned attempt's 1.5 s head latency counts against h1 (${seconds.toFixed(3)} s in total)`)
})
