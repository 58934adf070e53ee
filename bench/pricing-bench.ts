/**
 * Gateway CPU per request of a JSON-RPC batch of 20 priced per method (credit-meter `jsonrpc:`)
 * against the same batch at a flat price (`cost: 20`), on one gateway process, rounds interleaved
 * (A B B A ...), a fixed number of requests per round. The figure is the ratio of the gateway's
 * CPU µs per request (from /proc, the gateway process only), so machine load cancels out to the
 * extent it hits both routes alike. Also times the discovery manifest of the shipped gateway.yaml.
 *
 *   node --import tsx bench/pricing-bench.ts        env: N (3000 requests per round), ROUNDS (6), CONC (16)
 */
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Pool } from 'undici'
import { hashCredential } from '../core/projects/projects.ts'
import { startNodeRpc } from '../examples/upstreams/node-rpc.ts'
import { cpuMicros, startPinned, stopAll, waitForLine } from './lib/processes.ts'
import { median } from './lib/report.ts'

const N = Number(process.env.N ?? 3000)
const ROUNDS = Number(process.env.ROUNDS ?? 6)
const CONC = Number(process.env.CONC ?? 16)
const KEY = `bk_${randomBytes(12).toString('hex')}`
const BIN = fileURLToPath(new URL('../bin/tollgate.js', import.meta.url))
const METHODS = ['system_chain', 'system_name', 'system_version', 'chain_getHeader', 'chain_getBlockHash']

function route(name: string, meter: string): string {
  return `  - name: ${name}
    methods: [POST]
    path: /${name}
    apiType: PRIVNET_RPC
    errorFormat: jsonrpc
    handler:
      name: jsonrpc
      config: { upstream: node, allow: [${METHODS.join(', ')}] }
    plugins:
      - { name: header-auth, config: { scope: rpc } }
      - { name: credit-meter, config: ${meter} }
`
}

const node = await startNodeRpc()
const dir = mkdtempSync(join(tmpdir(), 'tollgate-pricing-bench-'))
const file = join(dir, 'gateway.yaml')
writeFileSync(file, `version: 1
server: { listen: { host: 127.0.0.1, port: 0 } }
admin: { listen: { host: 127.0.0.1, port: 0 } }
store: { dataDir: '${dir}/data' }
log: { access: false }
watch: false
projects:
  - id: bench
    scopes: [rpc]
    credits: { allocation: 1000000000000, period: month }
    keys: [{ hash: ${hashCredential(KEY)} }]
upstreams:
  node: { url: '${node.url}', connections: 64 }
routes:
${route('flat', '{ apiType: PRIVNET_RPC, cost: 20 }')}${route('priced', `{ apiType: PRIVNET_RPC, jsonrpc: { default: 1, methods: { system_chain: 1, system_name: 2, system_version: 1, chain_getHeader: 3, chain_getBlockHash: 2 } } }`)}`)

