/**
 * CPU µs per proxied request of the gateway in the working tree next to a git revision (default
 * HEAD), in the same run: two gateway processes on the proxy core, the same upstream, wrk rounds
 * alternating between them (the order flips every round). The answer to "did this change make the
 * hot path cheaper?" without the run-to-run drift of this VM, which moves absolute figures by up to
 * 2×. Prints a markdown table; asserts nothing.
 *
 *   node --import tsx bench/revision-bench.ts [--baseline HEAD] [--rounds 8] [--duration 4]
 *                                             [--connections 50] [--chain empty|typical] [--profile]
 *
 * `--profile` runs both gateways with `--cpu-prof` and prints where their µs per request differ
 * (bench/profile-summary.ts, working tree − baseline, warm-up requests included in both).
 *
 * The baseline is `git archive <rev>` unpacked into a temp dir with a link to this tree's
 * node_modules (so a revision whose dependencies differ is measured with today's). Every process is
 * stopped by its PID at the end, on failure and on SIGINT.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { runWrk } from './lib/load.ts'
import { cpuMicros, freePort, killAllSync, pinSelf, startPinned, stopAll, stopProcess, waitForHttp, type Managed } from './lib/processes.ts'
import { addSourceRoot, compareProfiles } from './profile-summary.ts'
import { median } from './lib/report.ts'
import { unpackRevision } from './lib/revision.ts'
import { BENCH_KEY, LOAD_CORE, PROXY_CORE, startUpstream, tollgateConfig } from './lib/targets.ts'

const ROOT = fileURLToPath(new URL('../', import.meta.url))

const { values } = parseArgs({
  options: {
    baseline: { type: 'string', default: 'HEAD' },
    rounds: { type: 'string', default: '8' },
    duration: { type: 'string', default: '4' },
    connections: { type: 'string', default: '50' },
    chain: { type: 'string', default: 'empty' },
    profile: { type: 'boolean', default: false },
  },
})

function bounded(name: string, raw: string, min: number, max: number): number {
  const value = Number(raw)
  if (!Number.isInteger(value) || value < min || value > max) throw new Error(`--${name} must be an integer in [${min}, ${max}], got ${raw}`)
  return value
}
const rounds = bounded('rounds', values.rounds, 1, 20)
const seconds = bounded('duration', values.duration, 1, 60)
const connections = bounded('connections', values.connections, 1, 1000)
if (values.chain !== 'empty' && values.chain !== 'typical') throw new Error(`--chain must be empty or typical, got ${values.chain}`)
const routePath = values.chain === 'empty' ? '/bench' : `/bench/${BENCH_KEY}`

interface Gateway {
  label: string
  proc: Managed
  url: string
  cpuPerRequest: number[]
  rps: number[]
  /** Requests served, warm-up included (for the profile's µs per request). */
  served: number
  profileDir?: string
}

async function startGateway(label: string, root: string, dir: string, upstreamUrl: string): Promise<Gateway> {
  const [port, adminPort] = [await freePort(), await freePort()]
  const config = join(mkdtempSync(join(dir, 'gateway-')), 'gateway.yaml')
  writeFileSync(config, tollgateConfig({ port, adminPort, upstreamUrl, empty: true, typical: true }))
  const profileDir = values.profile ? join(dirname(config), 'profile') : undefined
  if (profileDir) mkdirSync(profileDir)
  const flags = profileDir ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : []
  const proc = startPinned(label, PROXY_CORE, process.execPath, [...flags, join(root, 'bin/tollgate.js'), 'start', '-c', config])
  const url = `http://127.0.0.1:${port}${routePath}`
  await waitForHttp(url, proc, 200, 30_000)
  return { label, proc, url, cpuPerRequest: [], rps: [], served: 1, profileDir }
}

async function main(): Promise<void> {
  pinSelf(LOAD_CORE)
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-revision-bench-'))
  try {
    const baselineRoot = join(dir, 'baseline')
    unpackRevision(ROOT, values.baseline, baselineRoot)
    const revision = execFileSync('git', ['-C', ROOT, 'rev-parse', '--short', values.baseline]).toString().trim()
    const upstream = await startUpstream(dir)
    const gateways = [await startGateway(`baseline ${revision}`, baselineRoot, dir, upstream.url), await startGateway('working tree', ROOT, dir, upstream.url)]
    for (const gateway of gateways) gateway.served += (await runWrk(gateway.url, 3, connections)).requests
    for (let r = 0; r < rounds; r++) {
      for (const gateway of r % 2 ? [...gateways].reverse() : gateways) {
        const before = cpuMicros(gateway.proc.pid)
        const load = await runWrk(gateway.url, seconds, connections)
        if (load.failures) throw new Error(`${gateway.label}: ${load.failures} failed requests in round ${r + 1}`)
        gateway.cpuPerRequest.push((cpuMicros(gateway.proc.pid) - before) / Math.max(load.requests, 1))
        gateway.rps.push(load.rps)
        gateway.served += load.requests
      }
      console.error(`[revision-bench] round ${r + 1}/${rounds}: ${gateways.map((g) => `${g.label} ${g.cpuPerRequest[r].toFixed(1)} µs/req`).join(', ')}`)
    }
    const [base, tree] = gateways
    console.log(`## Gateway CPU per request, ${values.chain} chain: ${base.label} vs working tree (${rounds} rounds × ${seconds}s, ${connections} connections)\n`)
    console.log('| version | CPU µs/req (median) | per round | req/s (median) |')
    console.log('|---|---:|---|---:|')
    for (const g of gateways) console.log(`| ${g.label} | ${median(g.cpuPerRequest).toFixed(1)} | ${g.cpuPerRequest.map((v) => v.toFixed(0)).join(' / ')} | ${median(g.rps).toFixed(0)} |`)
    const ratios = base.cpuPerRequest.map((v, i) => v / tree.cpuPerRequest[i])
    console.log(`\nbaseline / working tree, median of per-round CPU ratios: ${median(ratios).toFixed(3)} (above 1: the working tree is cheaper)`)
    if (values.profile) {
      // Gracefully, so that --cpu-prof writes the profiles; main thread only (thread id 0).
      for (const g of gateways) await stopProcess(g.proc, 30_000)
      const profileOf = (g: Gateway) => join(g.profileDir!, readdirSync(g.profileDir!).find((f) => f.endsWith('.cpuprofile') && f.split('.')[4] === '0')!)
      addSourceRoot(baselineRoot)
      console.log(`\n## Where the working tree's CPU per request differs from ${base.label} (--cpu-prof)\n`)
      console.log(compareProfiles(profileOf(tree), tree.served, profileOf(base), base.served))
    }
  } finally {
    await stopAll()
    rmSync(dir, { recursive: true, force: true })
  }
}

process.once('SIGINT', () => void stopAll().finally(() => process.exit(130)))
process.on('exit', killAllSync)
main().catch((error) => {
  console.error(`[revision-bench] failed: ${(error as Error).stack ?? error}`)
  process.exitCode = 1
})
