/**
 * Prices beyond the flat cost, through a real gateway process (issue 29, item 3):
 * - a JSON-RPC route priced per method: a mixed batch costs the sum of its calls, an unknown
 *   method the default; `x-credits-charged` / `x-credits-remaining` equal the ledger (admin API)
 *   and the access log line;
 * - two-phase metering: the estimate is reserved, the upstream's measured cost is charged and the
 *   rest released (`x-credits-reserved` beside `x-credits-charged`); a missing measure charges
 *   the estimate, one above it is capped;
 * - a price per KiB of request body;
 * - `tollgate check` refuses a negative or fractional price, a table without a default and a price
 *   for a method the handler does not offer, each at file:line:col.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { spawn } from 'node:child_process'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { hashCredential } from '../../core/projects/projects.ts'
import { BIN, startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { tempDir } from '../helpers/temp.ts'
import { verifyReceipt } from '../../plugins/receipt/receipts.ts'
import { startNodeRpc, type StandIn } from '../../examples/upstreams/node-rpc.ts'

const KEY = `tk_price_${randomBytes(12).toString('hex')}`
const ADMIN_TOKEN = `admin_${randomBytes(12).toString('hex')}`
/** The receipt signing key as a 32-byte seed in hex (one of the forms the plugin reads). */
const RECEIPT_SEED = randomBytes(32).toString('hex')

const PRICES = `{ default: 2, methods: { system_chain: 1, chain_getHeader: 5, privnet_chainInfo: 7 } }`

function config(nodeUrl: string, workUrl: string, prices = PRICES): string {
  return `version: 1
server: { listen: { host: 127.0.0.1, port: 0 } }
admin: { listen: { host: 127.0.0.1, port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
watch: false
projects:
  - id: acme
    scopes: [rpc]
    credits: { allocation: 100000, period: month }
    keys: [{ label: main, hash: ${hashCredential(KEY)} }]
upstreams:
  node: { url: '${nodeUrl}' }
  work: { url: '${workUrl}' }
routes:
  - name: rpc
    methods: [POST]
    path: /rpc
    apiType: PRIVNET_RPC
    errorFormat: jsonrpc
    handler:
      name: jsonrpc
      config:
        upstream: node
        allow: [system_chain, system_name, chain_getHeader]
        aliases: { privnet_ledgerVersion: midnight_ledgerVersion }
        chainInfo: { method: privnet_chainInfo }
    plugins:
      - { name: header-auth, config: { scope: rpc } }
      - name: credit-meter
        config:
          apiType: PRIVNET_RPC
          jsonrpc: ${prices}
      - { name: receipt, config: { keyEnv: PRICING_RECEIPT_KEY } }
  - name: work
    methods: [POST]
    path: /work
    upstream: work
    plugins:
      - { name: header-auth, config: { scope: rpc } }
      - { name: credit-meter, config: { apiType: PRIVNET_RPC, cost: 10, actual: { header: x-work-units } } }
  - name: upload
    methods: [POST]
    path: /upload
    upstream: work
    plugins:
      - { name: header-auth, config: { scope: rpc } }
      - { name: credit-meter, config: { apiType: PRIVNET_RPC, cost: 1, perKiB: 2 } }
`
}

/** An upstream that measures its own work: it answers `x-work-units` with the `units` it was asked for. */
async function startWorkUpstream(): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      const units = new URL(req.url!, 'http://x').searchParams.get('units')
      res.writeHead(200, { 'content-type': 'application/json', ...(units !== null ? { 'x-work-units': units } : {}) })
      res.end('{"done":true}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => new Promise((resolve) => server.close(() => resolve())) }
}

// Five gateway starts and dry builds: slow on a loaded machine.
t.setTimeout(400_000)

let node: StandIn
let work: Awaited<ReturnType<typeof startWorkUpstream>>
let gw: GatewayProcess

t.before(async () => {
  node = await startNodeRpc()
  work = await startWorkUpstream()
  gw = await startGatewayProcess(config(node.url, work.url), { startTimeoutMs: 90_000, env: { PRICING_RECEIPT_KEY: RECEIPT_SEED } })
})
t.teardown(async () => {
  await gw?.stop('SIGKILL')
  await node?.close()
  await work?.close()
})

