/**
 * The shared store engine next to the embedded one, in one run (ratios are what to read):
 *
 * 1. The typical chain (key-in-path auth, credit meter, rate limit) in two gateway processes, one on
 *    the embedded engine, one on the shared engine (PostgreSQL + Redis on this machine), same code
 *    and config otherwise; 50 connections. Reports req/s and gateway CPU per request (user + system
 *    of the gateway process, from /proc), rounds interleaved, medians, and shared / embedded.
 *    Targets (issue 26): req/s >= 0.6x embedded with PostgreSQL and Redis on the same 2 cores; gateway
 *    CPU per request <= 1.2x embedded at equal load (below).
 *    Then the same two gateways at one evenly paced rate below either's limit (`--paced-share` of the
 *    shared engine's median req/s, default 0.5; bench/lib/paced.ts): gateway CPU per request at
 *    equal load. At saturation, CPU per request is the busy share over req/s, so the two targets are
 *    coupled there (a gateway that serves fewer req/s on a full core spends more per request by
 *    definition, and every request then meets a busier machine); at equal load it is the work per
 *    request alone.
 * 2. Reserve + commit pairs per second against PostgreSQL alone (the shared engine's credit ledger,
 *    no gateway), with 1 and 50 pairs in flight, with credit leases (the default: a reservation
 *    needs no round trip, a commit one) and without (`leaseCredits: 0`: one round trip each).
 *
 *   node --import tsx bench/shared-store-bench.ts [--seconds 10] [--rounds 3] [--pairs 5000]
 *       [--postgres URL] [--redis URL]      (defaults: $DATABASE_URL / $REDIS_URL, else 127.0.0.1)
 *       [--profile DIR]                     (gateways run with --cpu-prof into DIR)
 *       [--no-pairs]                        (skip part 2)
 *       [--paced-share F]                   (equal-load rate as a share of the shared req/s; 0 skips it)
 *       [--paced-rate N]                    (equal load only, at N req/s: no saturation rounds; with --profile,
 *                                            profiles of the paced work alone, to compare engines per request)
 *       [--lease-credits N]                 (store.leaseCredits of the shared gateway; default: the config default)
 *       [--credit-commit durable|async|both] (store.creditCommit of the shared gateway; both: one gateway each, in the same rounds; default durable)
 *       [--charge-early true|false|both]    (store.chargeEarly of the shared gateways; both: one gateway each; default false)
 *       [--servers-anywhere]                (leave PostgreSQL and Redis where the OS puts them)
 *       [--servers-nice=N]                  (renice the gateway's PostgreSQL backends to N for the rounds)
 *       [--upstream node|nginx]             (the stand-in upstream: bench/upstream.ts, default, or nginx
 *                                            answering the same 200 bytes at a fraction of its CPU on the
 *                                            core the servers share; see "Core layout" below)
 *
 * For the shared engine it also reports the CPU of the PostgreSQL backends serving the gateway's
 * connections and of the Redis server (all of it: other clients count too), per request: the
 * gateway column alone leaves out the work the shared engine moves into those servers.
 *
 * Core layout as bench/lib/targets.ts: load generator and upstream on core 0, gateway on core 1.
 * PostgreSQL (the backends serving the gateway) and Redis are pinned to core 0 too for the rounds,
 * so each gateway has core 1 to itself as the embedded one does (left to the OS, the servers are
 * woken on the gateway's core and take from it while core 0 idles); Redis gets its own affinity back
 * at the end. `--servers-anywhere` leaves them to the OS. Reports how busy each core was.
 * Uses a fresh schema and key prefix, dropped at the end.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { setPriority, tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { parseArgs } from 'node:util'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { createClient } from 'redis'
import { openSharedStore } from '../core/store/shared/index.ts'
import { runAutocannon, runWrk, wrkVersion, type LoadResult } from './lib/load.ts'
import { runPaced } from './lib/paced.ts'
import { coreBusy, coreTimes, cpuMicros, cpuSplitMicros, freePort, pinSelf, startPinned, stopAll, waitForHttp, type Managed } from './lib/processes.ts'
import { median } from './lib/report.ts'
import { BENCH_KEY, LOAD_CORE, PROXY_CORE, startNginxUpstream, startUpstream, tollgateConfig } from './lib/targets.ts'
import { affinityOf, backendsOf, pinProcess, redisServerPid, serverCpu } from './lib/server-cpu.ts'

const ROOT = fileURLToPath(new URL('../', import.meta.url))
const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '3' },
    pairs: { type: 'string', default: '5000' },
    connections: { type: 'string', default: '50' },
    postgres: { type: 'string', default: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test' },
    redis: { type: 'string', default: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' },
    profile: { type: 'string' },
    'no-pairs': { type: 'boolean', default: false },
    'paced-share': { type: 'string', default: '0.5' },
    'paced-rate': { type: 'string' },
    'lease-credits': { type: 'string' },
    'credit-commit': { type: 'string', default: 'durable' },
    'charge-early': { type: 'string', default: 'false' },
    'servers-anywhere': { type: 'boolean', default: false },
    'servers-nice': { type: 'string' },
    upstream: { type: 'string', default: 'node' },
  },
})
const seconds = bounded('seconds', values.seconds, 1, 600)
const rounds = bounded('rounds', values.rounds, 1, 20)
const pairs = bounded('pairs', values.pairs, 10, 1_000_000)
const leaseSetting = values['lease-credits'] === undefined ? '' : `, leaseCredits: ${bounded('lease-credits', values['lease-credits'], 0, 1_000_000)}`
const creditCommit = values['credit-commit']
const chargeEarly = values['charge-early']
if (!['true', 'false', 'both'].includes(chargeEarly)) throw new Error(`--charge-early must be true, false or both, got ${chargeEarly}`)
if (creditCommit !== 'durable' && creditCommit !== 'async' && creditCommit !== 'both') throw new Error(`--credit-commit must be durable, async or both, got ${creditCommit}`)
const pacedShare = Number(values['paced-share'])
if (!(pacedShare >= 0 && pacedShare <= 1)) throw new Error(`--paced-share must be a number in [0, 1], got ${values['paced-share']}`)
if (values.upstream !== 'node' && values.upstream !== 'nginx') throw new Error(`--upstream must be node or nginx, got ${values.upstream}`)
const connections = bounded('connections', values.connections, 1, 1000)
const pacedRate = values['paced-rate'] === undefined ? undefined : bounded('paced-rate', values['paced-rate'], 1, 1_000_000)
const serversNice = values['servers-nice'] === undefined ? undefined : bounded('servers-nice', values['servers-nice'], -20, 19)
const schema = `tg_bench_${randomBytes(4).toString('hex')}`
const keyPrefix = `tgbench:${randomBytes(4).toString('hex')}:`
const dir = mkdtempSync(join(tmpdir(), 'tollgate-shared-bench-'))
// wrk (its own process on the load core) when installed, as bench/run.ts; else autocannon in process.
const loadTool = wrkVersion() ? 'wrk' : 'autocannon'
const runLoad = (url: string, s: number): Promise<LoadResult> => (loadTool === 'wrk' ? runWrk(url, s, connections) : runAutocannon(url, s, connections))

interface Engine {
  label: string
  proc: Managed
  url: string
  rps: number[]
  cpuPerRequest: number[]
  /** Shared engine only: PostgreSQL backends' and Redis server's CPU µs per request. */
  pgPerRequest: number[]
  redisPerRequest: number[]
  /** Busy share of core 0 (load, upstream, servers) and core 1 (gateway) per round. */
  coresBusy: number[][]
}

