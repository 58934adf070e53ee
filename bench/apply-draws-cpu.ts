/**
 * PostgreSQL CPU per draw of `tollgate_apply`, without a gateway (issue 26): what a charged request
 * costs the database, per core migration version, at a batch size held equal.
 *
 * For each version of `--versions` (default 7,8), on a fresh schema migrated to that core version:
 * one instance takes one lease (as a gateway does for one project and period), then `--connections`
 * clients each send batches of `--batch` draws on that lease back to back (as `PgBatcher` does with
 * lease-op batches in flight side by side), and one of them a fold (`shrink` of 0, the owner's
 * periodic fold) every `--fold-ms`. Versions run in interleaved rounds of `--seconds`. Reports the
 * CPU (user + system, from /proc) of the backends serving those clients per draw, medians of the
 * rounds: that figure does not depend on how busy the machine is; draws/s does and is shown only for
 * the trend. Commits wait for the WAL flush (`--async` commits without).
 *
 *   node --import tsx bench/apply-draws-cpu.ts [--versions 7,8] [--batch 16] [--connections 4]
 *       [--seconds 3] [--rounds 3] [--fold-ms 250] [--async] [--postgres URL]
 */
import pg from 'pg'
import { randomBytes } from 'node:crypto'
import { parseArgs } from 'node:util'
import { coreMigrations, runMigrations } from '../core/store/shared/index.ts'
import { openPgPool } from '../core/store/shared/pg.ts'
import { processCpuMicros } from './lib/server-cpu.ts'
import { median } from './lib/report.ts'

const { values } = parseArgs({
  options: {
    versions: { type: 'string', default: `7,${coreMigrations.migrations.length}` },
    batch: { type: 'string', default: '16' },
    connections: { type: 'string', default: '4' },
    seconds: { type: 'string', default: '3' },
    rounds: { type: 'string', default: '3' },
    'fold-ms': { type: 'string', default: '250' },
    async: { type: 'boolean', default: false },
    'session-options': { type: 'string', default: '' },
    postgres: { type: 'string', default: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test' },
  },
})
const versions = values.versions!.split(',').map(Number)
const [batch, connections, seconds, rounds, foldMs] = [values.batch, values.connections, values.seconds, values.rounds, values['fold-ms']].map(Number) as [number, number, number, number, number]
for (const v of versions) if (!(v >= 6 && v <= coreMigrations.migrations.length)) throw new Error(`--versions: no core version ${v}`)

interface Setup {
  version: number
  schema: string
  clients: pg.Client[]
  pids: number[]
  sequence: number
}

const APPLY = values.async
  ? "SELECT tollgate_apply($1::jsonb, 'A') AS r, set_config('synchronous_commit', 'off', true) AS c"
  : "SELECT tollgate_apply($1::jsonb, 'A') AS r"

async function setUp(version: number): Promise<Setup> {
  const schema = `tg_bench_${randomBytes(5).toString('hex')}`
  const pool = openPgPool({ url: values.postgres!, schema, max: 1 })
  await runMigrations(pool, schema, [{ module: 'core', migrations: coreMigrations.migrations.slice(0, version) }])
  await pool.end()
  const clients: pg.Client[] = []
  const pids: number[] = []
  for (let c = 0; c < connections; c++) {
    const client = new pg.Client({ connectionString: values.postgres, options: `-c search_path="${schema}" ${values['session-options']}` })
    await client.connect()
    clients.push(client)
    pids.push((await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid)
  }
  await clients[0]!.query(APPLY, [JSON.stringify([{ o: 'lease', i: 'lease-a', p: 'proj', e: '2026-11', a: 1e12, n: 1e9, m: 1 }])])
  return { version, schema, clients, pids, sequence: 0 }
}

async function round(setup: Setup): Promise<{ cpuPerDraw: number; drawsPerSecond: number }> {
  const stopAt = Date.now() + seconds * 1000
  let draws = 0
  const cpuBefore = setup.pids.reduce((sum, pid) => sum + processCpuMicros(pid), 0)
  const started = Date.now()
  let nextFold = started + foldMs
  await Promise.all(setup.clients.map(async (client, c) => {
    while (Date.now() < stopAt) {
      const ops: object[] = []
      for (let i = 0; i < batch; i++) ops.push({ o: 'draw', i: `d${++setup.sequence}`, l: 'lease-a', n: 1, t: 'api' })
      const { rows } = await client.query<{ r: unknown[] }>(APPLY, [JSON.stringify(ops)])
      if (rows[0]!.r.some((result) => result !== false)) throw new Error(`a draw answered ${JSON.stringify(rows[0]!.r.find((result) => result !== false))}`)
      draws += batch
      if (c === 0 && Date.now() >= nextFold) {
        nextFold += foldMs
        await client.query(APPLY, [JSON.stringify([{ o: 'shrink', i: 'lease-a', n: 0 }])])
      }
    }
  }))
  const elapsed = (Date.now() - started) / 1000
  const cpu = setup.pids.reduce((sum, pid) => sum + processCpuMicros(pid), 0) - cpuBefore
  return { cpuPerDraw: cpu / draws, drawsPerSecond: draws / elapsed }
}

const setups: Setup[] = []
try {
  for (const version of versions) setups.push(await setUp(version))
  const figures = new Map<number, { cpu: number[]; rate: number[] }>(versions.map((v) => [v, { cpu: [], rate: [] }]))
  // A warm-up round each (plans cached, pages in memory), not counted.
  for (const setup of setups) await round(setup)
  for (let r = 0; r < rounds; r++) {
    for (const setup of setups) {
      const result = await round(setup)
      figures.get(setup.version)!.cpu.push(result.cpuPerDraw)
      figures.get(setup.version)!.rate.push(result.drawsPerSecond)
      console.log(`round ${r + 1} v${setup.version}: ${result.cpuPerDraw.toFixed(1)} µs PostgreSQL CPU per draw, ${Math.round(result.drawsPerSecond)} draws/s`)
    }
  }
  console.log(`\nbatch ${batch}, ${connections} connections, ${values.async ? 'async' : 'durable'} commits, fold every ${foldMs} ms; medians of ${rounds} rounds:`)
  for (const version of versions) {
    const { cpu, rate } = figures.get(version)!
    console.log(`  core v${version}: ${median(cpu).toFixed(1)} µs PostgreSQL CPU per draw (${cpu.map((x) => x.toFixed(1)).join(' / ')}), ${Math.round(median(rate))} draws/s`)
  }
} finally {
  for (const setup of setups) {
    for (const client of setup.clients.slice(1)) await client.end()
    await setup.clients[0]!.query(`DROP SCHEMA "${setup.schema}" CASCADE`).catch(() => {})
    await setup.clients[0]!.end()
  }
}
