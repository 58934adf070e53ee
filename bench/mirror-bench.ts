/**
 * Mirror proxy figures (non-asserting; prints a table). One run, interleaved rounds:
 *
 * 1. Cache hits vs uncached proxying: req/s of GET /transactions/{id} through the full mirror chain
 *    (header-auth, credit-meter, mirror-validate, mirror-links) with response-cache, against the
 *    same route without it. Target: hits ≥ 2 × uncached. The same pair without credit-meter is
 *    measured too: the meter's SQLite reserve/commit/usage writes are paid by hits as well, and
 *    they are the largest share of the gateway's CPU per request.
 * 2. Validation overhead: p50 latency of the widest route, GET /contracts/{id}/results with eight
 *    query parameters (the most the API takes, and a path id), through the chain with mirror-validate
 *    (`route: auto`, the shipped shape: the operation is looked up in the OpenAPI table first) minus
 *    the same route without it, one connection, closed loop. Target: ≤ 0.2 ms. The rule check's own
 *    cost per call, measured in this process, is printed beside it.
 *
 * Core layout (2 cores): core 0 = this process (autocannon) + the stand-in mirror node; core 1 =
 * the gateway alone. Every process it starts is stopped by its PID at the end, on failure and
 * on SIGINT/SIGTERM.
 *
 * Usage: node --import tsx bench/mirror-bench.ts [--duration 4] [--rounds 3] [--connections 32]
 *                                               [--latency-duration 2] [--latency-rounds 6]
 *                                               [--profile DIR]   (gateway --cpu-prof into DIR)
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import autocannon from 'autocannon'
import { hashCredential } from '../core/projects/projects.ts'
import { checkMirrorOperation } from '../plugins/mirror-validate/operation-check.ts'
import { argValue } from './lib/args.ts'
import { runWrk, wrkVersion } from './lib/load.ts'
import { freePort, killAllSync, pinSelf, startPinned, stopAll, waitForHttp, waitForLine } from './lib/processes.ts'

const ROOT = fileURLToPath(new URL('../', import.meta.url))
const LOAD_CORE = 0
const GATEWAY_CORE = 1
const KEY = 'bench-mirror-key-0123456789abcdef'
const argv = process.argv.slice(2)
const bounded = (name: string, fallback: number, max: number) => {
  const value = Number(argValue(argv, name) ?? fallback)
  if (!(value > 0 && value <= max)) throw new Error(`--${name} must be in (0, ${max}], got ${value}`)
  return value
}
const options = {
  duration: bounded('duration', 4, 60),
  rounds: bounded('rounds', 3, 10),
  connections: bounded('connections', 32, 512),
  latencyDuration: bounded('latency-duration', 2, 30),
  latencyRounds: bounded('latency-rounds', 6, 20),
}
const log = (line: string) => console.error(`[mirror-bench] ${line}`)

const TX_PATH = '/transactions/0.0.1001-1700099999-000000000'
/** The widest route of the API: a path id and eight query parameters, every one with a value check. */
const WIDE_QUERY =
  '/contracts/0.0.1001/results?block.number=gte:10&from=0x' + 'ab'.repeat(20) + '&internal=true&limit=2&order=asc' +
  '&timestamp=gte:1700000000.000000000&timestamp=lt:1800000000&transaction.index=0&block.hash=0x' + 'cd'.repeat(32)

function route(name: string, tail: string, rewrite: string, rule: string, extra: string[], meter = true): string {
  const plugins = [
    '{ name: header-auth, config: { scope: mirror } }',
    ...(meter ? ['{ name: credit-meter, config: { apiType: MIRROR, cost: 1 } }'] : []),
    '{ name: mirror-links }',
    ...extra,
  ].map((p) => `      - ${p.replace('RULE', rule)}`)
  return `  - name: ${name}
    path: /${name}/api/v1/${tail}
    rewrite: ${rewrite}
    upstream: mirror
    apiType: MIRROR
    errorFormat: mirror
    plugins:
${plugins.join('\n')}`
}

function gatewayConfig(port: number, adminPort: number, mirrorUrl: string): string {
  const validate = '{ name: mirror-validate, config: { route: RULE } }'
  const cache = '{ name: response-cache, config: { maxTtlSeconds: 600 } }'
  return `version: 1
server: { listen: { host: 127.0.0.1, port: ${port} } }
admin: { listen: { host: 127.0.0.1, port: ${adminPort} } }
store: { dataDir: ./data }
log: { level: warn, access: false }
watch: false
projects:
  - { id: bench, scopes: [mirror], credits: { allocation: 1000000000000 }, keys: [{ hash: ${hashCredential(KEY)} }] }
upstreams:
  mirror: { url: '${mirrorUrl}/api/v1', connections: 64 }
routes:
${route('cached', '*rest', '/*rest', 'auto', [validate, cache])}
${route('uncached', '*rest', '/*rest', 'auto', [validate])}
${route('cached-unmetered', '*rest', '/*rest', 'auto', [validate, cache], false)}
${route('uncached-unmetered', '*rest', '/*rest', 'auto', [validate], false)}
${route('validated', '*rest', '/*rest', 'auto', [validate])}
${route('unvalidated', '*rest', '/*rest', 'auto', [])}
`
}

