/**
 * What bounds x402 answers (issue 18).
 *
 * A 402 reflects the request path in `PAYMENT-REQUIRED`: a 14 KB path made a 19 KB response head,
 * which node:http clients refuse, so the reflected path is cut at 1,024 characters.
 *
 * A chain RPC that sends its head and then nothing (defect 4). viem's timeout covers
 * only the time to the head, so `health`, verify, settle and the paywall waited for ever while the
 * request's credit reservation was held. The facilitator's RPC transport now reads the body under
 * the same deadline (`rpcTimeoutMs`): every chain read ends, and its request is answered.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { createServer, get as httpGet, request as httpRequest, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import { request } from 'undici'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { x402Config, x402Env } from '../helpers/x402.ts'
import { bodyV2, requirementsV2, signAuthorization, startFixture } from '../plugins/x402-facilitator/evm-helpers.ts'

const KEY = `xk_stall_${randomBytes(10).toString('hex')}`
const RPC_TIMEOUT_MS = 1500
/** Comfortably above the RPC timeout (a verify makes a few reads), far below "never". */
const ANSWER_WITHIN_MS = 8000

const f = await startFixture(84532)
let stalled = false
const held = new Set<ServerResponse>()
const sockets = new Set<Socket>()

/** The chain's RPC, passed through until `stalled`; then `200, content-length: 1000` and silence. */
const proxy: Server = createServer((req, res) => {
  if (stalled) {
    req.resume()
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' })
    res.flushHeaders()
    held.add(res)
    return
  }
  const target = new URL(f.chain.rpcUrl)
  const upstream = httpRequest({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers }, (answer) => {
    res.writeHead(answer.statusCode!, answer.headers)
    answer.pipe(res)
  })
  upstream.on('error', () => res.destroy())
  req.pipe(upstream)
})
proxy.on('connection', (socket) => {
  sockets.add(socket)
  socket.on('close', () => sockets.delete(socket))
})
await new Promise<void>((done) => proxy.listen(0, '127.0.0.1', done))
const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`

const content: Server = createServer((req, res) => {
  req.resume()
  res.writeHead(200, { 'content-type': 'application/json' }).end('{"data":"paid"}')
})
await new Promise<void>((done) => content.listen(0, '127.0.0.1', done))

let gw: GatewayProcess
t.before(async () => {
  const withTimeouts = (text: string) => text.replaceAll(/^(\s+)receiptTimeoutMs: 20000$/gm, `$1receiptTimeoutMs: 20000\n$1rpcTimeoutMs: ${RPC_TIMEOUT_MS}`)
  const config = x402Config([{ id: 'payments', key: KEY, scopes: ['x402'], allocation: 1000 }], withTimeouts)
  t.match(config, /rpcTimeoutMs: 1500[\s\S]*rpcTimeoutMs: 1500/, 'both the facilitator and the paywall get the timeout')
  gw = await startGatewayProcess(config, {
    env: x402Env({ ...f.chain, rpcUrl: proxyUrl }, { MIRROR_TESTNET_URL: `http://127.0.0.1:${(content.address() as AddressInfo).port}` }),
  })
  stalled = true
})
t.teardown(async () => {
  await gw?.stop('SIGKILL')
  for (const socket of sockets) socket.destroy()
  await new Promise((done) => proxy.close(done))
  await new Promise((done) => content.close(done))
  await f.close()
})

/** One call that must be answered in time; `timedOut` when the gateway kept it past the bound. */
async function timed(url: string, options: { method?: 'GET' | 'POST'; body?: string; headers?: Record<string, string> } = {}) {
  const started = Date.now()
  try {
    const res = await request(url, { ...options, headersTimeout: ANSWER_WITHIN_MS, bodyTimeout: ANSWER_WITHIN_MS })
    const text = await res.body.text()
    return { status: res.statusCode, text, ms: Date.now() - started }
  } catch (error) {
    return { status: 0, text: String((error as NodeJS.ErrnoException).code ?? error), ms: Date.now() - started }
  }
}

const at = (endpoint: string) => `${gw.url}/x402/base/testnet/${KEY}/${endpoint}`

t.test('a 402 for a 14 KB path has a head a node:http client reads', async (t) => {
  const long = Array.from({ length: 1500 }, (_, i) => `seg${String(i).padStart(6, '0')}`).join('/')
  t.ok(long.length > 14000)
  const answer = await new Promise<{ status?: number; header?: string; error?: string }>((resolve) => {
    httpGet(`${gw.url}/paid/mirror/${long}`, (res) => {
      res.resume()
      res.on('end', () => resolve({ status: res.statusCode, header: res.headers['payment-required'] as string }))
    }).on('error', (error) => resolve({ error: (error as NodeJS.ErrnoException).code ?? error.message }))
  })
  t.equal(answer.status, 402, `answered: ${answer.error ?? answer.status}`)
  const required = JSON.parse(Buffer.from(answer.header ?? '', 'base64').toString('utf8'))
  t.equal(required.error, 'PAYMENT-SIGNATURE header is required')
  t.match(required.resource.url, /\/paid\/mirror\/seg000000\/seg000001\/.*\.\.\.$/, 'the path, cut and marked')
  t.ok(required.resource.url.length < 1100, `resource url of ${required.resource.url.length} characters`)
})

t.test('a verify body nested 5,000 deep is 400 invalid_json, not a blown stack', async (t) => {
  const deep = '['.repeat(5000) + ']'.repeat(5000)
  const res = await timed(at('verify'), { method: 'POST', body: `{"x402Version":2,"paymentPayload":${deep}}`, headers: { 'content-type': 'application/json' } })
  t.equal(res.status, 400, res.text)
  t.match(res.text, /more than 64 levels deep/)
})

t.test('health answers 503 within the RPC deadline', async (t) => {
  const res = await timed(at('health'))
  t.equal(res.status, 503, `answered (${res.text}) in ${res.ms} ms`)
  t.ok(res.ms >= RPC_TIMEOUT_MS - 100, 'after waiting for the chain as long as configured')
  t.ok(held.size > 0, 'the chain RPC really did stall after its head')
})

t.test('verify and settle answer 502 instead of hanging', async (t) => {
  const requirements = requirementsV2(f)
  for (const endpoint of ['verify', 'settle']) {
    const body = JSON.stringify(bodyV2(requirements, await signAuthorization(f)))
    const res = await timed(at(endpoint), { method: 'POST', body, headers: { 'content-type': 'application/json' } })
    t.equal(res.status, 502, `${endpoint}: ${res.text} in ${res.ms} ms`)
  }
})

t.test('the paywall answers instead of hanging', async (t) => {
  const signed = await signAuthorization(f)
  const payload = { x402Version: 2, resource: { url: `${gw.url}/paid/mirror/ok` }, accepted: requirementsV2(f), payload: signed }
  const res = await timed(`${gw.url}/paid/mirror/ok`, { headers: { 'payment-signature': Buffer.from(JSON.stringify(payload)).toString('base64') } })
  t.ok(res.status >= 500 && res.status < 600, `a failure of the chain, not a hang: ${res.status} ${res.text} in ${res.ms} ms`)
})
