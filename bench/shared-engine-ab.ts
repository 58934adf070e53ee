/**
 * Before/after of the shared engine in one run: gateways started from different source trees (a
 * `git archive` of the old commit with node_modules linked, and this tree), each on the embedded or
 * the shared engine, typical chain, rounds interleaved; req/s, gateway CPU, and the CPU of its
 * PostgreSQL backends and of the Redis server, per request (medians).
 *
 *   node --import tsx bench/shared-engine-ab.ts embedded:$PWD shared:/tmp/before shared:$PWD
 *   env: SECS (5), ROUNDS (3), CREDIT_COMMIT (durable | async: store.creditCommit of the shared gateways), RATE (fixed total req/s with autocannon; default: wrk closed loop,
 *   50 connections), PROF (directory: gateways run with --cpu-prof)
 */
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { cpuMicros, freePort, pinSelf, startPinned, stopAll, waitForHttp } from './lib/processes.ts'
import { BENCH_KEY, LOAD_CORE, PROXY_CORE, startUpstream, tollgateConfig } from './lib/targets.ts'
import { runWrk, runAutocannon } from './lib/load.ts'
const RATE = Number(process.env.RATE ?? 0)
const load = (url: string, s: number) => (RATE ? runAutocannon(url, s, 50, RATE) : runWrk(url, s, 50))
import { median } from './lib/report.ts'
import { backendsOf, redisServerPid, serverCpu } from './lib/server-cpu.ts'
const PG = 'postgres://postgres@127.0.0.1:5432/test'
const CREDIT_COMMIT = process.env.CREDIT_COMMIT ?? 'durable'
if (CREDIT_COMMIT !== 'durable' && CREDIT_COMMIT !== 'async') throw new Error(`CREDIT_COMMIT must be durable or async, got ${CREDIT_COMMIT}`)
const specs = process.argv.slice(2) // e.g. shared:/work/main shared:/work/wt/perf embedded:/work/wt/perf
const seconds = Number(process.env.SECS ?? 5), rounds = Number(process.env.ROUNDS ?? 3)
pinSelf(LOAD_CORE)
const dir = mkdtempSync(join(tmpdir(), 'perfab-'))
const upstream = await startUpstream(dir)
const schemas: string[] = []
const gws = []
for (const spec of specs) {
  const [engine, root] = spec.split(':')
  const schema = `tg_perfab_${randomBytes(4).toString('hex')}`
  schemas.push(schema)
  const [port, adminPort] = [await freePort(), await freePort()]
  const store = engine === 'embedded' ? `store:\n  dataDir: ./data\n` : `store: { engine: shared, postgres: "${PG}", redis: "redis://127.0.0.1:6379", schema: ${schema}, keyPrefix: "tgperfab:${schema}:", creditCommit: ${CREDIT_COMMIT} }\n`
  const config = tollgateConfig({ port, adminPort, upstreamUrl: upstream.url, empty: false, typical: true }).replace(/store:\n {2}dataDir: \.\/data\n/, store)
  const d = mkdtempSync(join(dir, 'gw-'))
  writeFileSync(join(d, 'gateway.yaml'), config)
  const prof = process.env.PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.PROF, '--cpu-prof-name', `${engine}-${root.replaceAll('/', '_')}.cpuprofile`] : []
  const proc = startPinned(spec, PROXY_CORE, process.execPath, [...prof, join(root, 'bin/tollgate.js'), 'start', '-c', join(d, 'gateway.yaml')])
  const url = `http://127.0.0.1:${port}/bench/${BENCH_KEY}`
  await waitForHttp(url, proc, 200, 240_000)
  gws.push({ spec, engine, proc, url, rps: [] as number[], cpu: [] as number[], pgc: [] as number[], rc: [] as number[] })
}
for (const g of gws) await runWrk(g.url, 2, 50)
for (let r = 0; r < rounds; r++) {
  for (const g of r % 2 ? [...gws].reverse() : gws) {
    const backends = g.engine === 'shared' ? await backendsOf(PG, g.proc.pid) : []
    const rp = g.engine === 'shared' ? redisServerPid() : undefined
    const s0 = serverCpu(backends, rp), c0 = cpuMicros(g.proc.pid)
    const res = await load(g.url, seconds)
    const c1 = cpuMicros(g.proc.pid), s1 = serverCpu(backends, rp)
    const n = Math.max(1, res.requests)
    g.rps.push(res.rps); g.cpu.push((c1 - c0) / n); g.pgc.push((s1.postgres - s0.postgres) / n); g.rc.push((s1.redis - s0.redis) / n)
  }
}
console.log('| gateway | req/s | gw µs/req | pg µs/req | redis µs/req | rounds req/s | rounds gw µs/req |')
for (const g of gws) console.log(`| ${g.spec} | ${median(g.rps).toFixed(0)} | ${median(g.cpu).toFixed(1)} | ${median(g.pgc).toFixed(1)} | ${median(g.rc).toFixed(1)} | ${g.rps.map((x) => x.toFixed(0)).join(' / ')} | ${g.cpu.map((x) => x.toFixed(0)).join(' / ')} |`)
await stopAll()
const c = new pg.Client({ connectionString: PG }); await c.connect()
for (const s of schemas) await c.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`)
await c.end()
process.exit(0)
