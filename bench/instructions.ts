/**
 * Instructions per proxied request of the gateway, counted by valgrind's callgrind: a figure that
 * repeats on a busy shared machine, where wall-clock and CPU-time benches drift by 10–30% from run
 * to run. The gateway (the working tree, or a git revision unpacked beside it) runs under
 * `valgrind --tool=callgrind`; the upstream and the client (undici, in this process) do not.
 *
 *   node --import tsx bench/instructions.ts [--revision REV] [--chain typical|empty|both]
 *        [--warmup 500] [--requests 1000] [--connections 10] [--attribute] [--top 30]
 *        [--store embedded|durable|async] [--postgres URL] [--redis URL]
 *
 * `--store durable|async` runs the gateway on the shared engine (store.creditCommit durable or async;
 * PostgreSQL and Redis outside callgrind, a fresh schema and key prefix dropped at the end), so the
 * gateway's instructions per charged request compare with the embedded engine's on a busy machine.
 *
 * The gateway starts with instrumentation off (`--instr-atstart=no`: start-up and warm-up run several
 * times faster). Per chain: `--warmup` requests (JIT, caches), then instrumentation on
 * (`callgrind_control -i on`), `--requests` requests, the counters dumped (`callgrind_control -d`)
 * and instrumentation off again: the total over every thread of the gateway (V8's compiler and GC threads
 * included) divided by the requests. Timers that fire meanwhile (a few per second) are included, and
 * so is background work (V8's compiler, concurrent marking): the totals grow with the window's
 * wall-clock length, so a slower window (a busier machine) counts more per request (measured on
 * the typical chain: 730k per request in a 176 s window beside two other gateways, 350k for a tree
 * differing only by a few allocations in a 36 s window alone).
 * Compare revisions measured at the same time (bench:guard does) and read their own-JS rows.
 *
 * `--idle S` (issue 26) also counts S idle seconds after each chain's window and subtracts that rate
 * of background work (timers: on the shared engine the heartbeat, the reaper, the lease idle check
 * and its fold, the usage flush; V8's background threads) times the counted window's length: the
 * shared engine's timers cost ~0.5M instructions a second, so a window twice as long (a busier
 * machine) counted several thousand more per request. Printed as "without background".
 *
 * `--attribute` also starts node with `--perf-basic-prof --interpreted-frames-native-stack` and
 * prints the instructions per request of the top functions, JIT-compiled JavaScript named through
 * V8's /tmp/perf-PID.map (those flags add some instructions of their own: compare attributed runs
 * with attributed runs only). The callgrind files are kept in the printed directory; two of them
 * can be compared with `--diff A.out B.out` (per-request differences, top changes).
 */
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { Pool } from 'undici'
import { pinSelf, startPinned, stopAll, stopProcess, killAllSync, freePort, waitForHttp, type Managed } from './lib/processes.ts'
import { unpackRevision } from './lib/revision.ts'
import { BENCH_KEY, LOAD_CORE, PROXY_CORE, startUpstream, tollgateConfig } from './lib/targets.ts'

const ROOT = fileURLToPath(new URL('../', import.meta.url))

export interface FunctionCost {
  name: string
  instructions: number
}

/** Self instructions by function in a callgrind dump (`callgrind_annotate`, inclusive off). */
export function functionCosts(file: string): { total: number; functions: FunctionCost[] } {
  const text = execFileSync('callgrind_annotate', ['--inclusive=no', '--threshold=100', file], { maxBuffer: 512 << 20 }).toString()
  let total = 0
  const functions: FunctionCost[] = []
  for (const line of text.split('\n')) {
    const summary = line.match(/^([\d,]+)\s+\(100\.0+%\)\s+PROGRAM TOTALS/) ?? line.match(/^([\d,]+)\s+PROGRAM TOTALS/)
    if (summary) {
      total = Number(summary[1].replace(/,/g, ''))
      continue
    }
    const match = line.match(/^\s*([\d,]+)\s+(?:\(\s*[\d.]+%\)\s+)?(.+?)(?:\s+\[[^\]]*\])?$/)
    if (match && match[2].includes(':')) functions.push({ name: match[2], instructions: Number(match[1].replace(/,/g, '')) })
  }
  // A dump's `summary:` line (what annotate prints as PROGRAM TOTALS) can overflow when the
  // counters were zeroed and dumped more than once; its `totals:` line, near the end, stays right.
  const totals = dumpTotals(file)
  return { total: totals ?? total, functions }
}

