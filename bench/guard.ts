/**
 * `npm run bench:guard`: did this change make the hot path costlier than the recorded baseline?
 *
 * The working tree and the revision in bench/baseline-revision.txt each serve the bench's typical
 * chain (key-in-path auth, credit meter, rate limit, metrics) and its empty chain under callgrind
 * (bench/instructions.ts); the guard prints instructions per request of both, their ratio
 * (baseline / working tree: above 1, the working tree is cheaper) and the functions whose
 * instructions per request changed most. Two trees counted side by side (both gateways at once)
 * compare on a busy machine, where wall-clock figures drift by more than the changes they should
 * catch; counts taken at different times do not (bench/instructions.ts says why). `--wall` also runs
 * bench/revision-bench.ts (gateway CPU µs per request with wrk, same baseline) for the time view.
 *
 *   npm run bench:guard [-- --baseline REV] [--chain typical|empty|both] [--requests 1000]
 *                       [--warmup 500] [--top 25] [--wall]
 *
 * Not a test and not in CI: it takes minutes and asserts nothing. Authors of changes to the request
 * path (core/proxy/pipeline.ts, core/proxy/http/, core/proxy/router.ts, core/store/ engines, the chain's plugins) run
 * it and quote its table in the change.
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { diffRuns, measureGateway, ownJavaScript, type InstructionRun } from './instructions.ts'
import { killAllSync, pinSelf, stopAll } from './lib/processes.ts'
import { unpackRevision } from './lib/revision.ts'
import { LOAD_CORE, startUpstream } from './lib/targets.ts'

const ROOT = fileURLToPath(new URL('../', import.meta.url))

/** The first non-comment word of bench/baseline-revision.txt. */
export function recordedBaseline(): string {
  const text = readFileSync(join(ROOT, 'bench/baseline-revision.txt'), 'utf8')
  const line = text.split('\n').map((l) => l.trim()).find((l) => l !== '' && !l.startsWith('#'))
  if (!line) throw new Error('bench/baseline-revision.txt names no revision')
  return line.split(/\s+/)[0]
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      baseline: { type: 'string' },
      chain: { type: 'string', default: 'both' },
      warmup: { type: 'string', default: '500' },
      requests: { type: 'string', default: '1000' },
      connections: { type: 'string', default: '50' },
      top: { type: 'string', default: '25' },
      wall: { type: 'boolean', default: false },
    },
  })
  if (!['empty', 'typical', 'both'].includes(values.chain)) throw new Error(`--chain must be empty, typical or both, got ${values.chain}`)
  const chains = values.chain === 'both' ? (['typical', 'empty'] as const) : [values.chain as 'empty' | 'typical']
  const counts = ['warmup', 'requests', 'connections', 'top'].map((name) => {
    const value = Number(values[name as 'warmup'])
    if (!Number.isInteger(value) || value < (name === 'warmup' ? 0 : 1) || value > 100_000) throw new Error(`--${name} must be a positive integer, got ${values[name as 'warmup']}`)
    return value
  })
  const [warmup, requests, connections, top] = counts
  const baseline = values.baseline ?? recordedBaseline()
  const short = execFileSync('git', ['-C', ROOT, 'rev-parse', '--short', baseline]).toString().trim()
  pinSelf(LOAD_CORE)
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-bench-guard-'))
  try {
    const baselineRoot = join(dir, 'baseline')
    unpackRevision(ROOT, baseline, baselineRoot)
    const upstream = await startUpstream(dir)
    const common = { dir, upstreamUrl: upstream.url, chains: [...chains], warmup, requests, connections, attribute: true }
    // Both at once: instruction counts do not depend on how the two share the machine.
    const [base, tree] = await Promise.all([
      measureGateway({ ...common, label: `baseline ${short}`, root: baselineRoot }),
      measureGateway({ ...common, label: 'working tree', root: ROOT }),
    ])
    console.log(`## bench:guard: gateway instructions per request, baseline ${short} vs working tree (callgrind, ${requests} requests after ${warmup}, ${connections} connections)\n`)
    console.log(`| chain | baseline ${short} | working tree | baseline / working tree | the same without V8's optimizing compiler | without the compiler and the GC |`)
    console.log('|---|---:|---:|---:|---|---|')
    const byChain = (runs: InstructionRun[], chain: string) => runs.find((r) => r.chain === chain)!
    const ratio = (b: number, t: number) => `${b.toFixed(0)} / ${t.toFixed(0)} = ${(b / t).toFixed(3)}`
    for (const chain of chains) {
      const [b, t] = [byChain(base, chain), byChain(tree, chain)]
      const without = ratio(b.withoutCompiler, t.withoutCompiler)
      const path = ratio(b.withoutCompilerAndGc, t.withoutCompilerAndGc)
      console.log(`| ${chain} | ${b.perRequest.toFixed(0)} | ${t.perRequest.toFixed(0)} | ${(b.perRequest / t.perRequest).toFixed(3)} | ${without} | ${path} |`)
    }
    console.log('\nAbove 1: the working tree is cheaper per request than the baseline. Read the last columns when the')
    console.log('compiler share differs much between the two (a JIT not yet settled after the warm-up: raise --warmup),')
    console.log('or when a major GC (concurrent marking, sweeping: tens of thousands per request) fell in one window only.')
    console.log('The totals also hold work that grows with the window\'s wall-clock length (timers, background compiler,')
    console.log('concurrent marking): they move by ±10% from run to run. The project\'s own JavaScript moves by a few %:\n')
    console.log(`| chain | own JS (core/, plugins/) baseline ${short} | working tree | counted window, seconds (baseline / working tree) |`)
    console.log('|---|---:|---:|---:|')
    for (const chain of chains) {
      const [b, t] = [byChain(base, chain), byChain(tree, chain)]
      console.log(`| ${chain} | ${ownJavaScript(b).toFixed(0)} | ${ownJavaScript(t).toFixed(0)} | ${b.seconds.toFixed(0)} / ${t.seconds.toFixed(0)} |`)
    }
    for (const chain of chains) {
      console.log(`\n### Functions that changed most, ${chain} chain (instructions per request)\n`)
      console.log(diffRuns(byChain(base, chain), byChain(tree, chain), top))
    }
  } finally {
    await stopAll()
    rmSync(dir, { recursive: true, force: true })
  }
  if (values.wall) {
    console.log('\n## Gateway CPU per request (bench/revision-bench.ts)\n')
    const run = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'bench/revision-bench.ts'), '--baseline', baseline, '--chain', chains[0]], { stdio: ['ignore', 'inherit', 'inherit'] })
    if (run.status !== 0) process.exitCode = 1
  }
}

process.once('SIGINT', () => void stopAll().finally(() => process.exit(130)))
process.on('exit', killAllSync)
main().catch((error) => {
  console.error(`[bench:guard] failed: ${(error as Error).stack ?? error}`)
  process.exitCode = 1
})
