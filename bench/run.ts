/**
 * tollgate's load harness: one run measures every target in turn, interleaved over rounds, on a
 * fixed core layout (core 0: load generator + upstream; core 1: the system under test).
 *
 * Usage:
 *   npm run bench -- [--duration 10] [--connections 50] [--rounds 3] [--warmup 3]
 *                    [--only direct,nginx,bare-undici,fastify-proxy,tollgate-empty,tollgate-typical]
 *                    [--rate 2000] [--rate-duration 6] [--rate-connections 10] [--rate-rounds 4] [--no-rate]
 *                    [--proxy-node-flags "--max-semi-space-size=32"] [--separate-tollgates]
 *                    [--nice -10] [--profile] [--json FILE]
 *
 * Every process it starts is stopped by its PID at the end, on failure and on SIGINT.
 */
import { existsSync, readFileSync, rmSync, writeFileSync, readdirSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { argFlag, argValue } from './lib/args.ts'
import { coreBusy, coreTimes, cpuMicros, killAllSync, pinSelf, setNiceness, stopAll, stopProcess } from './lib/processes.ts'
import { runAutocannon, runWrk, wrkVersion, type LoadResult } from './lib/load.ts'
import { runFixedRate, type PairedRun } from './lib/fixed-rate.ts'
import { fixedRateTable, ratioTable, summarise, throughputTable, type Round, type Summary } from './lib/report.ts'
import { LABELS, LOAD_CORE, missingTypicalPlugins, PROXY_CORE, scratchDir, startTarget, startUpstream, TARGET_NAMES, type Target, type TargetName } from './lib/targets.ts'
import { summariseProfile } from './profile-summary.ts'

const argv = process.argv.slice(2)
const num = (name: string, fallback: number) => Number(argValue(argv, name) ?? fallback)
const options = {
  duration: num('duration', 10),
  connections: num('connections', 50),
  rounds: num('rounds', 3),
  warmup: num('warmup', 3),
  rate: num('rate', 2000),
  rateDuration: num('rate-duration', 6),
  rateConnections: num('rate-connections', 10),
  rateRounds: num('rate-rounds', 4),
  nice: Number(argValue(argv, 'nice') ?? 0),
  noRate: argFlag(argv, 'no-rate'),
  profile: argFlag(argv, 'profile'),
  /** Extra node flags for the Node proxies under test only (never the load generators). */
  proxyNodeFlags: argValue(argv, 'proxy-node-flags')?.split(' ').filter(Boolean) ?? [],
  /** Empty and typical chain in separate gateway processes (default: two routes of one gateway). */
  separateTollgates: argFlag(argv, 'separate-tollgates'),
  json: argValue(argv, 'json'),
  only: argValue(argv, 'only')?.split(',').map((s) => s.trim()).filter(Boolean),
}
// Bounded: every run of the harness ends in minutes, whatever the flags.
const LIMITS: Record<string, number> = { duration: 120, connections: 1000, rounds: 10, warmup: 60, rate: 50_000, rateDuration: 120, rateConnections: 1000, rateRounds: 10 }
for (const [name, max] of Object.entries(LIMITS)) {
  const value = options[name as keyof typeof options] as number
  if (!(value > 0 && value <= max)) throw new Error(`--${name.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase())} must be a number in (0, ${max}], got ${value}`)
}
const unknown = options.only?.filter((name) => !(TARGET_NAMES as readonly string[]).includes(name))
if (!Number.isInteger(options.nice) || options.nice < -20 || options.nice > 0) throw new Error(`--nice must be an integer in [-20, 0], got ${options.nice}`)
if (unknown?.length) throw new Error(`--only: unknown target(s) ${unknown.join(', ')}; known: ${TARGET_NAMES.join(', ')}`)

/** The proxies the fixed-rate phase pairs with `direct`, when they run. */
const RATE_PROXIES: readonly TargetName[] = ['nginx', 'bare-undici', 'tollgate-empty']

const wrk = wrkVersion()
/** nginx is a comparison target only: without it that target is skipped, the rest still runs. */
const NGINX = '/usr/sbin/nginx'
const nginxPresent = existsSync(NGINX)
const log = (line: string) => console.error(`[bench] ${line}`)

async function load(url: string, seconds: number): Promise<LoadResult> {
  return wrk ? runWrk(url, seconds, options.connections) : runAutocannon(url, seconds, options.connections)
}

/** One GET: the target must answer 200 with the upstream's 200-byte body, or it is not measured. */
async function sanityCheck(target: Target): Promise<void> {
  const response = await fetch(target.url, { signal: AbortSignal.timeout(5000) })
  const body = Buffer.from(await response.arrayBuffer())
  if (response.status !== 200 || body.length !== 200) throw new Error(`${target.name}: expected 200 with a 200-byte body, got ${response.status} with ${body.length} bytes: ${body.toString().slice(0, 200)}`)
}

async function measure(target: Target, upstreamPid: number, seconds: number): Promise<Round> {
  const proxyBefore = cpuMicros(target.proc.pid)
  const upstreamBefore = cpuMicros(upstreamPid)
  const coresBefore = coreTimes()
  const result = await load(target.url, seconds)
  const cores = coreBusy(coresBefore, coreTimes())
  const proxyUs = cpuMicros(target.proc.pid) - proxyBefore
  const upstreamUs = cpuMicros(upstreamPid) - upstreamBefore
  const requests = Math.max(result.requests, 1)
  return {
    load: result,
    proxyCpuUs: target.name === 'direct' ? undefined : proxyUs / requests,
    upstreamCpuUs: upstreamUs / requests,
    loadCoreBusy: cores[LOAD_CORE],
    proxyCoreBusy: cores[PROXY_CORE],
  }
}

function machine(): string {
  const models = readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.*)$/gm)?.map((l) => l.split(':')[1].trim()) ?? []
  return `${models.length} cores (${[...new Set(models)].join(', ')}), Node ${process.version}, wrk ${wrk ?? 'absent (autocannon fallback)'}`
}