/** The `totals:` line of a callgrind dump (first event: instructions), read from the file's tail. */
function dumpTotals(file: string): number | undefined {
  const size = statSync(file).size
  const length = Math.min(size, 64 * 1024)
  const buffer = Buffer.alloc(length)
  const fd = openSync(file, 'r')
  try {
    readSync(fd, buffer, 0, length, size - length)
  } finally {
    closeSync(fd)
  }
  const match = buffer.toString('latin1').match(/^totals:\s+(\d+)/m)
  return match ? Number(match[1]) : undefined
}

/** V8's perf map (`start size name` in hex): code address ranges of JIT-compiled functions. */
function loadPerfMap(file: string): { starts: number[]; ends: number[]; names: string[] } {
  const entries: { start: number; end: number; name: string }[] = []
  if (existsSync(file)) {
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      const m = line.match(/^([0-9a-f]+) ([0-9a-f]+) (.*)$/)
      if (m) entries.push({ start: parseInt(m[1], 16), end: parseInt(m[1], 16) + parseInt(m[2], 16), name: m[3] })
    }
  }
  // Later entries win for reused addresses: keep the last one written for each start.
  entries.sort((a, b) => a.start - b.start)
  return { starts: entries.map((e) => e.start), ends: entries.map((e) => e.end), names: entries.map((e) => e.name) }
}

function lookup(map: ReturnType<typeof loadPerfMap>, address: number): string | undefined {
  let lo = 0
  let hi = map.starts.length - 1
  let found = -1
  while (lo <= hi) {
    const mid = (lo + hi) >> 1
    if (map.starts[mid] <= address) {
      found = mid
      lo = mid + 1
    } else hi = mid - 1
  }
  return found >= 0 && address < map.ends[found] ? map.names[found] : undefined
}

/**
 * V8's optimizing compilers (TurboFan, Maglev) run on background threads, and how much of their
 * work lands in the counted window depends on how far the JIT had got after the warm-up (their jobs
 * finish slowly under valgrind). Counted apart, so that a comparison can leave them out.
 */
const COMPILER = /v8::internal::compiler::|v8::internal::maglev::|v8::internal::Zone::|v8::internal::OptimizedCompilationJob|v8::internal::TurbofanCompilationJob/
export const COMPILER_KEY = '(V8 optimizing compiler, all functions)'

/**
 * V8's garbage collector: scavenges, concurrent marking, sweeping, evacuation and their helpers. A
 * major GC lands in one counted window and not in another run's (+27k to +90k per request in
 * session 14's guard runs, always on one side), so comparisons read the rest apart from it.
 */
const GC = /Scaveng|Marking|Sweep|Evacuat|v8::internal::Heap::|heap::base::|MemoryChunk|RememberedSet|MarkCompact|SlotSet|SizeFromMap|BodyDescriptorBase|IterateObjectCache|LocalHeap|GCTracer|popcount|ArrayBufferSweeper|Minor|MarkBit|ObjectStats|Unmapper|Safepoint/

/** Instructions of the named functions that are V8's garbage collector (see GC). */
export function gcInstructions(byName: Map<string, number>): number {
  let gc = 0
  for (const [name, instructions] of byName) if (name !== COMPILER_KEY && GC.test(name)) gc += instructions
  return gc
}

