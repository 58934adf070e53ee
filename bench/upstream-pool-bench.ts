/**
 * Upstream pool figures (non-asserting; prints a table). One run:
 *
 * 1. Slow tail: two mirror stand-ins, one (`a`) with 5% of its answers held 500 ms (status front,
 *    test/helpers/status-front.ts). Three pools of the same two targets, rounds interleaved:
 *    `round-robin` (balance: round-robin, no hedging: what nginx or one upstream URL per node
 *    does; the "without"), `least-loaded` (the default choice, no hedging) and `hedged` (the
 *    default choice + hedged reads after the p95 of recent head latency, floor --hedge-floor ms),
 *    and `hedged-rr` (round-robin + the same hedging: what hedging alone does).
 *    Goals: client p99 with hedging ≥ 5× lower than without; extra upstream requests (hits at
 *    both fronts over client requests) ≤ 10%.
 * 2. Failover: one of two targets killed (its TCP relay stops listening and resets its
 *    connections) under closed-loop load. Goals: 0 client errors; traffic moved within 1 s (the
 *    last attempt at the dead target before it leaves the choice, from the target's request
 *    counter sampled every 20 ms).
 * 3. Pool of one against today's single upstream, typical chain: run
 *    `node --import tsx bench/revision-bench.ts --baseline main --chain typical` (the single-URL form
 *    is a pool of one in the working tree; the baseline is the code before pools).
 *
 * Usage: node --import tsx bench/upstream-pool-bench.ts [--duration 5] [--rounds 2] [--connections 16] [--hedge-floor 25] [--skip-failover]
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { Agent, request } from 'undici'
import { startMirror } from '../examples/upstreams/mirror.ts'
import { startStatusFront } from '../test/helpers/status-front.ts'
import { startFaultProxy } from '../test/reliability/harness/fault-proxy.ts'
import { freePort, killAllSync, startPinned, stopAll, waitForHttp } from './lib/processes.ts'

const ROOT = fileURLToPath(new URL('../', import.meta.url))
const { values } = parseArgs({ options: { duration: { type: 'string', default: '5' }, rounds: { type: 'string', default: '2' }, connections: { type: 'string', default: '16' }, 'hedge-floor': { type: 'string', default: '25' }, 'skip-failover': { type: 'boolean', default: false }, pools: { type: 'string', default: 'round-robin,hedged-rr,least-loaded,hedged' } } })
const seconds = Number(values.duration)
const rounds = Number(values.rounds)
const connections = Number(values.connections)
const log = (line: string) => console.error(`[upstream-pool-bench] ${line}`)

const PATH = '/accounts?limit=2'

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0
}

/** Closed loop: `connections` clients for `ms`; latencies of answers, and failures. */
async function load(url: string, ms: number, agent: Agent): Promise<{ latencies: number[]; failures: number; requests: number }> {
  const latencies: number[] = []
  let failures = 0
  const end = Date.now() + ms
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (Date.now() < end) {
        const started = performance.now()
        try {
          const res = await request(url, { dispatcher: agent })
          await res.body.dump()
          if (res.statusCode !== 200) failures++
          else latencies.push(performance.now() - started)
        } catch {
          failures++
        }
      }
    }),
  )
  return { latencies, failures, requests: latencies.length + failures }
}