const THROUGHPUT_TARGETS = ['cached', 'uncached', 'cached-unmetered', 'uncached-unmetered'] as const
type ThroughputTarget = (typeof THROUGHPUT_TARGETS)[number]

interface Run {
  rps: number
  p50Ms: number
  failures: number
}

const wrk = wrkVersion()

/**
 * Closed-loop throughput: wrk (a C client, pinned to the load core) when installed. autocannon in
 * this process is the fallback: at these rates it spends more CPU per request than the gateway on a
 * hit, so the load core, not the gateway, would set the figure.
 */
async function throughputLoad(url: string, seconds: number, connections: number): Promise<Run> {
  if (!wrk) return load(url, seconds, connections)
  const result = await runWrk(url, seconds, connections, { 'x-api-key': KEY })
  return { rps: result.rps, p50Ms: result.p50Ms, failures: result.failures }
}

async function load(url: string, seconds: number, connections: number): Promise<Run> {
  const latencies: number[] = []
  const instance = autocannon({ url, connections, duration: seconds, timeout: 5, headers: { 'x-api-key': KEY } } as Parameters<typeof autocannon>[0])
  instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
    if (status === 200) latencies.push(ms)
  })
  const result = await instance
  latencies.sort((a, b) => a - b)
  return {
    rps: result.requests.total / result.duration,
    p50Ms: latencies[Math.floor(latencies.length / 2)] ?? NaN,
    failures: result.non2xx + result.errors + result.timeouts,
  }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]

/** Microseconds per call of the rule check alone, for the same request. */
function ruleCostMicros(): number {
  const url = new URL(WIDE_QUERY, 'http://x')
  const segments = url.pathname.split('/').slice(1)
  const run = (n: number) => {
    const started = performance.now()
    for (let i = 0; i < n; i++) {
      if (checkMirrorOperation('GET', segments, new URLSearchParams(url.search)).rejection) throw new Error('the wide query must be valid')
    }
    return ((performance.now() - started) * 1000) / n
  }
  run(20_000)
  return median([run(50_000), run(50_000), run(50_000)])
}

async function main(): Promise<void> {
  pinSelf(LOAD_CORE)
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-mirror-bench-'))
  try {
    // The stand-in records every request; the bench resets it every second to bound its memory.
    const standInScript = `const { startMirror } = await import(${JSON.stringify(join(ROOT, 'examples/upstreams/mirror.ts'))});
const m = await startMirror({ network: 'mainnet' });
setInterval(() => m.reset(), 1000);
console.log(JSON.stringify({ ready: true, url: m.url }));`
    const mirror = startPinned('mirror', LOAD_CORE, process.execPath, ['--import', 'tsx', '--input-type=module', '-e', standInScript])
    const { url: mirrorUrl } = JSON.parse(await waitForLine(mirror, /"ready":true/))
    const [port, adminPort] = [await freePort(), await freePort()]
    writeFileSync(join(dir, 'gateway.yaml'), gatewayConfig(port, adminPort, mirrorUrl))
    const profile = argValue(argv, 'profile')
    const nodeFlags = profile ? ['--cpu-prof', '--cpu-prof-dir', profile] : []
    const gateway = startPinned('gateway', GATEWAY_CORE, process.execPath, [...nodeFlags, join(ROOT, 'bin/tollgate.js'), 'start', '-c', join(dir, 'gateway.yaml')])
    const base = `http://127.0.0.1:${port}`
    await waitForHttp(`${base}/cached/api/v1${TX_PATH}`, gateway, 401, 30_000)
    const urls = {
      cached: `${base}/cached/api/v1${TX_PATH}`,
      uncached: `${base}/uncached/api/v1${TX_PATH}`,
      'cached-unmetered': `${base}/cached-unmetered/api/v1${TX_PATH}`,
      'uncached-unmetered': `${base}/uncached-unmetered/api/v1${TX_PATH}`,
      validated: `${base}/validated/api/v1${WIDE_QUERY}`,
      unvalidated: `${base}/unvalidated/api/v1${WIDE_QUERY}`,
    }
    for (const [name, url] of Object.entries(urls)) {
      const res = await fetch(url, { headers: { 'x-api-key': KEY } })
      await res.arrayBuffer()
      if (res.status !== 200) throw new Error(`${name}: sanity GET answered ${res.status}`)
    }
    log(`warm-up; then ${options.rounds} rounds × ${options.duration} s per throughput target, ${options.connections} connections`)
    log(`throughput load generator: ${wrk ? `wrk ${wrk}` : 'autocannon (wrk not installed)'}`)
    for (const name of THROUGHPUT_TARGETS) await throughputLoad(urls[name], 1, options.connections)
    const throughput = Object.fromEntries(THROUGHPUT_TARGETS.map((name) => [name, [] as Run[]])) as Record<ThroughputTarget, Run[]>
    for (let round = 1; round <= options.rounds; round++) {
      for (const name of round % 2 ? THROUGHPUT_TARGETS : [...THROUGHPUT_TARGETS].reverse()) {
        throughput[name].push(await throughputLoad(urls[name], options.duration, options.connections))
        log(`round ${round} ${name}: ${throughput[name].at(-1)!.rps.toFixed(0)} req/s`)
      }
    }
    log(`${options.latencyRounds} rounds × ${options.latencyDuration} s per latency target, 1 connection`)
    await load(urls.validated, 1, 1)
    await load(urls.unvalidated, 1, 1)
    const latency: Record<'validated' | 'unvalidated', Run[]> = { validated: [], unvalidated: [] }
    for (let round = 1; round <= options.latencyRounds; round++) {
      for (const name of round % 2 ? (['validated', 'unvalidated'] as const) : (['unvalidated', 'validated'] as const)) {
        latency[name].push(await load(urls[name], options.latencyDuration, 1))
      }
    }
    const ruleMicros = ruleCostMicros()
    report(throughput, latency, ruleMicros)
  } finally {
    await stopAll()
    rmSync(dir, { recursive: true, force: true })
  }
}

