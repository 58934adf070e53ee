/**
 * Discovery and cost headers through a real gateway process (issue 29, first slice):
 * - `GET /.well-known/x402.json` lists exactly the paid routes, with the `accepts` of each route's
 *   live 402 answer, and follows a reload;
 * - `tollgate routes` prints the same table (text and --json) and refuses an unknown flag;
 * - a metered answer carries `x-credits-charged` / `x-credits-remaining` equal to the ledger
 *   (admin API), and the access log records them.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { spawn } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { tempDir } from '../helpers/temp.ts'
import { hashCredential } from '../../core/projects/projects.ts'
import { BIN, startGatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream, type TestUpstream } from '../helpers/upstream.ts'

const KEY = `tk_disc_${randomBytes(12).toString('hex')}`
const ADMIN_TOKEN = `admin_${randomBytes(12).toString('hex')}`
const PAY_TO = '0x' + '11'.repeat(20)
const FACILITATOR = '0x' + '22'.repeat(20)

function config(up: TestUpstream, weatherPrice: string, withProve = true): string {
  return `version: 1
server: { listen: { host: 127.0.0.1, port: 0 } }
admin: { listen: { host: 127.0.0.1, port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
watch: true
projects:
  - id: acme
    scopes: [mirror]
    credits: { allocation: 100, period: month }
    keys: [{ label: main, hash: ${hashCredential(KEY)} }]
upstreams:
  demo: { url: '${up.url}' }
  fac: { url: '${up.url}/facilitator' }
routes:
  - { name: free, methods: [GET], path: /free, upstream: demo }
  - name: weather
    methods: [GET]
    path: /weather/:city
    upstream: demo
    plugins:
      - name: x402-paywall
        config:
          price: '${weatherPrice}'
          payTo: '${PAY_TO}'
          description: Weather of a city
          networks:
            - { network: base-sepolia, facilitator: { upstream: fac } }
            - { network: polygon-amoy, price: '20000', facilitator: { upstream: fac } }
${withProve ? `  - name: prove
    methods: [POST, PUT]
    path: /prove/*rest
    upstream: demo
    plugins:
      - name: x402-paywall
        config:
          scheme: upto
          price: '50000'
          pricePerCredit: '100'
          payTo: '${PAY_TO}'
          resourceBaseUrl: https://api.example.com
          networks:
            - { network: eip155:84532, facilitator: { upstream: fac, facilitatorAddress: '${FACILITATOR}' } }
` : ''}  - name: metered
    methods: [GET]
    path: /metered/*rest
    upstream: demo
    plugins:
      - { name: header-auth, config: { scope: mirror } }
      - { name: credit-meter, config: { apiType: MIRROR, cost: 3 } }
`
}

function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, 'routes', ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk) => (stdout += chunk))
    child.stderr.on('data', (chunk) => (stderr += chunk))
    child.on('close', (code) => resolve({ code, stdout, stderr }))
  })
}

/** The `accepts` of a route's live 402 answer (v2, PAYMENT-REQUIRED). */
async function liveAccepts(url: string, method: string): Promise<unknown[]> {
  const res = await fetch(url, { method, ...(method === 'GET' ? {} : { body: '{}', headers: { 'content-type': 'application/json' } }) })
  await res.text()
  if (res.status !== 402) throw new Error(`${method} ${url}: expected 402, got ${res.status}`)
  return JSON.parse(Buffer.from(res.headers.get('payment-required')!, 'base64').toString('utf8')).accepts
}

