/**
 * CPU and wall time per reserve + commit pair of the embedded store, the working tree next to a git
 * revision (default HEAD) in the same run, with 1 and with 50 "requests" in flight (each request:
 * await reserve, then await commit). Prints a markdown table; asserts nothing.
 *
 *   node --import tsx bench/store-bench.ts [--pairs 20000] [--rounds 3] [--concurrency 1,50] [--baseline HEAD|none]
 *
 * The baseline is `core/store` of the revision unpacked into a temp dir (bench/lib/revision.ts),
 * so both versions run in one process on the same machine state. Rounds interleave the versions.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { fileURLToPath, pathToFileURL } from 'node:url'
import type { SqliteStoreOptions } from '../core/store/sqlite.ts'
import type { Store } from '../core/store/types.ts'
import { unpackRevision } from './lib/revision.ts'

const repoRoot = fileURLToPath(new URL('../', import.meta.url))

const { values } = parseArgs({
  options: {
    pairs: { type: 'string', default: '20000' },
    rounds: { type: 'string', default: '3' },
    concurrency: { type: 'string', default: '1,50' },
    baseline: { type: 'string', default: 'HEAD' },
  },
})
const pairs = boundedInt('pairs', values.pairs, 100, 1_000_000)
const rounds = boundedInt('rounds', values.rounds, 1, 10)
const concurrencies = values.concurrency.split(',').map((c) => boundedInt('concurrency', c, 1, 10_000))

type OpenStore = (options: SqliteStoreOptions) => Store & { writeStats?: () => { transactions: number; operations: number } }
interface Version {
  label: string
  open: OpenStore
}
interface Sample {
  cpuMicros: number
  wallMicros: number
  /** Writes per transaction, when the version counts them. */
  opsPerTx?: number
}

const tempDirs: string[] = []
process.on('exit', () => {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true })
})

const versions: Version[] = [{ label: 'working tree', open: (await import('../core/store/sqlite.ts')).openSqliteStore }]
if (values.baseline !== 'none') versions.unshift(await loadRevision(values.baseline))

const samples = new Map<string, Sample[]>()
for (let round = 0; round < rounds; round++) {
  // Rotate the order every round so slow drift of a shared machine favours no version.
  const order = versions.map((_, i) => versions[(i + round) % versions.length]!)
  for (const version of order) {
    for (const concurrency of concurrencies) {
      const key = `${version.label}\u0000${concurrency}`
      const sample = await measure(version, concurrency, `${round}`)
      samples.set(key, [...(samples.get(key) ?? []), sample])
      process.stderr.write(`round ${round + 1}/${rounds} ${version.label} ×${concurrency}: ${sample.cpuMicros.toFixed(1)} µs CPU/pair\n`)
    }
  }
}

console.log(`\nreserve + commit pairs: ${pairs} per sample, median of ${rounds} round(s), Node ${process.version}\n`)
console.log('| version | in flight | CPU µs / pair | wall µs / pair | writes / transaction | CPU per round |')
console.log('|---|---:|---:|---:|---:|---|')
for (const concurrency of concurrencies) {
  for (const version of versions) {
    const list = samples.get(`${version.label}\u0000${concurrency}`)!
    const perTx = list[0]!.opsPerTx === undefined ? '—' : median(list.map((s) => s.opsPerTx!)).toFixed(1)
    const cpuRounds = list.map((s) => s.cpuMicros.toFixed(1)).join(', ')
    console.log(
      `| ${version.label} | ${concurrency} | ${median(list.map((s) => s.cpuMicros)).toFixed(1)} | ${median(list.map((s) => s.wallMicros)).toFixed(1)} | ${perTx} | ${cpuRounds} |`,
    )
  }
}

/** One sample: a fresh store, a short warm-up, then `pairs` pairs spread over `concurrency` loops. */
async function measure(version: Version, concurrency: number, tag: string): Promise<Sample> {
  const dataDir = tempDir('tollgate-store-bench-')
  const store = version.open({ dataDir })
  try {
    const run = async (count: number, prefix: string) => {
      let next = 0
      const loop = async () => {
        while (next < count) {
          const id = `${prefix}-${next++}`
          const { ok } = await store.reserveCredits({ id, projectId: 'bench', period: '2026-11', allocation: 1e12, amount: 1, apiType: 'BENCH' })
          if (!ok) throw new Error(`reservation ${id} refused`)
          await store.commitCredits(id)
        }
      }
      await Promise.all(Array.from({ length: concurrency }, loop))
    }
    await run(Math.min(2000, pairs), `warm-${tag}`)
    const statsBefore = store.writeStats?.()
    const cpuBefore = process.cpuUsage()
    const started = process.hrtime.bigint()
    await run(pairs, `m-${tag}`)
    const wallMicros = Number(process.hrtime.bigint() - started) / 1000 / pairs
    const cpu = process.cpuUsage(cpuBefore)
    const statsAfter = store.writeStats?.()
    const opsPerTx =
      statsBefore && statsAfter
        ? (statsAfter.operations - statsBefore.operations) / Math.max(1, statsAfter.transactions - statsBefore.transactions)
        : undefined
    return { cpuMicros: (cpu.user + cpu.system) / pairs, wallMicros, opsPerTx }
  } finally {
    await store.close()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

/** Unpacks `core/store` of a git revision next to a node_modules link and imports it. */
async function loadRevision(revision: string): Promise<Version> {
  const dir = tempDir('tollgate-store-baseline-')
  unpackRevision(repoRoot, revision, dir, ['core/store'])
  const module = (await import(pathToFileURL(path.join(dir, 'core/store/sqlite.ts')).href)) as { openSqliteStore: OpenStore }
  return { label: `git ${revision}`, open: module.openSqliteStore }
}

function tempDir(prefix: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix))
  tempDirs.push(dir)
  return dir
}

function median(list: number[]): number {
  const sorted = [...list].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

function boundedInt(name: string, text: string, min: number, max: number): number {
  const value = Number(text)
  if (!Number.isInteger(value) || value < min || value > max) throw new RangeError(`--${name} must be an integer in [${min}, ${max}], got ${text}`)
  return value
}