async function metricValue(adminUrl: string, name: string, labels: Record<string, string>): Promise<number> {
  const text = await (await request(`${adminUrl}/metrics`)).body.text()
  let sum = 0
  for (const line of text.split('\n')) {
    if (!line.startsWith(name + '{')) continue
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) sum += Number(line.slice(line.lastIndexOf(' ') + 1))
  }
  return sum
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-pool-bench-'))
  const mirrors = [await startMirror({ network: 'testnet' }), await startMirror({ network: 'testnet' })]
  const fronts = [await startStatusFront(mirrors[0].url), await startStatusFront(mirrors[1].url)]
  fronts[0].slowShare = 0.05
  fronts[0].delayMs = 500
  const proxies = [await startFaultProxy(mirrors[0].url), await startFaultProxy(mirrors[1].url)]
  const [port, adminPort] = [await freePort(), await freePort()]
  const targets = (urls: string[]) => `[${urls.map((u, i) => `{ url: '${u}/api/v1', name: ${'ab'[i]} }`).join(', ')}]`
  const config = `version: 1
server: { listen: { host: 127.0.0.1, port: ${port} } }
admin: { listen: { host: 127.0.0.1, port: ${adminPort} } }
store: { dataDir: ./data }
log: { level: warn, access: false }
watch: false
upstreams:
${values.pools.includes('round-robin') ? `  round-robin: { targets: ${targets(fronts.map((f) => f.url))}, balance: round-robin }` : ''}
  least-loaded: { targets: ${targets(fronts.map((f) => f.url))} }
  hedged: { targets: ${targets(fronts.map((f) => f.url))}, hedge: { percentile: 95, afterMs: ${Number(values['hedge-floor'])} } }
  hedged-rr: { targets: ${targets(fronts.map((f) => f.url))}, balance: round-robin, hedge: { percentile: 95, afterMs: ${Number(values['hedge-floor'])} } }
  failover: { targets: ${targets(proxies.map((p) => p.url))}, timeouts: { connectMs: 500 } }
routes:
${values.pools.includes('round-robin') ? `  - { name: round-robin, path: '/round-robin/*rest', rewrite: '/*rest', upstream: round-robin }` : ''}
  - { name: least-loaded, path: '/least-loaded/*rest', rewrite: '/*rest', upstream: least-loaded }
  - { name: hedged, path: '/hedged/*rest', rewrite: '/*rest', upstream: hedged }
  - { name: hedged-rr, path: '/hedged-rr/*rest', rewrite: '/*rest', upstream: hedged-rr }
  - { name: failover, path: '/failover/*rest', rewrite: '/*rest', upstream: failover }
`
  const configFile = join(dir, 'gateway.yaml')
  writeFileSync(configFile, config)
  const gateway = startPinned('gateway', 1, process.execPath, [join(ROOT, 'bin/tollgate.js'), 'start', '-c', configFile])
  const base = `http://127.0.0.1:${port}`
  const adminUrl = `http://127.0.0.1:${adminPort}`
  const agent = new Agent({ connections, pipelining: 1 })
  try {
    await waitForHttp(`${base}/least-loaded${PATH}`, gateway, 200, 60_000)
    const pools = values.pools.split(',')
    // Warm-up (and the hedged pool's latency window).
    for (const name of pools) await load(`${base}/${name}${PATH}`, 2000, agent)
    const results: Record<string, { latencies: number[]; requests: number; hits: number; hitsA: number; failures: number }> = {}
    for (const name of pools) results[name] = { latencies: [], requests: 0, hits: 0, hitsA: 0, failures: 0 }
    for (let r = 0; r < rounds; r++) {
      // Rotated each round so no pool always runs first or last.
      for (const name of pools.slice(r % pools.length).concat(pools.slice(0, r % pools.length))) {
        const hitsBefore = fronts[0].hits + fronts[1].hits
        const hitsABefore = fronts[0].hits
        const run = await load(`${base}/${name}${PATH}`, seconds * 1000, agent)
        const target = results[name]
        target.latencies.push(...run.latencies)
        target.requests += run.requests
        target.failures += run.failures
        target.hits += fronts[0].hits + fronts[1].hits - hitsBefore
        target.hitsA += fronts[0].hits - hitsABefore
        log(`round ${r + 1} ${name}: ${run.requests} requests`)
      }
    }
    const row = (name: string) => {
      const r = results[name]
      const sorted = r.latencies.sort((a, b) => a - b)
      return { name, requests: r.requests, p50: percentile(sorted, 50), p99: percentile(sorted, 99), extra: (r.hits - r.requests) / r.requests, shareA: r.hitsA / r.hits, failures: r.failures }
    }
    const rows = pools.map(row)
    const [rr, ll, hedged] = ['round-robin', 'least-loaded', 'hedged'].map((name) => rows.find((r) => r.name === name) ?? rows[0])
    console.log(`## Slow tail: 5% of target a's answers at 500 ms (${rounds} rounds × ${seconds} s per pool, ${connections} connections, hedge floor ${values['hedge-floor']} ms)\n`)
    console.log('| pool | requests | p50 ms | p99 ms | extra upstream requests | share of attempts at a (slow) | client errors |')
    console.log('|---|---:|---:|---:|---:|---:|---:|')
    for (const r of rows) console.log(`| ${r.name} | ${r.requests} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${(r.extra * 100).toFixed(1)}% | ${(r.shareA * 100).toFixed(1)}% | ${r.failures} |`)
    console.log(`\np99 round-robin / hedged: ${(rr.p99 / hedged.p99).toFixed(1)}× (goal ≥ 5×); least-loaded / hedged: ${(ll.p99 / hedged.p99).toFixed(1)}×; extra upstream requests with hedging: ${(hedged.extra * 100).toFixed(1)}% (goal ≤ 10%)\n`)
    const hedgedRr = rows.find((r) => r.name === 'hedged-rr')
    // Hedging's own effect: the same round-robin choice with and without it (least-loaded already
    // steers away from a target that holds slow requests, so beside it hedging has less to win).
    if (hedgedRr) console.log(`p99 round-robin / hedged-rr (hedging alone, same choice): ${(rr.p99 / hedgedRr.p99).toFixed(1)}×; extra upstream requests: ${(hedgedRr.extra * 100).toFixed(1)}%\n`)
    if (values['skip-failover']) return

    // 2. Failover.
    await load(`${base}/failover${PATH}`, 1000, agent)
    const samples: { at: number; a: number }[] = []
    let sampling = true
    const sampler = (async () => {
      while (sampling) {
        samples.push({ at: Date.now(), a: await metricValue(adminUrl, 'tollgate_upstream_target_requests_total', { upstream: 'failover', target: 'a' }) })
        await new Promise((r) => setTimeout(r, 20))
      }
    })()
    let killedAt = 0
    const killer = (async () => {
      await new Promise((r) => setTimeout(r, 1500))
      killedAt = Date.now()
      await proxies[0].setMode('refuse')
    })()
    const run = await load(`${base}/failover${PATH}`, 5000, agent)
    await killer
    sampling = false
    await sampler
    // The last increase of a's attempts before its first quiet stretch (the ejection; half-open probes come later).
    let movedAt = killedAt
    for (let i = 1; i < samples.length; i++) {
      if (samples[i].at < killedAt) continue
      if (samples[i].a > samples[i - 1].a) movedAt = samples[i].at
      else if (samples[i].at - movedAt > 300) break
    }
    console.log(`## Failover: target a killed after 1.5 s of a 5 s closed-loop run (${connections} connections)\n`)
    console.log(`| requests | client errors | traffic moved after |`)
    console.log(`|---:|---:|---:|`)
    console.log(`| ${run.requests} | ${run.failures} | ${movedAt - killedAt} ms (±20 ms sampling) |`)
  } finally {
    await agent.close()
    await stopAll()
    for (const p of proxies) await p.close()
    for (const f of fronts) await f.close()
    await Promise.allSettled(mirrors.map((m) => m.close()))
    rmSync(dir, { recursive: true, force: true })
  }
}

process.once('SIGINT', () => void stopAll().finally(() => process.exit(130)))
process.on('exit', killAllSync)
main().catch((error) => {
  console.error(`[upstream-pool-bench] failed: ${(error as Error).stack ?? error}`)
  process.exitCode = 1
})
