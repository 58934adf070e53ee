/**
 * The shared store's own cost per metered request, in process, without HTTP: reserve, rate-limit
 * take, commit, close, usage record, INF requests in flight, for the store code of each given
 * source tree (before/after), rounds interleaved. Reports this process's CPU, its PostgreSQL
 * backends' CPU and the Redis server's CPU per request.
 *
 *   node --import tsx bench/shared-store-cpu.ts /tmp/before $PWD      env: N (20000), INF (50), ROUNDS (3)
 */
import { randomBytes } from 'node:crypto'
import { backendsOf, redisServerPid, serverCpu } from './lib/server-cpu.ts'
const roots = process.argv.slice(2)
const N = Number(process.env.N ?? 20000), IN_FLIGHT = Number(process.env.INF ?? 50), ROUNDS = Number(process.env.ROUNDS ?? 3)
const PG = 'postgres://postgres@127.0.0.1:5432/test'
const stores: any[] = []
for (const root of roots) {
  const mod = await import(`${root}/core/store/shared/index.ts`)
  const schema = `tg_perfs_${randomBytes(4).toString('hex')}`
  stores.push({ root, schema, store: await mod.openSharedStore({ postgres: PG, redis: 'redis://127.0.0.1:6379', schema, keyPrefix: `perfs:${schema}:` }), cpu: [] as number[], pg: [] as number[], rd: [] as number[], rps: [] as number[] })
}
let seq = 0
async function run(store: any, n: number) {
  let next = 0
  await Promise.all(Array.from({ length: IN_FLIGHT }, async () => {
    while (next++ < n) {
      const id = `r-${seq++}`
      await store.reserveCredits({ id, projectId: 'bench', period: '2026-11', allocation: 1e12, amount: 1, apiType: 'PRIVNET_RPC' })
      await store.takeToken('bench', 1e9, 1e9)
      await new Promise((r) => setImmediate(r))
      await store.commitCredits(id)
      store.closeCredits(id).catch(() => {})
      store.recordUsage({ projectId: 'bench', apiType: 'PRIVNET_RPC', at: Date.now(), requests: 1, credits: 1, errors: 0 })
    }
  }))
}
for (const s of stores) await run(s.store, 2000)
const backends = await backendsOf(PG, process.pid)
const rp = redisServerPid()
for (let r = 0; r < ROUNDS; r++) {
  for (const s of r % 2 ? [...stores].reverse() : stores) {
    const b0 = serverCpu(backends, rp), c0 = process.cpuUsage(), t0 = performance.now()
    await run(s.store, N)
    const c = process.cpuUsage(c0), b1 = serverCpu(backends, rp), ms = performance.now() - t0
    s.cpu.push((c.user + c.system) / N); s.pg.push((b1.postgres - b0.postgres) / N); s.rd.push((b1.redis - b0.redis) / N); s.rps.push(N / ms * 1000)
  }
}
const med = (a: number[]) => [...a].sort((x, y) => x - y)[a.length >> 1]!
console.log('| store code | store-side CPU µs/req (this process) | all pg backends of this process µs/req | redis µs/req | req/s | rounds CPU |')
for (const s of stores) console.log(`| ${s.root} | ${med(s.cpu).toFixed(1)} | ${med(s.pg).toFixed(1)} | ${med(s.rd).toFixed(1)} | ${med(s.rps).toFixed(0)} | ${s.cpu.map((x: number) => x.toFixed(1)).join(' / ')} |`)
for (const s of stores) await s.store.close().catch(() => {})
const pg = (await import('pg')).default
const c = new pg.Client({ connectionString: PG }); await c.connect()
for (const s of stores) await c.query(`DROP SCHEMA IF EXISTS "${s.schema}" CASCADE`)
await c.end()