const redisAtStart = redisServerPid()
const redisAffinity = redisAtStart === undefined ? undefined : affinityOf(redisAtStart)
try {
  pinSelf(LOAD_CORE)
  const upstream = values.upstream === 'nginx' ? await startNginxUpstream(dir) : await startUpstream(dir)
  const embedded = await startGateway('embedded (SQLite)', `store:\n  dataDir: ./data\n`, upstream.url)
  const commits: ('durable' | 'async')[] = creditCommit === 'both' ? ['durable', 'async'] : [creditCommit]
  const earlies: boolean[] = chargeEarly === 'both' ? [false, true] : [chargeEarly === 'true']
  const shared: Engine[] = []
  for (const commit of commits) {
    for (const early of earlies) {
      const label = commits.length > 1 || earlies.length > 1 ? `shared, ${commit} commit${early ? ', early charges' : ''}` : `shared (PostgreSQL + Redis)${early ? ', early charges' : ''}`
      shared.push(
        await startGateway(
          label,
          `store: { engine: shared, postgres: "${values.postgres}", redis: "${values.redis}", schema: ${schema}, keyPrefix: "${keyPrefix}"${leaseSetting}, creditCommit: ${commit}, chargeEarly: ${early} }\n`,
          upstream.url,
        ),
      )
    }
  }
  const isShared = (engine: Engine) => engine !== embedded
  const engines = [embedded, ...shared]
  // Warm-up: JIT, pools, the balance rows (at the paced rate with --paced-rate, so a profile holds paced work only).
  for (const engine of engines) await (pacedRate === undefined ? runLoad(engine.url, Math.min(2, seconds)) : runPaced(engine.url, 2, pacedRate, connections))
  if (pacedRate !== undefined) await equalLoad(engines, pacedRate)
  else {
    for (let round = 0; round < rounds; round++) {
      // Each round starts with another engine, so a drift of the machine's speed falls on each in turn.
      for (const engine of rotate(engines, round)) {
        const backends = isShared(engine) ? await backendsOf(values.postgres, engine.proc.pid) : []
        const redisPid = isShared(engine) ? redisServerPid() : undefined
        if (!values['servers-anywhere']) for (const pid of [...backends, ...(redisPid === undefined ? [] : [redisPid])]) pinProcess(pid, String(LOAD_CORE))
        if (serversNice !== undefined) for (const pid of backends) setPriority(pid, serversNice)
        const serversBefore = serverCpu(backends, redisPid)
        const coresBefore = coreTimes()
        const before = cpuMicros(engine.proc.pid)
        const result = await runLoad(engine.url, seconds)
        const cpu = cpuMicros(engine.proc.pid) - before
        const serversAfter = serverCpu(backends, redisPid)
        engine.coresBusy.push(coreBusy(coresBefore, coreTimes()))
        if (result.failures > 0) console.error(`${engine.label}: ${result.failures} failed requests in round ${round + 1}`)
        const requests = Math.max(1, result.requests)
        engine.rps.push(result.rps)
        engine.cpuPerRequest.push(cpu / requests)
        engine.pgPerRequest.push((serversAfter.postgres - serversBefore.postgres) / requests)
        engine.redisPerRequest.push((serversAfter.redis - serversBefore.redis) / requests)
      }
    }
    const serverColumns = (e: Engine) => (isShared(e) ? `${median(e.pgPerRequest).toFixed(1)} | ${median(e.redisPerRequest).toFixed(1)}` : '— | —')
    const busy = (e: Engine) => e.coresBusy.map((cores) => cores.map((share) => `${(share * 100).toFixed(0)}%`).join('+')).join(' / ')
    const row = (e: Engine) =>
      `| ${e.label} | ${median(e.rps).toFixed(0)} | ${median(e.cpuPerRequest).toFixed(1)} | ${serverColumns(e)} | ${e.rps.map((r) => r.toFixed(0)).join(' / ')} | ${busy(e)} |`
    console.log(`\n### Typical chain, ${connections} connections, ${rounds} × ${seconds} s, ${loadTool}, ${values.upstream} upstream (medians)\n`)
    console.log(`Shared gateway: store.creditCommit ${commits.join(' and ')}${values['lease-credits'] === undefined ? '' : `, leaseCredits ${values['lease-credits']}`}\n`)
    console.log(`PostgreSQL backends and Redis: ${values['servers-anywhere'] ? 'where the OS puts them' : `pinned to core ${LOAD_CORE} (with the load generator and upstream); gateway on core ${PROXY_CORE}`}\n`)
    console.log('| engine | req/s | gateway CPU µs/request | PostgreSQL backends µs/request | Redis server µs/request | req/s per round | cores busy per round (load core + gateway core) |\n|---|---:|---:|---:|---:|---|---|')
    for (const engine of engines) console.log(row(engine))
    console.log('')
    for (const engine of shared) {
      const rpsRatio = median(engine.rps) / median(embedded.rps)
      const cpuRatio = median(engine.cpuPerRequest) / median(embedded.cpuPerRequest)
      console.log(`${engine.label} / embedded: req/s ${rpsRatio.toFixed(2)}× (target >= 0.6×), CPU per request at saturation ${cpuRatio.toFixed(2)}× (the CPU target is at equal load, below)`)
    }
    if (pacedShare > 0) await equalLoad(engines, Math.round(Math.min(...shared.map((engine) => median(engine.rps))) * pacedShare))
  }
  await stopAll()

  if (!values['no-pairs']) {
    console.log(`\n### Reserve + commit pairs against PostgreSQL alone (${pairs} pairs per run)\n`)
    console.log('| leases | in flight | pairs/s | ms per pair (wall, per request) | round trips (batches) per pair |\n|---|---:|---:|---:|---:|')
    for (const leaseCredits of [100, 0]) for (const inFlight of [1, 50]) console.log(await pairsPerSecond(inFlight, leaseCredits))
  }
} finally {
  if (redisAtStart !== undefined && redisAffinity !== undefined) pinProcess(redisAtStart, redisAffinity)
  await stopAll()
  await cleanUp()
  rmSync(dir, { recursive: true, force: true })
}

