/**
 * Issue 25, finding 7: the client's IP could be forged. With `server.trustProxy` on, the gateway
 * took the left-most X-Forwarded-For entry, which the client writes itself: a new forged address
 * per request was a new per-IP rate-limit bucket, so the limit never applied.
 *
 * The rule (nginx real_ip, Express trust proxy): the client is the right-most address that is not
 * a trusted proxy. Here a real HTTP proxy (appending to X-Forwarded-For like nginx's
 * `$proxy_add_x_forwarded_for`) connects to the gateway from 127.0.0.2, the one trusted proxy; the
 * attacker connects to the proxy from 127.0.0.3 and forges the header, or goes to the gateway
 * directly from 127.0.0.4.
 */
import t from 'tap'
import { createServer, request as httpRequest, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream, type TestUpstream } from '../helpers/upstream.ts'

const PROXY_ADDRESS = '127.0.0.2'
const ATTACKER_VIA_PROXY = '127.0.0.3'
const ATTACKER_DIRECT = '127.0.0.4'
const CAPACITY = 3

let up: TestUpstream
let gw: GatewayProcess
let proxy: Server
let proxyPort: number

/** A reverse proxy in front of the gateway: appends the peer to X-Forwarded-For, connects from PROXY_ADDRESS. */
function startProxy(target: URL): Promise<Server> {
  const server = createServer((req, res) => {
    const prior = req.headers['x-forwarded-for']
    const headers = { ...req.headers, 'x-forwarded-for': prior ? `${prior}, ${req.socket.remoteAddress}` : req.socket.remoteAddress! }
    const out = httpRequest({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers, localAddress: PROXY_ADDRESS, agent: false }, (answer) => {
      res.writeHead(answer.statusCode!, answer.headers)
      answer.pipe(res)
    })
    out.on('error', () => res.writeHead(502).end())
    req.pipe(out)
  })
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)))
}

/** One GET from `from` to `port`; the status. */
function get(port: number, path: string, from: string, forwardedFor?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const headers = forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor }
    const req = httpRequest({ host: '127.0.0.1', port, path, headers, localAddress: from, agent: false }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode!))
    })
    req.on('error', reject)
    req.end()
  })
}

t.before(async () => {
  up = await startTestUpstream()
  gw = await startGatewayProcess(`
version: 1
server: { listen: { port: 0 }, trustProxy: [${PROXY_ADDRESS}] }
admin: { listen: { port: 0 } }
store: { dataDir: '{{DIR}}/data' }
log: { access: true }
watch: false
upstreams:
  echo: { url: '${up.url}' }
routes:
  - name: limited
    path: /limited/*rest
    upstream: echo
    plugins:
      - { name: rate-limit, config: { by: ip, capacity: ${CAPACITY}, refillPerSecond: 0.001 } }
`, { startTimeoutMs: 90_000 })
  proxy = await startProxy(new URL(gw.url))
  proxyPort = (proxy.address() as AddressInfo).port
})

t.teardown(async () => {
  await new Promise<void>((resolve) => (proxy ? proxy.close(() => resolve()) : resolve()))
  await gw?.stop()
  await up?.close()
})

t.test('a forged X-Forwarded-For behind the trusted proxy is not the client', async (t) => {
  const statuses: number[] = []
  for (let i = 1; i <= 8; i++) statuses.push(await get(proxyPort, `/limited/via-proxy-${i}`, ATTACKER_VIA_PROXY, `6.6.6.${i}`))
  t.same(statuses, [200, 200, 200, 429, 429, 429, 429, 429], 'every request counts against the address the proxy saw')
  const received = up.received.find((r) => r.url === '/limited/via-proxy-1')!
  t.equal(received.headers['x-forwarded-for'], `6.6.6.1, ${ATTACKER_VIA_PROXY}, ${PROXY_ADDRESS}`, 'the upstream gets the whole chain, the gateway’s peer appended')
  // Access lines are written once each answer is done: wait for all eight.
  const accessLines = () => gw.output.filter((line) => line.includes('/limited/via-proxy-')).map((line) => JSON.parse(line))
  for (let waited = 0; accessLines().length < 8 && waited < 10_000; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50))
  t.same(accessLines().map((line) => line.ip), Array(8).fill(ATTACKER_VIA_PROXY), 'the access log names the real client')
})

t.test('a client that is not a trusted proxy cannot claim an address at all', async (t) => {
  const statuses: number[] = []
  for (let i = 1; i <= 5; i++) statuses.push(await get(Number(new URL(gw.url).port), `/limited/direct-${i}`, ATTACKER_DIRECT, `7.7.7.${i}, ${PROXY_ADDRESS}`))
  t.same(statuses, [200, 200, 200, 429, 429], 'counted against its own address, whatever it wrote')
  const received = up.received.find((r) => r.url === '/limited/direct-1')!
  t.equal(received.headers['x-forwarded-for'], ATTACKER_DIRECT, 'its header is not passed on as if a proxy had written it')
})