function report(throughput: Record<ThroughputTarget, Run[]>, latency: Record<'validated' | 'unvalidated', Run[]>, ruleMicros: number): void {
  const rps = (runs: Run[]) => median(runs.map((r) => r.rps))
  const p50 = (runs: Run[]) => median(runs.map((r) => r.p50Ms))
  const failures = (runs: Run[]) => runs.reduce((sum, r) => sum + r.failures, 0)
  const ratio = rps(throughput.cached) / rps(throughput.uncached)
  const unmeteredRatio = rps(throughput['cached-unmetered']) / rps(throughput['uncached-unmetered'])
  const perRoundDelta = latency.validated.map((run, i) => run.p50Ms - latency.unvalidated[i].p50Ms)
  const delta = median(perRoundDelta)
  const lines = [
    '',
    '| measure | value | target |',
    '|---|---|---|',
    `| cache hits, req/s (median of ${throughput.cached.length}) | ${rps(throughput.cached).toFixed(0)} | |`,
    `| uncached proxying, req/s (median of ${throughput.uncached.length}) | ${rps(throughput.uncached).toFixed(0)} | |`,
    `| hits / uncached | ${ratio.toFixed(2)}× | ≥ 2× ${ratio >= 2 ? 'met' : 'NOT met'} |`,
    `| same chain without credit-meter: cache hits, req/s | ${rps(throughput['cached-unmetered']).toFixed(0)} | |`,
    `| same chain without credit-meter: uncached, req/s | ${rps(throughput['uncached-unmetered']).toFixed(0)} | |`,
    `| same chain without credit-meter: hits / uncached | ${unmeteredRatio.toFixed(2)}× | ≥ 2× ${unmeteredRatio >= 2 ? 'met' : 'NOT met'} |`,
    `| p50 with mirror-validate, ms | ${p50(latency.validated).toFixed(3)} | |`,
    `| p50 without, ms | ${p50(latency.unvalidated).toFixed(3)} | |`,
    `| validation overhead at p50, ms (median of per-round deltas) | ${delta.toFixed(3)} | ≤ 0.2 ${delta <= 0.2 ? 'met' : 'NOT met'} |`,
    `| rule check alone, µs per call (in-process) | ${ruleMicros.toFixed(2)} | |`,
    `| failed requests (non-2xx, errors, timeouts) | ${failures([...Object.values(throughput).flat(), ...latency.validated, ...latency.unvalidated])} | 0 |`,
    '',
    `per-round p50 deltas, ms: ${perRoundDelta.map((d) => d.toFixed(3)).join(', ')}`,
  ]
  console.log(lines.join('\n'))
}

process.once('exit', killAllSync)
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void stopAll().finally(() => process.exit(130))
  })
}
main().catch((error) => {
  console.error(error)
  process.exitCode = 1
})