/** Both gateways at `rate` req/s, evenly paced, rounds interleaved: CPU per request at equal load. */
async function equalLoad(engines: Engine[], rate: number): Promise<void> {
  const perRequest = new Map<Engine, number[]>(engines.map((engine) => [engine, []]))
  const systemPerRequest = new Map<Engine, number[]>(engines.map((engine) => [engine, []]))
  const pgPerRequest = new Map<Engine, number[]>(engines.map((engine) => [engine, []]))
  // What each gateway kept up with: below the asked rate, "equal load" was saturation on a busy machine.
  const achieved = new Map<Engine, number[]>(engines.map((engine) => [engine, []]))
  const latency = new Map<Engine, { p50: number[]; p99: number[] }>(engines.map((engine) => [engine, { p50: [], p99: [] }]))
  let failures = 0
  for (let round = 0; round < rounds; round++) {
    for (const engine of rotate(engines, round)) {
      const backends = engine === engines[0] ? [] : await backendsOf(values.postgres, engine.proc.pid)
      // As in the saturation rounds: left to the OS, a backend is woken on the gateway's core.
      if (!values['servers-anywhere']) for (const pid of backends) pinProcess(pid, String(LOAD_CORE))
      if (serversNice !== undefined) for (const pid of backends) setPriority(pid, serversNice)
      const serversBefore = serverCpu(backends, undefined)
      const before = cpuSplitMicros(engine.proc.pid)
      const result = await runPaced(engine.url, seconds, rate, connections)
      // The paced generator's warm-up requests (not in result.requests) ran on the gateway too.
      const served = Math.max(1, result.requests + Math.round(rate * 0.5))
      const after = cpuSplitMicros(engine.proc.pid)
      perRequest.get(engine)!.push((after.total - before.total) / served)
      systemPerRequest.get(engine)!.push((after.system - before.system) / served)
      pgPerRequest.get(engine)!.push((serverCpu(backends, undefined).postgres - serversBefore.postgres) / served)
      achieved.get(engine)!.push(result.rps)
      latency.get(engine)!.p50.push(result.p50Ms)
      latency.get(engine)!.p99.push(result.p99Ms)
      failures += result.failures
    }
  }
  const [embedded, ...shared] = engines
  console.log(`\n### Equal load: every gateway at ${rate} req/s, evenly paced, ${connections} connections, ${rounds} × ${seconds} s (medians)\n`)
  console.log('| engine | gateway CPU µs/request | of which system (kernel) | PostgreSQL backends µs/request (every request is charged) | latency p50 / p99 ms | per round | req/s served per round |\n|---|---:|---:|---:|---:|---|---|')
  for (const engine of engines) {
    const pgColumn = engine === embedded ? '—' : median(pgPerRequest.get(engine)!).toFixed(1)
    console.log(`| ${engine.label} | ${median(perRequest.get(engine)!).toFixed(1)} | ${median(systemPerRequest.get(engine)!).toFixed(1)} | ${pgColumn} | ${median(latency.get(engine)!.p50).toFixed(2)} / ${median(latency.get(engine)!.p99).toFixed(2)} | ${perRequest.get(engine)!.map((v) => v.toFixed(1)).join(' / ')} | ${achieved.get(engine)!.map((v) => v.toFixed(0)).join(' / ')} |`)
  }
  console.log('')
  for (const engine of shared) console.log(`${engine.label} / embedded at equal load: CPU per request ${(median(perRequest.get(engine)!) / median(perRequest.get(embedded!)!)).toFixed(2)}× (target <= 1.2×, issue 26)`)
  if (failures) console.log(`${failures} failed requests`)
}