try {
  // The gateway alone on core 1; this process (load) and the stand-in node on core 0.
  const gw = startPinned('gateway', 1, process.execPath, [BIN, 'start', '-c', file])
  const started = await waitForLine(gw, /tollgate started/, 120_000)
  // The first address in the start line is the public listener's (the admin one follows).
  const url = `http://127.0.0.1:${/127\.0\.0\.1:(\d+)/.exec(started)![1]}`
  const pool = new Pool(url, { connections: CONC })
  const batch = JSON.stringify(Array.from({ length: 20 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: METHODS[i % METHODS.length], params: [] })))
  const charged = new Map<string, string>()
  const one = async (path: string) => {
    const res = await pool.request({ path, method: 'POST', headers: { 'x-api-key': KEY, 'content-type': 'application/json' }, body: batch })
    const text = await res.body.text()
    if (res.statusCode !== 200) throw new Error(`${path}: ${res.statusCode} ${text.slice(0, 200)}`)
    charged.set(path, String(res.headers['x-credits-charged']))
  }
  const round = async (path: string) => {
    let next = 0
    const c0 = cpuMicros(gw.pid)
    const t0 = performance.now()
    await Promise.all(Array.from({ length: CONC }, async () => {
      while (next++ < N) await one(path)
    }))
    return { cpu: (cpuMicros(gw.pid) - c0) / N, rps: N / ((performance.now() - t0) / 1000) }
  }
  // Warm-up: both routes, JIT and pools.
  for (const path of ['/flat', '/priced']) for (let i = 0; i < 3; i++) await round(path)
  const results: Record<string, { cpu: number[]; rps: number[] }> = { '/flat': { cpu: [], rps: [] }, '/priced': { cpu: [], rps: [] } }
  for (let r = 0; r < ROUNDS; r++) {
    for (const path of r % 2 ? ['/priced', '/flat'] : ['/flat', '/priced']) {
      const { cpu, rps } = await round(path)
      results[path].cpu.push(cpu)
      results[path].rps.push(rps)
    }
  }
  await pool.close()
  const flat = median(results['/flat'].cpu)
  const priced = median(results['/priced'].cpu)
  console.log(`batch of 20 JSON-RPC calls, ${N} requests × ${ROUNDS} rounds per route, ${CONC} in flight; charged: flat ${charged.get('/flat')}, priced ${charged.get('/priced')}`)
  console.log('| route | gateway CPU µs/req (median) | rounds | req/s (median) |')
  console.log('|---|---|---|---|')
  for (const [path, r] of Object.entries(results)) console.log(`| ${path} | ${median(r.cpu).toFixed(1)} | ${r.cpu.map((x) => x.toFixed(0)).join(' / ')} | ${median(r.rps).toFixed(0)} |`)
  console.log(`priced / flat CPU per request: ${(priced / flat).toFixed(3)} (added ${(((priced - flat) / flat) * 100).toFixed(1)}%; goal ≤ 5%)`)
  // What pricing itself adds, load-independent in proportion: the price of the parsed batch, in process.
  const { jsonRpcPrice } = await import('../plugins/credit-meter/pricing.ts')
  const prices = { default: 1, methods: { system_chain: 1, system_name: 2, system_version: 1, chain_getHeader: 3, chain_getBlockHash: 2 } }
  const parsed = JSON.parse(batch)
  let sink = 0
  for (let i = 0; i < 100_000; i++) sink += jsonRpcPrice(prices, parsed)
  const c0 = process.cpuUsage()
  for (let i = 0; i < 1_000_000; i++) sink += jsonRpcPrice(prices, parsed)
  const c = process.cpuUsage(c0)
  const perCall = (c.user + c.system) / 1_000_000
  console.log(`pricing a batch of 20 in process: ${perCall.toFixed(3)} µs CPU (${((perCall / flat) * 100).toFixed(3)}% of the flat route's ${flat.toFixed(0)} µs per request; checksum ${sink})`)

  // Discovery manifest generation on the shipped gateway.yaml: what `tollgate routes --json` builds.
  const { withDryBuild } = await import('../core/cli/dry-build.ts')
  const { buildManifest } = await import('../plugins/x402-paywall/discovery.ts')
  const shipped = fileURLToPath(new URL('../gateway.yaml', import.meta.url))
  await withDryBuild(shipped, (table) => {
    const described = table.routes.flatMap((r) => (r.descriptions.has('x402-paywall') ? [{ name: r.name, methods: r.config.methods, path: r.config.path, description: r.descriptions.get('x402-paywall') }] : []))
    const times: number[] = []
    for (let i = 0; i < 200; i++) {
      const t0 = performance.now()
      buildManifest(described)('http://127.0.0.1:8080')
      times.push(performance.now() - t0)
    }
    console.log(`discovery manifest of gateway.yaml (${described.length} paid route(s)): build + render ${(median(times) * 1000).toFixed(1)} µs median of 200`)
    return 0
  })
} finally {
  await stopAll()
  await node.close()
  rmSync(dir, { recursive: true, force: true })
}