/** Function costs with callgrind's unnamed addresses (`???:0x…`) named from the perf map, tidied for reading. */
export function namedCosts(file: string, perfMap?: string): { total: number; byName: Map<string, number> } {
  const { total, functions } = functionCosts(file)
  const map = perfMap ? loadPerfMap(perfMap) : undefined
  const byName = new Map<string, number>()
  for (const { name, instructions } of functions) {
    let key = name
    const address = name.match(/0x([0-9a-f]+)$/)
    if (address && map) key = lookup(map, parseInt(address[1], 16)) ?? '(unnamed JIT code)'
    else if (address) key = '(unnamed JIT code)'
    if (COMPILER.test(key)) key = COMPILER_KEY
    // A revision unpacked beside this checkout (bench:guard's baseline) names its files like ours.
    key = key.replace(ROOT, '').replace(/\/tmp\/tollgate-[^/ ]+\/(?:baseline|revision)\//g, '').replace(/^.*node_modules\//, 'node_modules/').replace(/file:\/\/\S*?node_modules\//, 'node_modules/').replace(/file:\/\//, '')
    byName.set(key, (byName.get(key) ?? 0) + instructions)
  }
  return { total, byName }
}

function callgrindControl(pid: number, ...flags: string[]): void {
  // Callgrind takes the command the next time the process runs: idle, that is its next timer (≤ 1 s).
  execFileSync('callgrind_control', [...flags, String(pid)], { stdio: 'ignore', timeout: 300_000 })
}

/**
 * Sends `count` GETs over a pool of its own: the gateway closes connections left idle past its
 * keep-alive timeout (between phases, while callgrind writes a dump), so none is carried over.
 */
async function sendRequests(origin: string, path: string, count: number, connections: number): Promise<void> {
  const pool = new Pool(origin, { connections, headersTimeout: 3_600_000, bodyTimeout: 3_600_000 })
  try {
    await sendOn(pool, path, count, connections)
  } finally {
    await pool.close()
  }
}

async function sendOn(pool: Pool, path: string, count: number, connections: number): Promise<void> {
  let next = 0
  const failures: string[] = []
  const worker = async () => {
    while (next < count) {
      next++
      const { statusCode, body } = await pool.request({ method: 'GET', path })
      const text = await body.text()
      if (statusCode !== 200) failures.push(`${statusCode} ${text.slice(0, 200)}`)
    }
  }
  await Promise.all(Array.from({ length: connections }, worker))
  // A few 502s happen under callgrind (the upstream closes a pooled connection the slowed gateway
  // reuses at that moment): reported, and fatal only past 1%.
  if (failures.length) console.error(`[instructions] ${failures.length} of ${count} requests did not answer 200: ${failures.slice(0, 3).join('; ')}`)
  if (failures.length > count / 100) throw new Error(`${failures.length} of ${count} requests did not answer 200`)
}

export interface InstructionRun {
  label: string
  chain: 'empty' | 'typical'
  requests: number
  instructions: number
  perRequest: number
  /** {@link perRequest} without V8's optimizing compilers (see COMPILER). */
  withoutCompiler: number
  /** {@link withoutCompiler} without V8's garbage collector too (see GC): what the request path itself ran. */
  withoutCompilerAndGc: number
  /** {@link withoutCompilerAndGc} less the idle window's rate of the same times the counted window (`--idle`). */
  withoutBackground?: number
  dump: string
  perfMap?: string
  /** Wall-clock length of the counted window. */
  seconds: number
}

export interface RunOptions {
  label: string
  root: string
  dir: string
  upstreamUrl: string
  chains: ('empty' | 'typical')[]
  warmup: number
  requests: number
  connections: number
  attribute: boolean
  /** Seconds of an idle window counted after each chain's (see the top of the file); 0: none. */
  idleSeconds?: number
  /** The config's `store:` section in place of the embedded default (`--store durable|async`). */
  store?: string
}

/**
 * The bench's config with client and upstream deadlines of an hour: under callgrind on a busy
 * machine a request can wait for minutes, and the default 10 s header deadline would cut it.
 */
function patientConfig(yaml: string): string {
  const hour = 3_600_000
  return yaml
    .replace(/^(server:\n {2}listen: .*\n)/m, `$1  limits: { headersTimeoutMs: ${hour}, requestTimeoutMs: ${hour}, keepAliveTimeoutMs: ${hour} }\n`)
    .replace(/connections: 64 \}/, `connections: 64, timeouts: { headersMs: ${hour}, bodyMs: ${hour} } }`)
}