/** `items` starting at index `by` (mod length). */
function rotate<T>(items: T[], by: number): T[] {
  const at = by % items.length
  return [...items.slice(at), ...items.slice(0, at)]
}

async function startGateway(label: string, store: string, upstreamUrl: string): Promise<Engine> {
  const [port, adminPort] = [await freePort(), await freePort()]
  const configFile = join(mkdtempSync(join(dir, 'gw-')), 'gateway.yaml')
  const config = tollgateConfig({ port, adminPort, upstreamUrl, empty: false, typical: true }).replace(/store:\n {2}dataDir: \.\/data\n/, store)
  writeFileSync(configFile, config)
  // One file per gateway: the two shared ones ("shared, durable commit", "shared, async commit") must not share a name.
  const profileFlags = values.profile ? ['--cpu-prof', '--cpu-prof-dir', values.profile, '--cpu-prof-name', `${label.replace(/[^a-z0-9]+/gi, '-').replace(/^-|-$/g, '')}-${process.pid}.cpuprofile`] : []
  const proc = startPinned(label, PROXY_CORE, process.execPath, [...profileFlags, join(ROOT, 'bin/tollgate.js'), 'start', '-c', configFile])
  const url = `http://127.0.0.1:${port}/bench/${BENCH_KEY}`
  await waitForHttp(url, proc, 200, 60_000)
  return { label, proc, url, rps: [], cpuPerRequest: [], pgPerRequest: [], redisPerRequest: [], coresBusy: [] }
}