t.test('discovery manifest, tollgate routes and cost headers', async (t) => {
  t.setTimeout(240_000)
  const up = await startTestUpstream()
  const gw = await startGatewayProcess(config(up, '10000'), { startTimeoutMs: 90_000 })
  t.teardown(async () => {
    await gw.stop()
    await up.close()
  })
  const origin = new URL(gw.url).host

  await t.test('the manifest lists exactly the paid routes, as their live 402s offer them', async (t) => {
    const res = await fetch(`${gw.url}/.well-known/x402.json`)
    t.equal(res.status, 200)
    t.match(res.headers.get('content-type'), /application\/json/)
    const manifest: any = await res.json()
    t.equal(manifest.x402Version, 2)
    t.type(manifest.lastUpdated, 'number')
    t.same(manifest.items.map((item: any) => `${item.input.method} ${item.input.routeTemplate}`), ['GET /weather/:city', 'POST /prove/*rest', 'PUT /prove/*rest'],
      'paid routes only, one item per method; /free and /metered are not listed')
    const [weather, provePost] = manifest.items
    t.same(weather.resource, { url: `http://${origin}/weather/:city`, description: 'Weather of a city', mimeType: 'application/json' })
    t.equal(weather.type, 'http')
    t.same(weather.input.pathParams, { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] })
    t.same(weather.output, { mimeType: 'application/json' })
    t.same(weather.accepts.map((a: any) => [a.scheme, a.network, a.amount]), [['exact', 'eip155:84532', '10000'], ['exact', 'eip155:80002', '20000']])
    t.equal(provePost.resource.url, 'https://api.example.com/prove/*rest', 'a configured resourceBaseUrl wins over the origin')
    t.same(provePost.accepts.map((a: any) => [a.scheme, a.amount]), [['upto', '50000']], 'upto: the amount is the maximum')
    for (const item of manifest.items) {
      const path = item.input.routeTemplate.replace(':city', 'paris').replace('*rest', 'x/y')
      t.same(await liveAccepts(gw.url + path, item.input.method), item.accepts, `${item.input.method} ${path}: manifest accepts = live 402 accepts`)
    }
    const head = await fetch(`${gw.url}/.well-known/x402.json`, { method: 'POST' })
    await head.text()
    t.equal(head.status, 405, 'only GET (and HEAD)')
  })

  await t.test('tollgate routes prints the same table', async (t) => {
    const manifest: any = await (await fetch(`${gw.url}/.well-known/x402.json`)).json()
    const json = await cli(['-c', gw.configFile, '--json'])
    t.equal(json.code, 0, json.stderr)
    const table = JSON.parse(json.stdout)
    t.same(table.routes.map((r: any) => r.name), ['free', 'weather', 'prove', 'metered'])
    t.same(table.wellKnown, ['/.well-known/x402.json'])
    const described = table.routes.filter((r: any) => r.descriptions['x402-paywall'])
    t.same(described.map((r: any) => r.descriptions['x402-paywall'].accepts), [manifest.items[0].accepts, manifest.items[1].accepts], 'same accepts as the manifest')
    t.same(table.routes[3].plugins, ['header-auth', 'credit-meter'])
    t.same(table.routes[3].descriptions, { 'credit-meter': { summary: '3 credit(s) per request (MIRROR)', apiType: 'MIRROR', cost: 3 } })
    const text = await cli(['--config', gw.configFile])
    t.equal(text.code, 0, text.stderr)
    t.match(text.stdout, /GET \/weather\/:city {2}\(weather, upstream demo\)\n {4}x402-paywall: x402 exact: 10000 of 0x036CbD53842c5426634e7929541eC2318f3dCF7e on eip155:84532, 20000 of 0x41E94Eb019C0762f9Bfcf9Fb1E58725BfB0e7582 on eip155:80002/)
    t.match(text.stdout, /x402 upto: ≤50000 of .* on eip155:84532/)
    const help = await cli(['--help'])
    t.equal(help.code, 0)
    t.match(help.stdout, /Usage: tollgate routes/)
  })

  await t.test('tollgate routes refuses bad input', async (t) => {
    const unknown = await cli(['-c', gw.configFile, '--jsn'])
    t.equal(unknown.code, 2)
    t.match(unknown.stderr, /unknown option --jsn \(did you mean --json\?\)/)
    t.equal(unknown.stdout, '')
    const positional = await cli(['extra'])
    t.equal(positional.code, 2)
    t.match(positional.stderr, /extra/)
    const missing = await cli(['-c'])
    t.equal(missing.code, 2)
    t.match(missing.stderr, /--config/)
    // A configured route at the manifest's path would shadow it: the config is refused.
    const dir = tempDir('tollgate-disc-')
    const file = join(dir, 'gateway.yaml')
    writeFileSync(file, config(up, '10000', false).replaceAll('{{DIR}}', dir) + '  - { name: own-manifest, methods: [GET], path: /.well-known/x402.json, upstream: demo }\n')
    const clash = await cli(['-c', file])
    t.equal(clash.code, 1)
    t.match(clash.stderr, /GET \/\.well-known\/x402\.json is defined twice/)
  })

  await t.test('cost headers equal the ledger, and the access log records them', async (t) => {
    const balance = async () => {
      const res = await fetch(`${gw.adminUrl}/admin/projects/acme/credits`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
      return ((await res.json()) as any).balance
    }
    const before = await balance()
    let previous = before.remaining
    for (let i = 1; i <= 2; i++) {
      const res = await fetch(`${gw.url}/metered/thing`, { headers: { 'x-api-key': KEY } })
      await res.text()
      t.equal(res.status, 200)
      const after = await balance()
      t.equal(res.headers.get('x-credits-charged'), String(previous - after.remaining), 'charged = what the ledger took')
      previous = after.remaining
      t.equal(res.headers.get('x-credits-charged'), '3')
      t.equal(res.headers.get('x-credits-remaining'), String(after.remaining), 'remaining = the ledger balance')
      t.equal(after.remaining, before.remaining - 3 * i)
      const line = await gw.waitFor(new RegExp(`"reqId":"${res.headers.get('x-request-id')}"`))
      t.match(JSON.parse(line), { creditsCharged: 3, creditsRemaining: after.remaining })
    }
    // A refunded answer (the upstream's 502): charged 0, the balance unchanged.
    const left = (await balance()).remaining
    const failed = await fetch(`${gw.url}/metered/status/502`, { headers: { 'x-api-key': KEY } })
    await failed.text()
    t.equal(failed.status, 502)
    t.equal(failed.headers.get('x-credits-charged'), '0')
    t.equal(failed.headers.get('x-credits-remaining'), String(left))
    t.equal((await balance()).remaining, left)
    // A refused request (no key) is not metered: no cost headers.
    const anonymous = await fetch(`${gw.url}/metered/thing`)
    await anonymous.text()
    t.equal(anonymous.status, 401)
    t.equal(anonymous.headers.get('x-credits-charged'), null)
  })

  await t.test('a reload changes the manifest', async (t) => {
    gw.writeConfig(config(up, '12345', false))
    await gw.waitFor(/config reloaded/)
    const manifest: any = await (await fetch(`${gw.url}/.well-known/x402.json`)).json()
    t.same(manifest.items.map((item: any) => `${item.input.method} ${item.input.routeTemplate}`), ['GET /weather/:city'], 'the removed route is gone')
    t.same(manifest.items[0].accepts.map((a: any) => a.amount), ['12345', '20000'])
    t.same(await liveAccepts(`${gw.url}/weather/oslo`, 'GET'), manifest.items[0].accepts)
  })
})