/** One gateway under callgrind serving both routes; each chain measured in turn (warm-up, zero, requests, dump). */
export async function measureGateway(options: RunOptions): Promise<InstructionRun[]> {
  const { label, root, dir, upstreamUrl } = options
  const work = mkdtempSync(join(dir, 'gateway-'))
  const [port, adminPort] = [await freePort(), await freePort()]
  const config = join(work, 'gateway.yaml')
  const yaml = patientConfig(tollgateConfig({ port, adminPort, upstreamUrl, empty: true, typical: true }))
  writeFileSync(config, options.store === undefined ? yaml : yaml.replace(/store:\n {2}dataDir: \.\/data\n/, options.store))
  const nodeFlags = options.attribute ? ['--perf-basic-prof', '--interpreted-frames-native-stack'] : []
  const outBase = join(work, 'callgrind.out')
  const proc: Managed = startPinned(`gateway ${label}`, PROXY_CORE, 'valgrind', [
    '--tool=callgrind',
    // V8 writes machine code at run time: valgrind must notice code it already translated changing.
    '--smc-check=all-non-file',
    // Start-up and warm-up run uninstrumented (several times faster); counting starts with `-i on`.
    '--instr-atstart=no',
    `--callgrind-out-file=${outBase}.%p`,
    process.execPath,
    ...nodeFlags,
    join(root, 'bin/tollgate.js'),
    'start',
    '-c',
    config,
  ])
  const runs: InstructionRun[] = []
  const origin = `http://127.0.0.1:${port}`
  const dumps: { chain: 'empty' | 'typical'; dump: string; seconds: number; idle?: string }[] = []
  let dumped = 0
  try {
    const started = Date.now()
    await waitForHttp(`${origin}/bench`, proc, 200, 3_600_000)
    console.error(`[instructions] ${label}: gateway answers under callgrind after ${((Date.now() - started) / 1000).toFixed(0)} s`)
    for (const chain of options.chains) {
      const path = chain === 'empty' ? '/bench' : `/bench/${BENCH_KEY}`
      await sendRequests(origin, path, options.warmup, options.connections)
      // Nothing was counted while instrumentation was off: the dump below holds the counted requests only.
      callgrindControl(proc.pid, '-i', 'on')
      const counting = Date.now()
      await sendRequests(origin, path, options.requests, options.connections)
      callgrindControl(proc.pid, '-d')
      const seconds = (Date.now() - counting) / 1000
      const dump = `${outBase}.${proc.pid}.${++dumped}`
      let idle: string | undefined
      if (options.idleSeconds) {
        // A dump zeroes the counters: the next one holds the idle window alone.
        await new Promise((resolve) => setTimeout(resolve, options.idleSeconds! * 1000))
        callgrindControl(proc.pid, '-d')
        idle = `${outBase}.${proc.pid}.${++dumped}`
      }
      callgrindControl(proc.pid, '-i', 'off')
      console.error(`[instructions] ${label}, ${chain} chain: ${options.requests} requests counted in ${seconds.toFixed(0)} s`)
      for (const file of [dump, idle]) if (file !== undefined && !existsSync(file)) throw new Error(`callgrind wrote no ${file}`)
      dumps.push({ chain, dump, seconds, idle })
    }
  } finally {
    await stopProcess(proc, 60_000)
  }
  // Read once the gateway is stopped: callgrind_annotate takes a while on a dump with JIT code.
  const perfMap = options.attribute ? `/tmp/perf-${proc.pid}.map` : undefined
  for (const { chain, dump, seconds, idle } of dumps) {
    const { total, byName } = namedCosts(dump, perfMap)
    const compiler = byName.get(COMPILER_KEY) ?? 0
    const gc = gcInstructions(byName)
    let withoutBackground: number | undefined
    if (idle !== undefined) {
      const quiet = namedCosts(idle, perfMap)
      const perSecond = (quiet.total - (quiet.byName.get(COMPILER_KEY) ?? 0) - gcInstructions(quiet.byName)) / options.idleSeconds!
      withoutBackground = (total - compiler - gc - perSecond * seconds) / options.requests
      console.error(`[instructions] ${label}, ${chain} chain: background ${(perSecond / 1e6).toFixed(2)}M instructions/s idle (without compiler and GC)`)
    }
    runs.push({
      label,
      chain,
      requests: options.requests,
      instructions: total,
      perRequest: total / options.requests,
      withoutCompiler: (total - compiler) / options.requests,
      withoutCompilerAndGc: (total - compiler - gc) / options.requests,
      withoutBackground,
      dump,
      perfMap,
      seconds,
    })
    console.error(`[instructions] ${label}, ${chain} chain: ${(total / options.requests).toFixed(0)} instructions/request, ${((total - compiler) / options.requests).toFixed(0)} without the optimizing compiler`)
  }
  return runs
}