async function pairsPerSecond(inFlight: number, leaseCredits: number): Promise<string> {
  const store = await openSharedStore({ postgres: values.postgres, redis: values.redis, schema, keyPrefix, leaseCredits })
  try {
    const before = store.writeStats()
    let next = 0
    const started = performance.now()
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (next < pairs) {
          const id = `bench-${leaseCredits}-${inFlight}-${next++}`
          await store.reserveCredits({ id, projectId: 'bench-pairs', period: '2026-11', allocation: 1e12, amount: 1, apiType: 'PRIVNET_RPC' })
          await store.commitCredits(id)
          await store.closeCredits(id)
        }
      }),
    )
    const elapsedMs = performance.now() - started
    const batches = store.writeStats().batches - before.batches
    return `| ${leaseCredits > 0 ? `${leaseCredits} credits` : 'off'} | ${inFlight} | ${((pairs / elapsedMs) * 1000).toFixed(0)} | ${((elapsedMs / pairs) * inFlight).toFixed(2)} | ${(batches / pairs).toFixed(3)} |`
  } finally {
    await store.close()
  }
}

async function cleanUp(): Promise<void> {
  const client = new pg.Client({ connectionString: values.postgres })
  try {
    await client.connect()
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
  } catch (error) {
    console.error(`could not drop schema ${schema}: ${(error as Error).message}`)
  } finally {
    await client.end().catch(() => {})
  }
  const redis = createClient({ url: values.redis })
  redis.on('error', () => {})
  try {
    await redis.connect()
    for await (const keys of redis.scanIterator({ MATCH: `${keyPrefix}*`, COUNT: 500 })) if (keys.length) await redis.del(keys)
  } catch (error) {
    console.error(`could not delete Redis keys ${keyPrefix}*: ${(error as Error).message}`)
  } finally {
    if (redis.isOpen) await redis.close()
  }
}

function bounded(name: string, text: string, min: number, max: number): number {
  const n = Number(text)
  if (!Number.isInteger(n) || n < min || n > max) throw new Error(`--${name} must be an integer in [${min}, ${max}], got ${text}`)
  return n
}
