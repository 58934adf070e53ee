/**
 * The store's own CPU per metered request at one evenly paced rate, embedded (SQLite) beside the
 * shared engine (durable and async), in this process and without HTTP: what the shared engine
 * costs the gateway per request at equal load, apart from the proxy (issue 26's "≤ 1.2× embedded").
 *
 * Request i starts at i / RATE s: reserve, rate-limit take, a wait standing for the upstream
 * (UPSTREAM_MS, a timer), commit, close, usage record, as the credit meter and rate limit plugins
 * call them (the synchronous forms first where the engine has them, as the plugins do). Rounds interleave the engines. Reports this process's CPU µs per request (user +
 * system; the other stores' timers run meanwhile and are counted too, a few per second) and, for
 * the shared engine, PostgreSQL round trips (group-commit batches) and Redis script calls per
 * request, which is what a paced load makes expensive: a request alone in its turn is a batch alone.
 *
 *   node --import tsx bench/store-paced-cpu.ts      env: RATE (2000), SECS (5), ROUNDS (3), UPSTREAM_MS (1),
 *                                                   ENGINES (embedded,durable,async), DATABASE_URL, REDIS_URL
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { openSqliteStore } from '../core/store/sqlite.ts'
import { openSharedStore, type SharedStore } from '../core/store/shared/index.ts'
// QuickStore is declared locally: a tree before Store.quick has no such type (the bench runs in either).
import type { CreditReservation, RateDecision, Store, UsageEvent } from '../core/store/types.ts'
interface QuickStore {
  tryReserveCredits(reservation: CreditReservation): number | undefined
  tryTakeToken(key: string, capacity: number, refillPerSecond: number, cost?: number): RateDecision | undefined
  closeCredits(reservationId: string): void
  recordUsage(event: UsageEvent): void
}
import { backendsOf, serverCpu } from './lib/server-cpu.ts'
import { median } from './lib/report.ts'

const RATE = Number(process.env.RATE ?? 2000)
const SECS = Number(process.env.SECS ?? 5)
const ROUNDS = Number(process.env.ROUNDS ?? 3)
const UPSTREAM_MS = Number(process.env.UPSTREAM_MS ?? 1)
const ENGINES = (process.env.ENGINES ?? 'embedded,durable,async').split(',')
const POSTGRES = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const REDIS = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

interface Engine {
  label: string
  store: Store
  shared?: SharedStore
  schema?: string
  cpu: number[]
  /** The kernel's share of {@link Engine.cpu} (system time): syscalls, the loopback network. */
  system: number[]
  postgres: number[]
  batches: number[]
  rateCalls: number[]
}

const dir = mkdtempSync(join(tmpdir(), 'tollgate-store-paced-'))
const keyPrefix = `tgpaced:${randomBytes(4).toString('hex')}:`
const engines: Engine[] = []
let sequence = 0

/**
 * One request's store calls as the plugins make them: the synchronous forms an engine offers
 * (`Store.immediate` embedded, `Store.quick` shared, where the tree has them) before the promise forms.
 */
async function request(store: Store): Promise<void> {
  const id = `paced-${sequence++}`
  const reservation = { id, projectId: 'bench', period: '2026-11', allocation: 1e12, amount: 1, apiType: 'PRIVNET_RPC' }
  const { immediate, quick } = store as Store & { quick?: QuickStore }
  if (immediate !== undefined) immediate.reserveCredits(reservation)
  else if (quick?.tryReserveCredits(reservation) === undefined) await store.reserveCredits(reservation)
  if (immediate !== undefined) immediate.takeToken('bench:key', 1e9, 1e9)
  else if (quick?.tryTakeToken('bench:key', 1e9, 1e9) === undefined) await store.takeToken('bench:key', 1e9, 1e9)
  await new Promise((resolve) => setTimeout(resolve, UPSTREAM_MS))
  await store.commitCredits(id)
  const usage = { projectId: 'bench', apiType: 'PRIVNET_RPC', at: Date.now(), requests: 1, credits: 1, errors: 0 }
  const now = immediate ?? quick
  if (now !== undefined) {
    now.closeCredits(id)
    now.recordUsage(usage)
    return
  }
  store.closeCredits(id).catch(() => {})
  await store.recordUsage(usage)
}