async function remaining(): Promise<number> {
  const res = await fetch(`${gw.adminUrl}/admin/projects/acme/credits`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  return ((await res.json()) as any).balance.remaining
}

async function post(path: string, body: string): Promise<Response & { text_: string }> {
  const res = await fetch(gw.url + path, { method: 'POST', headers: { 'x-api-key': KEY, 'content-type': 'application/json' }, body })
  return Object.assign(res, { text_: await res.text() })
}

async function logLine(res: Response): Promise<any> {
  return JSON.parse(await gw.waitFor(new RegExp(`"reqId":"${res.headers.get('x-request-id')}"`)))
}

t.test('a mixed JSON-RPC batch costs the sum of its calls; the headers equal the ledger and the log', async (t) => {
  const before = await remaining()
  const batch = [
    { jsonrpc: '2.0', id: 1, method: 'system_chain', params: [] }, // 1
    { jsonrpc: '2.0', id: 2, method: 'chain_getHeader', params: [] }, // 5
    { jsonrpc: '2.0', id: 3, method: 'privnet_chainInfo', params: [] }, // 7
    { jsonrpc: '2.0', id: 4, method: 'system_name', params: [] }, // not priced: default 2
    { jsonrpc: '2.0', id: 5, method: 'no_such_method', params: [] }, // unknown: default 2
    { jsonrpc: '2.0', id: 6, method: 'privnet_ledgerVersion', params: [] }, // alias, not priced: 2
  ]
  const res = await post('/rpc', JSON.stringify(batch))
  t.equal(res.status, 200)
  t.equal(JSON.parse(res.text_).length, 6)
  const after = await remaining()
  t.equal(res.headers.get('x-credits-charged'), '19', '1 + 5 + 7 + 2 + 2 + 2')
  t.equal(before - after, 19, 'the ledger took what the header says')
  t.equal(res.headers.get('x-credits-remaining'), String(after))
  t.match(await logLine(res), { creditsCharged: 19, creditsRemaining: after, creditsReserved: 19, rpcCalls: 6, receipt: true })

  // The receipt of a credits-paid answer: the project, the credits, the request id; it checks offline.
  const keys = await (await fetch(`${gw.url}/.well-known/tollgate-receipt-keys.json`)).json()
  const verdict = verifyReceipt(res.headers.get('x-receipt')!, keys as any)
  t.match(verdict, { ok: true, kid: 'tollgate-receipt-1', payload: { network: 'tollgate:credits', payer: 'project:acme', amount: '19', asset: 'credits', requestId: res.headers.get('x-request-id'), project: 'acme' } })
  const dir = tempDir('tollgate-price-receipt-')
  writeFileSync(join(dir, 'keys.json'), JSON.stringify(keys))
  const printed = await run(['receipt', 'public-key', '--env', 'PRICING_RECEIPT_KEY'], { PRICING_RECEIPT_KEY: RECEIPT_SEED })
  t.equal(printed.code, 0, printed.stderr)
  t.same(JSON.parse(printed.stdout), keys, 'the CLI prints the key set the gateway serves')
  t.notMatch(printed.stdout + printed.stderr, RECEIPT_SEED, 'the private key is never printed')
  const verified = await run(['receipt', 'verify', res.headers.get('x-receipt')!, '--keys', join(dir, 'keys.json')])
  t.equal(verified.code, 0, verified.stderr)
  t.match(verified.stdout, /valid receipt \(kid tollgate-receipt-1\)[\s\S]*amount\s+19/)
  t.notOk(gw.output.some((line) => line.includes(RECEIPT_SEED)), 'the key is not in the logs')
  const free = await post('/work?units=0', '{}')
  t.equal(free.headers.get('x-receipt'), null, 'a route without the receipt plugin carries none')

  const single = await post('/rpc', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'chain_getHeader', params: [] }))
  t.equal(single.headers.get('x-credits-charged'), '5')
  t.equal(await remaining(), after - 5)
  const unknown = await post('/rpc', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_call', params: [] }))
  t.equal(unknown.headers.get('x-credits-charged'), '2', 'an unknown method costs the default')
  t.equal(single.headers.get('x-credits-remaining'), String(after - 5))
})