/**
 * The project's own JavaScript per request (core/, plugins/: self instructions of its functions, JIT
 * tiers together): it moves by a few % between runs where the totals move by ±10%, since the totals
 * also hold work that grows with the window's wall-clock length (timers, V8's background compiler,
 * concurrent marking and the scavenges it slows). Two revisions' totals compare only when they were
 * measured at the same time over windows of similar length (`seconds`).
 */
export function ownJavaScript(run: InstructionRun): number {
  const { byName } = namedCosts(run.dump, run.perfMap)
  let own = 0
  for (const [name, n] of byName) if (/^JS:\S* (?:core|plugins)\//.test(name)) own += n
  return own / run.requests
}

/** The functions whose instructions per request changed most between two attributed runs. */
export function diffRuns(base: InstructionRun, other: InstructionRun, top: number): string {
  const a = namedCosts(base.dump, base.perfMap)
  const b = namedCosts(other.dump, other.perfMap)
  const names = new Set([...a.byName.keys(), ...b.byName.keys()])
  const rows = [...names].map((name) => {
    const before = (a.byName.get(name) ?? 0) / base.requests
    const after = (b.byName.get(name) ?? 0) / other.requests
    return { name, before, after, delta: after - before }
  })
  rows.sort((x, y) => Math.abs(y.delta) - Math.abs(x.delta))
  const lines = [`| function | ${base.label} | ${other.label} | change |`, '|---|---:|---:|---:|']
  for (const row of rows.slice(0, top)) lines.push(`| ${row.name.replace(/\|/g, '\\|')} | ${row.before.toFixed(0)} | ${row.after.toFixed(0)} | ${row.delta >= 0 ? '+' : ''}${row.delta.toFixed(0)} |`)
  return lines.join('\n')
}

export function topFunctions(run: InstructionRun, top: number): string {
  const { byName } = namedCosts(run.dump, run.perfMap)
  const rows = [...byName].sort((x, y) => y[1] - x[1]).slice(0, top)
  const lines = [`| function (${run.label}, ${run.chain}) | instructions/request |`, '|---|---:|']
  for (const [name, n] of rows) lines.push(`| ${name.replace(/\|/g, '\\|')} | ${(n / run.requests).toFixed(0)} |`)
  return lines.join('\n')
}

function bounded(name: string, raw: string, min: number, max: number): number {
  const value = Number(raw)
  if (!Number.isInteger(value) || value < min || value > max) throw new Error(`--${name} must be an integer in [${min}, ${max}], got ${raw}`)
  return value
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      revision: { type: 'string' },
      chain: { type: 'string', default: 'both' },
      warmup: { type: 'string', default: '500' },
      requests: { type: 'string', default: '1000' },
      connections: { type: 'string', default: '10' },
      attribute: { type: 'boolean', default: false },
      top: { type: 'string', default: '30' },
      idle: { type: 'string', default: '0' },
      keep: { type: 'boolean', default: false },
      store: { type: 'string', default: 'embedded' },
      postgres: { type: 'string', default: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test' },
      redis: { type: 'string', default: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' },
    },
  })
  if (!['embedded', 'durable', 'async'].includes(values.store)) throw new Error(`--store must be embedded, durable or async, got ${values.store}`)
  const schema = `tg_instr_${randomBytes(4).toString('hex')}`
  const keyPrefix = `tginstr:${randomBytes(4).toString('hex')}:`
  const store = values.store === 'embedded' ? undefined : `store: { engine: shared, postgres: "${values.postgres}", redis: "${values.redis}", schema: ${schema}, keyPrefix: "${keyPrefix}", creditCommit: ${values.store} }\n`
  if (!['empty', 'typical', 'both'].includes(values.chain)) throw new Error(`--chain must be empty, typical or both, got ${values.chain}`)
  const chains = values.chain === 'both' ? (['typical', 'empty'] as const) : [values.chain as 'empty' | 'typical']
  const warmup = bounded('warmup', values.warmup, 0, 100_000)
  const requests = bounded('requests', values.requests, 1, 100_000)
  const connections = bounded('connections', values.connections, 1, 500)
  const idleSeconds = bounded('idle', values.idle, 0, 600)
  const top = bounded('top', values.top, 1, 500)
  pinSelf(LOAD_CORE)
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-instructions-'))
  const keep = values.keep || values.attribute
  try {
    let root = ROOT
    let label = 'working tree'
    if (values.revision) {
      root = join(dir, 'revision')
      unpackRevision(ROOT, values.revision, root)
      label = execFileSync('git', ['-C', ROOT, 'rev-parse', '--short', values.revision]).toString().trim()
    }
    const upstream = await startUpstream(dir)
    const runs = await measureGateway({ label, root, dir, upstreamUrl: upstream.url, chains: [...chains], warmup, requests, connections, attribute: values.attribute, store, idleSeconds })
    const storeLabel = store === undefined ? 'embedded store' : `shared store, ${values.store} commit`
    console.log(`## Gateway instructions per request (callgrind), ${label}, ${storeLabel}: ${warmup} warm-up, ${requests} counted, ${connections} connections${values.attribute ? ', attributed (perf map flags on)' : ''}\n`)
    const idleColumn = idleSeconds > 0 ? ` without background (${idleSeconds} s idle) |` : ''
    console.log(`| chain | instructions/request | without the optimizing compiler | without the compiler and the GC |${idleColumn}${values.attribute ? ' own JS (core/, plugins/) |' : ''} counted window, s |`)
    console.log(`|---|---:|---:|---:|${idleSeconds > 0 ? '---:|' : ''}${values.attribute ? '---:|' : ''}---:|`)
    for (const run of runs) console.log(`| ${run.chain} | ${run.perRequest.toFixed(0)} | ${run.withoutCompiler.toFixed(0)} | ${run.withoutCompilerAndGc.toFixed(0)} |${idleSeconds > 0 ? ` ${run.withoutBackground!.toFixed(0)} |` : ''}${values.attribute ? ` ${ownJavaScript(run).toFixed(0)} |` : ''} ${run.seconds.toFixed(0)} |`)
    if (values.attribute) for (const run of runs) console.log(`\n${topFunctions(run, top)}`)
    if (keep) console.log(`\ncallgrind files: ${runs.map((r) => r.dump).join(' ')}${values.attribute ? ` (perf maps: ${runs.map((r) => r.perfMap).join(' ')})` : ''}`)
  } finally {
    await stopAll()
    if (!keep) rmSync(dir, { recursive: true, force: true })
    if (store !== undefined) await dropShared(values.postgres, schema, values.redis, keyPrefix)
  }
}

/** Drops the shared engine's schema and Redis keys of a `--store durable|async` run. */
async function dropShared(postgresUrl: string, schema: string, redisUrl: string, keyPrefix: string): Promise<void> {
  const { default: pg } = await import('pg')
  const client = new pg.Client({ connectionString: postgresUrl })
  try {
    await client.connect()
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
  } catch (error) {
    console.error(`[instructions] could not drop schema ${schema}: ${(error as Error).message}`)
  } finally {
    await client.end().catch(() => {})
  }
  const { createClient } = await import('redis')
  const redis = createClient({ url: redisUrl })
  redis.on('error', () => {})
  try {
    await redis.connect()
    for await (const keys of redis.scanIterator({ MATCH: `${keyPrefix}*`, COUNT: 500 })) if (keys.length) await redis.del(keys)
  } catch (error) {
    console.error(`[instructions] could not delete Redis keys ${keyPrefix}*: ${(error as Error).message}`)
  } finally {
    if (redis.isOpen) await redis.close()
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.once('SIGINT', () => void stopAll().finally(() => process.exit(130)))
  process.on('exit', killAllSync)
  main().catch((error) => {
    console.error(`[instructions] failed: ${(error as Error).stack ?? error}`)
    process.exitCode = 1
  })
}