/** `count` requests, request i started at i / RATE s after the first; resolves when all have ended. */
function paced(store: Store, count: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const start = performance.now()
    let started = 0
    let ended = 0
    const tick = () => {
      const due = Math.min(count, Math.floor(((performance.now() - start) * RATE) / 1000) + 1)
      while (started < due) {
        started++
        request(store).then(() => {
          if (++ended === count) resolve()
        }, reject)
      }
      if (started < count) setTimeout(tick, 1)
    }
    tick()
  })
}

try {
  for (const label of ENGINES) {
    if (label === 'embedded') {
      engines.push({ label, store: openSqliteStore({ dataDir: join(dir, 'data') }), cpu: [], system: [], postgres: [], batches: [], rateCalls: [] })
      continue
    }
    if (label !== 'durable' && label !== 'async') throw new Error(`ENGINES: embedded, durable or async, got ${label}`)
    const schema = `tg_paced_${randomBytes(4).toString('hex')}`
    const shared = await openSharedStore({ postgres: POSTGRES, redis: REDIS, schema, keyPrefix: `${keyPrefix}${label}:`, creditCommit: label })
    engines.push({ label: `shared, ${label}`, store: shared, shared, schema, cpu: [], system: [], postgres: [], batches: [], rateCalls: [] })
  }
  const perRound = Math.round(RATE * SECS)
  for (const engine of engines) await paced(engine.store, Math.round(RATE * 2))
  for (let round = 0; round < ROUNDS; round++) {
    for (const engine of [...engines.slice(round % engines.length), ...engines.slice(0, round % engines.length)]) {
      const backends = engine.shared === undefined ? [] : await backendsOf(POSTGRES, process.pid)
      const servers = serverCpu(backends, undefined)
      const writes = engine.shared?.writeStats()
      const rate = engine.shared?.rateStats()
      const cpu = process.cpuUsage()
      await paced(engine.store, perRound)
      const used = process.cpuUsage(cpu)
      engine.cpu.push((used.user + used.system) / perRound)
      engine.system.push(used.system / perRound)
      engine.postgres.push((serverCpu(backends, undefined).postgres - servers.postgres) / perRound)
      if (engine.shared !== undefined) {
        engine.batches.push((engine.shared.writeStats().batches - writes!.batches) / perRound)
        engine.rateCalls.push((engine.shared.rateStats().calls - rate!.calls) / perRound)
      }
    }
  }
  console.log(`\n### Store CPU per request, ${RATE} req/s evenly paced, ${ROUNDS} × ${SECS} s, upstream ${UPSTREAM_MS} ms (medians)\n`)
  console.log('| engine | store CPU µs/request (this process) | of which system | per round | PostgreSQL backends µs/request (all of this process\'s) | batches/request | Redis calls/request |\n|---|---:|---:|---|---:|---:|---:|')
  for (const e of engines) {
    const shared = e.shared !== undefined
    console.log(`| ${e.label} | ${median(e.cpu).toFixed(1)} | ${median(e.system).toFixed(1)} | ${e.cpu.map((v) => v.toFixed(1)).join(' / ')} | ${shared ? median(e.postgres).toFixed(1) : '—'} | ${shared ? median(e.batches).toFixed(3) : '—'} | ${shared ? median(e.rateCalls).toFixed(3) : '—'} |`)
  }
} finally {
  for (const engine of engines) await engine.store.close().catch(() => {})
  const client = new pg.Client({ connectionString: POSTGRES })
  await client.connect()
  for (const engine of engines) if (engine.schema !== undefined) await client.query(`DROP SCHEMA IF EXISTS "${engine.schema}" CASCADE`)
  await client.end()
  rmSync(dir, { recursive: true, force: true })
}