async function main(): Promise<void> {
  pinSelf(LOAD_CORE)
  if (options.nice) setNiceness(options.nice)
  const dir = scratchDir()
  scratch = dir
  const profileDir = join(dir, 'profiles')
  const wanted = (options.only ?? [...TARGET_NAMES]) as TargetName[]
  // What the harness needs, found or not, in one line each; nothing is installed behind the operator's back.
  log(`needs: Node (here ${process.version}); wrk: ${wrk ? `found (${wrk})` : 'absent, autocannon (bundled) measures instead; install it with `apt-get install wrk` for the published figures'}`)
  log(`needs: nginx for the nginx comparison target: ${nginxPresent ? `found (${NGINX})` : 'absent, that target is skipped; install it with `apt-get install nginx`'}`)
  log(`machine: ${machine()}`)
  log(`layout: load generator + upstream on core ${LOAD_CORE}, system under test on core ${PROXY_CORE}; nice ${options.nice}; scratch ${dir}`)
  const targets: Target[] = []
  const skipped: string[] = []
  /** Requests each target served (warm-up included): turns profile time into µs per request. */
  const served = new Map<TargetName, number>()
  try {
    const upstream = await startUpstream(dir)
    log(`upstream ${upstream.url} (pid ${upstream.proc.pid})`)
    if (options.profile) mkdirSync(profileDir)
    const ctx = {
      upstreamUrl: upstream.url,
      upstream: upstream.proc,
      dir,
      nodeFlags: [...options.proxyNodeFlags, ...(options.profile ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : [])],
      separateTollgates: options.separateTollgates,
    }
    for (const name of wanted) {
      if (name === 'nginx' && !nginxPresent) {
        skipped.push(`${LABELS[name]}: skipped, ${NGINX} not found (apt-get install nginx)`)
        continue
      }
      if (name === 'tollgate-typical') {
        const missing = missingTypicalPlugins()
        if (missing.length) {
          skipped.push(`${LABELS[name]}: skipped, plugin(s) not written yet: ${missing.map((m) => `plugins/${m}/index.ts`).join(', ')}`)
          continue
        }
      }
      try {
        const target = await startTarget(name, ctx)
        await sanityCheck(target)
        targets.push(target)
        log(`${name}: ${target.url.replace(/\/bench\/.*/, '/bench/<key>')} (pid ${target.proc.pid})`)
      } catch (error) {
        skipped.push(`${LABELS[name]}: skipped, ${(error as Error).message.split('\n').slice(0, 8).join(' | ')}`)
      }
    }
    for (const line of skipped) log(line)
    if (!targets.length) throw new Error('no target could be started')

    for (const target of targets) {
      log(`warm-up ${target.name} ${options.warmup}s`)
      served.set(target.name, (await load(target.url, options.warmup)).requests)
    }
    const rounds = new Map<TargetName, Round[]>(targets.map((t) => [t.name, []]))
    for (let r = 0; r < options.rounds; r++) {
      // Rotate the order each round so slow drift on the shared machine does not favour one target.
      const order = targets.map((_, i) => targets[(i + r) % targets.length])
      for (const target of order) {
        const round = await measure(target, upstream.proc.pid, options.duration)
        rounds.get(target.name)!.push(round)
        served.set(target.name, (served.get(target.name) ?? 0) + round.load.requests)
        const cores = `core ${LOAD_CORE} ${(100 * round.loadCoreBusy).toFixed(0)}% / core ${PROXY_CORE} ${(100 * round.proxyCoreBusy).toFixed(0)}% busy`
        log(`round ${r + 1}/${options.rounds} ${target.name}: ${round.load.rps.toFixed(0)} req/s, p99 ${round.load.p99Ms.toFixed(2)} ms, proxy ${round.proxyCpuUs?.toFixed(0) ?? '—'} µs/req, ${cores}, failed ${round.load.failures}`)
      }
    }
    const summaries: Summary[] = targets.map((t) => summarise(t.name, rounds.get(t.name)!))

    let rateRuns: PairedRun[] = []
    const direct = targets.find((t) => t.name === 'direct')
    if (!options.noRate && direct) {
      // nginx: what any proxy hop costs on this machine; bare undici: what any Node hop costs.
      const proxies = targets.filter((t) => RATE_PROXIES.includes(t.name))
      rateRuns = await runFixedRate(direct, proxies, { rate: options.rate, seconds: options.rateDuration, connections: options.rateConnections, rounds: options.rateRounds, warmupSeconds: Math.min(options.warmup, options.rateDuration), log })
      for (const run of rateRuns) for (const round of run.rounds) served.set(run.name, (served.get(run.name) ?? 0) + round.proxy.requests)
    } else if (!options.noRate) skipped.push('fixed rate: skipped, it needs the direct target (see --only)')

    const out = [
      `## Throughput (${options.connections} connections, ${options.duration}s × ${options.rounds} rounds, ${wrk ? 'wrk -t1' : 'autocannon'}; median of rounds)`,
      '',
      throughputTable(summaries),
      '',
      '## Ratios',
      '',
      ratioTable(summaries),
      ...(skipped.length ? ['', 'Skipped:', ...skipped.map((s) => `- ${s}`)] : []),
      ...(rateRuns.length
        ? ['', `## Fixed rate ${options.rate} req/s (${options.rateConnections} connections, ${options.rateDuration}s × ${options.rateRounds} paired rounds per generator and proxy; nice ${options.nice})`, '', fixedRateTable(rateRuns, options.rate)]
        : []),
    ].join('\n')
    console.log(out)
    if (options.json) writeFileSync(options.json, JSON.stringify({ options, machine: machine(), summaries, rateRuns, skipped }, null, 2))
  } finally {
    // Node proxies first, gracefully, so --cpu-prof can write their profiles; then everything else.
    for (const proc of new Set(targets.filter((t) => t.name !== 'direct' && t.name !== 'nginx').map((t) => t.proc))) await stopProcess(proc, 10_000)
    await stopAll()
    if (options.profile) {
      // Main threads only (thread id 0); tsx's loader thread writes a profile of its own.
      for (const file of readdirSync(profileDir).filter((f) => f.endsWith('.cpuprofile') && f.split('.')[4] === '0')) {
        const pid = Number(file.split('.')[3])
        // One gateway may serve two targets (empty and typical chain): its profile covers both.
        const owners = targets.filter((t) => t.proc.pid === pid).map((t) => t.name)
        const requests = owners.length ? owners.reduce((sum, name) => sum + (served.get(name) ?? 0), 0) : undefined
        console.log(`\n## Profile of ${owners.length ? owners.join(' + ') : `pid ${pid}`}: ${join(profileDir, file)}\n`)
        console.log(summariseProfile(join(profileDir, file), { requests }))
      }
      log(`profiles kept in ${profileDir}`)
    } else rmSync(dir, { recursive: true, force: true })
  }
}

let scratch: string | undefined
const onSignal = (signal: NodeJS.Signals) => {
  log(`${signal}: stopping every process started`)
  void stopAll().finally(() => {
    if (scratch && !options.profile) rmSync(scratch, { recursive: true, force: true })
    process.exit(130)
  })
}
process.once('SIGINT', onSignal)
process.once('SIGTERM', onSignal)
process.on('exit', killAllSync)

main().catch((error) => {
  console.error(`[bench] failed: ${(error as Error).stack ?? error}`)
  process.exitCode = 1
})
