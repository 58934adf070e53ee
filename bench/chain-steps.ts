/**
 * The typical chain's plugin steps alone (key-in-path-auth, credit-meter, rate-limit), in process on a
 * real embedded store, 50 requests in flight like the bench's connections: CPU µs per request of each
 * round. No HTTP, no upstream: what the chain adds over the empty route, for A/B between two trees
 * (a revision unpacked with `git archive REV | tar -x -C DIR` and a node_modules link). Under
 * `valgrind --tool=callgrind`, the difference between runs of 1 and 3 rounds / 40,000 gives the
 * instructions per request (start-up and warm-up cancel out).
 *
 *   node --import tsx bench/chain-steps.ts ROOT [requests per round, 20000] [rounds, 5]
 *
 * Bytes allocated per request: run with `--expose-gc --max-semi-space-size=256 --min-semi-space-size=256`
 * (a young generation no round fills): each round starts after a full GC, and when no GC ran during
 * the round, its heap growth is what the round allocated (`bytesPerRequest`; null when a GC ran).
 */
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
const { default: pino } = await import('pino')
const root = process.argv[2] ?? '.'
const n = Number(process.argv[3] ?? 20000)
const rounds = Number(process.argv[4] ?? 5)
const { Registry } = await import('prom-client')
const { openSqliteStore } = await import(join(resolve(root), 'core/store/sqlite.ts'))
const { ProjectDirectory, hashCredential } = await import(join(resolve(root), 'core/projects/projects.ts'))
const { Context } = await import(join(resolve(root), 'core/proxy/context.ts'))
// any: the two trees' plugin types need not match.
const plugin = async (name: string): Promise<any> => (await import(join(resolve(root), 'plugins', name, 'index.ts'))).default
const store = openSqliteStore({ dataDir: mkdtempSync(join(tmpdir(), 'chainbench-')) })
const KEY = 'tg_benchkey_0123456789abcdef0123456789abcdef'
const projects = new ProjectDirectory([{ id: 'bench', name: 'bench', plan: 'enterprise', scopes: new Set(['rpc']), credits: { allocation: 1e12, period: 'month' }, keys: [{ label: 'bench', hash: hashCredential(KEY) }], settings: {} }])
const metrics = new Registry()
const route = { path: '/bench/:apiKey', rewrite: '/bench', upstream: 'bench', apiType: 'PRIVNET_RPC', plugins: [] }
const init = (name: string) => ({ routeName: 'bench-typical', routeParams: ['apiKey'], route, log: pino({ level: 'silent' }), metrics, store, projects,
  upstream() { throw new Error('none') }, upstreamNames: [], configDir: '.', secretParam() {}, adminRoute() {} })
const defs = [
  [await plugin('key-in-path-auth'), { param: 'apiKey', scope: 'rpc' }],
  [await plugin('credit-meter'), { apiType: 'PRIVNET_RPC', cost: 1, refundStatuses: [502, 504], refundUpstream5xx: true }],
  [await plugin('rate-limit'), { by: 'project', capacity: 1e9, refillPerSecond: 1e9, onStoreError: 'deny' }],
] as const
const instances = await Promise.all(defs.map(([d, c]) => d.create(c, init(d.name))))
const request = instances.filter((i) => i.request).map((i) => i.request.bind(i))
const response = instances.filter((i) => i.response).map((i) => i.response.bind(i))
const done = instances.filter((i) => i.done).map((i) => i.done.bind(i))
async function steps(list: any[], ctx: any) { for (const s of list) { const r = s(ctx); if (r) await r } }
async function one() {
  const ctx = new Context('GET', `/bench/${KEY}`, '', {}, '127.0.0.1')
  ctx.params = { apiKey: KEY }
  await steps(request, ctx)
  ctx.response = { status: 200, headers: {} }
  await steps(response, ctx)
  for (const s of done) await s(ctx)
}
async function batch(count: number) {
  let left = count
  const lane = async () => { while (left-- > 0) await one() }
  await Promise.all(Array.from({ length: 50 }, lane))
}
await batch(n) // warm-up
const out: number[] = []
const bytes: (number | null)[] = []
const gc = (globalThis as { gc?: () => void }).gc
let gcs = 0
const { PerformanceObserver } = await import('node:perf_hooks')
// Counts the GCs V8 decided on; the forced ones (flag 4) between rounds are reported late and are not in a round.
const observer = new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) if ((((entry as { detail?: { flags?: number } }).detail?.flags ?? 0) & 4) === 0) gcs++
})
observer.observe({ entryTypes: ['gc'] })
for (let r = 0; r < rounds; r++) {
  if (gc) {
    gc()
    // Let the observer count that GC before the round starts.
    await new Promise((resolve) => setImmediate(resolve))
  }
  const gcsBefore = gcs
  const heap0 = process.memoryUsage().heapUsed
  const c0 = process.cpuUsage()
  await batch(n)
  const c = process.cpuUsage(c0)
  const grown = process.memoryUsage().heapUsed - heap0
  await new Promise((resolve) => setImmediate(resolve))
  out.push((c.user + c.system) / n)
  bytes.push(gc && gcs === gcsBefore ? Math.round(grown / n) : null)
}
observer.disconnect()
console.log(JSON.stringify({ root, perRequest: out, ...(gc ? { bytesPerRequest: bytes } : {}) }))
await store.close()