t.test('two-phase: the estimate is reserved, the measured cost charged, the rest released', async (t) => {
  const before = await remaining()
  const res = await post('/work?units=3', '{}')
  t.equal(res.status, 200)
  t.equal(res.headers.get('x-credits-reserved'), '10', 'the estimate')
  t.equal(res.headers.get('x-credits-charged'), '3', 'the actual')
  t.equal(res.headers.get('x-work-units'), null, "the upstream's accounting header stays in the gateway")
  const after = await remaining()
  t.equal(before - after, 3, 'the ledger took the actual; the other 7 went back')
  t.equal(res.headers.get('x-credits-remaining'), String(after))
  t.match(await logLine(res), { creditsReserved: 10, creditsCharged: 3, creditsRemaining: after })

  const zero = await post('/work?units=0', '{}')
  t.equal(zero.headers.get('x-credits-charged'), '0')
  t.equal(await remaining(), after, 'no work, no charge')
  const capped = await post('/work?units=500', '{}')
  t.equal(capped.headers.get('x-credits-charged'), '10', 'never more than the reservation')
  const unmeasured = await post('/work', '{}')
  t.equal(unmeasured.headers.get('x-credits-charged'), '10', 'no measure: the estimate stands')
  const garbage = await post('/work?units=1.5', '{}')
  t.equal(garbage.headers.get('x-credits-charged'), '10', 'a malformed measure: the estimate stands')
  t.equal(await remaining(), after - 30)

  // The ledger's charge lines show both figures. Released before the commit: 10 by the first test's
  // /work?units=0, then 7 (units=3) and 10 (units=0) here; every other request charged its reservation.
  const ledger = await (await fetch(`${gw.adminUrl}/admin/projects/acme/credits/ledger`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json() as any
  const lines = ledger.entries.filter((e: any) => e.kind === 'charge')
  const charged = lines.reduce((sum: number, e: any) => sum + e.amount, 0)
  const reserved = lines.reduce((sum: number, e: any) => sum + e.reserved, 0)
  t.equal(charged, -(100_000 - (await remaining())), 'the charge lines add up to what was used')
  t.equal(reserved - charged, -(10 + 7 + 10), 'reserved exceeds charged by what two-phase metering released')
})

t.test('a price per KiB of request body', async (t) => {
  const before = await remaining()
  const small = await post('/upload', 'x'.repeat(100))
  t.equal(small.headers.get('x-credits-charged'), '3', '1 + 2 × 1 KiB')
  const big = await post('/upload', 'x'.repeat(3 * 1024 + 1))
  t.equal(big.headers.get('x-credits-charged'), '9', '1 + 2 × 4 started KiB')
  t.equal(await remaining(), before - 12)
})

function run(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk) => (stdout += chunk))
    child.stderr.on('data', (chunk) => (stderr += chunk))
    child.on('exit', (code) => resolve({ code, stdout, stderr }))
  })
}

function check(text: string): Promise<{ code: number | null; stderr: string }> {
  const dir = tempDir('tollgate-price-check-')
  const file = join(dir, 'gateway.yaml')
  writeFileSync(file, text.replaceAll('{{DIR}}', dir))
  return run(['check', '-c', file], { PRICING_RECEIPT_KEY: RECEIPT_SEED })
}

t.test('tollgate check refuses bad price tables at file:line:col', async (t) => {
  const good = await check(config('http://127.0.0.1:9', 'http://127.0.0.1:9'))
  t.equal(good.code, 0, good.stderr)
  // Every refusal points into the rpc route's credit-meter `jsonrpc:` table.
  const line = config('http://127.0.0.1:9', 'http://127.0.0.1:9').split('\n').findIndex((l) => l.includes('jsonrpc: {')) + 1
  const cases: [string, string, RegExp][] = [
    ['negative', `{ default: 2, methods: { system_chain: -1 } }`, /must be integer >= 0/],
    ['fractional', `{ default: 1.5, methods: {} }`, /must be integer/],
    ['no default', `{ methods: { system_chain: 1 } }`, /default/],
    ['not offered', `{ default: 1, methods: { chain_getHeadr: 3 } }`, /"chain_getHeadr", which the route's jsonrpc handler does not offer/],
  ]
  for (const [name, prices, message] of cases) {
    const bad = await check(config('http://127.0.0.1:9', 'http://127.0.0.1:9', prices))
    t.equal(bad.code, 1, name)
    t.match(bad.stderr, message, name)
    t.match(bad.stderr, new RegExp(`gateway\\.yaml:${line}:\\d+`), `${name}: at the table's line`)
  }
})
