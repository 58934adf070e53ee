/**
 * Slow clients and what the access log shows of every request (issue 18).
 *
 * - A body that trickles in may not hold a socket for the whole `requestTimeoutMs` (300 s): a
 *   route whose body cap is small gets `server.limits.bodyTimeoutMs`, read by the core or streamed
 *   to the upstream alike; past it 408 `request_timeout`, nothing charged, connection closed.
 * - Requests the HTTP parser refuses (400, 431, and 408 for a head not received in time) get an
 *   access line, without anything of the path.
 * - Access lines carry the client IP and a bounded user agent; 4xx log at warn, 5xx at error.
 */
import t from 'tap'
import { connect } from 'node:net'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Pool, request } from 'undici'
import { hashCredential } from '../../core/projects/projects.ts'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'

const KEY = 'limits-key-0123456789abcdef'
const ADMIN_TOKEN = 'limits-admin-token-0123456789'
const BODY_TIMEOUT_MS = 700

let upstream: Server
let gw: GatewayProcess

t.before(async () => {
  // An echo upstream: answers once the whole body arrived, with its size.
  upstream = createServer((req, res) => {
    let size = 0
    req.on('data', (chunk: Buffer) => (size += chunk.length))
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ size })))
  })
  await new Promise<void>((done) => upstream.listen(0, '127.0.0.1', done))
  const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`
  gw = await startGatewayProcess(`version: 1
server:
  listen: { host: 127.0.0.1, port: 0 }
  limits: { bodyTimeoutMs: ${BODY_TIMEOUT_MS}, smallBodyBytes: 65536, maxHeaderBytes: 4096 }
admin: { listen: { host: 127.0.0.1, port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
log: { level: info }
watch: false
projects:
  - id: limited
    scopes: [events]
    credits: { allocation: 100, period: month }
    keys:
      - { label: default, hash: ${hashCredential(KEY)} }
upstreams:
  echo: { url: ${upstreamUrl} }
routes:
  - name: events-create
    methods: [POST]
    path: /events/ledger/create/:item/:apiKey
    apiType: EVENTS
    maxBodyBytes: 4096
    handler: { name: events, config: { operation: create } }
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: events } }
      - { name: credit-meter, config: { apiType: EVENTS, cost: 1 } }
  - name: small-stream
    methods: [POST]
    path: /small/:apiKey
    rewrite: /small
    upstream: echo
    apiType: EVENTS
    maxBodyBytes: 4096
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: events } }
      - { name: credit-meter, config: { apiType: EVENTS, cost: 1 } }
  - name: big-stream
    methods: [POST]
    path: /big/:apiKey
    rewrite: /big
    upstream: echo
    apiType: EVENTS
    maxBodyBytes: 10485760
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: events } }
`)
})
t.teardown(async () => {
  await gw?.stop('SIGKILL')
  await new Promise((done) => upstream.close(done))
})

async function used(): Promise<number> {
  const pool = new Pool(gw.adminUrl)
  try {
    const res = await pool.request({ path: '/admin/projects/limited/usage', method: 'GET', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    return ((await res.body.json()) as { balance: { used: number } }).balance.used
  } finally {
    await pool.close()
  }
}

/** Sends a head announcing `length` body bytes, then `sent` of them in pieces every `everyMs`; reads until close. */
function trickle(path: string, length: number, pieces: number, everyMs: number): Promise<{ text: string; ms: number }> {
  const { port } = new URL(gw.url)
  const started = Date.now()
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1')
    let text = ''
    let timer: NodeJS.Timeout | undefined
    socket.setTimeout(15000, () => socket.destroy(new Error(`no close within 15 s; read:\n${text}`)))
    socket.on('connect', () => {
      socket.write(`POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\nconnection: close\r\n\r\n`)
      let sent = 0
      const piece = Math.ceil(length / pieces)
      timer = setInterval(() => {
        if (sent >= length || socket.destroyed) return clearInterval(timer)
        const n = Math.min(piece, length - sent)
        socket.write(' '.repeat(n))
        sent += n
      }, everyMs)
    })
    socket.on('data', (chunk) => (text += chunk.toString('latin1')))
    socket.on('error', (error) => (clearInterval(timer), reject(error)))
    socket.on('close', () => (clearInterval(timer), resolve({ text, ms: Date.now() - started })))
  })
}

t.test('a trickled body on a small-body route answers 408 at bodyTimeoutMs and is not charged', async (t) => {
  const before = await used()
  for (const path of [`/events/ledger/create/contract/${KEY}`, `/small/${KEY}`]) {
    const { text, ms } = await trickle(path, 1000, 100, 100)
    t.match(text, /^HTTP\/1\.1 408 /, `${path.replace(KEY, '***')}: 408`)
    t.match(text, /"code":"request_timeout"/)
    t.match(text, /connection: close/i)
    t.ok(ms >= BODY_TIMEOUT_MS - 50 && ms < BODY_TIMEOUT_MS + 3000, `closed after ${ms} ms`)
  }
  t.equal(await used(), before, 'nothing charged')
})

t.test('a body that arrives in time, and a large-body route, are not cut', async (t) => {
  const small = await trickle(`/small/${KEY}`, 100, 4, 50)
  t.match(small.text, /^HTTP\/1\.1 200 /)
  t.match(small.text, /\{"size":100\}/)
  const big = await trickle(`/big/${KEY}`, 200, 10, 150)
  t.match(big.text, /^HTTP\/1\.1 200 /, 'a route with a large body cap keeps the whole-request timeout')
  t.match(big.text, /\{"size":200\}/)
  t.ok(big.ms > BODY_TIMEOUT_MS, `took ${big.ms} ms`)
})

function send(raw: string): Promise<string> {
  const { port } = new URL(gw.url)
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1')
    let text = ''
    socket.on('connect', () => socket.write(raw))
    socket.on('data', (chunk) => (text += chunk.toString('latin1')))
    socket.on('error', reject)
    socket.on('close', () => resolve(text))
  })
}

t.test('requests the parser refuses get an access line, without the key', async (t) => {
  const seen = gw.output.length
  t.match(await send(`GARBAGE /events/ledger/create/contract/${KEY}\r\n\r\n`), /^HTTP\/1\.1 400 /)
  t.match(await send(`GET /events/ledger/create/contract/${KEY} HTTP/1.1\r\nhost: x\r\nx-big: ${'a'.repeat(8000)}\r\n\r\n`), /^HTTP\/1\.1 431 /)
  const bad = JSON.parse(await gw.waitFor(/"status":400.*"error":"bad_request"/))
  t.match(bad, { level: 'warn', status: 400, path: '-', ip: '127.0.0.1', error: 'bad_request', parserError: /^HPE_/ })
  const big = JSON.parse(await gw.waitFor(/"status":431/))
  t.match(big, { level: 'warn', status: 431, path: '-', error: 'headers_too_large', parserError: 'HPE_HEADER_OVERFLOW' })
  t.notOk(gw.output.slice(seen).some((line) => line.includes(KEY)), 'the key is in no line')
})

t.test('a request head not received in time is answered 408 and gets an access line, without the key', async (t) => {
  // The smallest timeouts the config allows (1 ms; 0 would mean no limit), on a gateway of its own so
  // no other test's requests are cut. Node checks the deadlines every second
  // (connectionsCheckingInterval), so the refusal comes within about a second of the partial head.
  const slow = await startGatewayProcess(
    `version: 1
server:
  listen: { host: 127.0.0.1, port: 0 }
  limits: { headersTimeoutMs: 1, requestTimeoutMs: 1 }
admin: { listen: { host: 127.0.0.1, port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
log: { level: info }
watch: false
projects:
  - id: limited
    scopes: [events]
    keys:
      - { label: default, hash: ${hashCredential(KEY)} }
routes:
  - name: events-create
    methods: [POST]
    path: /events/ledger/create/:item/:apiKey
    apiType: EVENTS
    handler: { name: events, config: { operation: create } }
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: events } }
`,
    { startTimeoutMs: 90_000 },
  )
  t.teardown(() => slow.stop('SIGKILL'))
  const seen = slow.output.length
  const started = Date.now()
  // A head cut short after its first header line, the key in the path and in a header; then silence.
  const text = await new Promise<string>((resolve, reject) => {
    const socket = connect(Number(new URL(slow.url).port), '127.0.0.1')
    let read = ''
    socket.setTimeout(15000, () => socket.destroy(new Error(`no close within 15 s; read:\n${read}`)))
    socket.on('connect', () => socket.write(`POST /events/ledger/create/contract/${KEY} HTTP/1.1\r\nhost: 127.0.0.1\r\nx-api-key: ${KEY}\r\n`))
    socket.on('data', (chunk) => (read += chunk.toString('latin1')))
    socket.on('error', reject)
    socket.on('close', () => resolve(read))
  })
  const ms = Date.now() - started
  t.match(text, /^HTTP\/1\.1 408 /, 'answered 408')
  t.match(text, /"code":"request_timeout"/)
  t.match(text, /connection: close/i)
  t.ok(ms < 5000, `closed after ${ms} ms`)
  const line = JSON.parse(await slow.waitFor(/"status":408/))
  t.match(line, { level: 'warn', route: '-', method: '-', status: 408, path: '-', ip: '127.0.0.1', error: 'request_timeout', parserError: 'ERR_HTTP_REQUEST_TIMEOUT' })
  t.notOk(slow.output.slice(seen).some((output) => output.includes(KEY)), 'the key is in no line')
  t.notOk(text.includes(KEY), 'nor in the answer')
})

t.test('access lines: client ip, bounded user agent, level by status', async (t) => {
  const longAgent = 'agent/' + 'x'.repeat(2000)
  const ok = await request(`${gw.url}/small/${KEY}`, { method: 'POST', body: '{}', headers: { 'user-agent': longAgent, 'x-request-id': 'lines-ok', 'content-type': 'application/json' } })
  await ok.body.text()
  const missing = await request(`${gw.url}/nowhere`, { headers: { 'user-agent': 'probe/1.0', 'x-request-id': 'lines-404' } })
  await missing.body.text()
  const okLine = JSON.parse(await gw.waitFor(/"reqId":"lines-ok"/))
  t.match(okLine, { level: 'info', status: 200, ip: '127.0.0.1', path: '/small/***' })
  t.ok(okLine.userAgent.startsWith('agent/xxx') && okLine.userAgent.length <= 257, `user agent cut to ${okLine.userAgent.length} characters`)
  t.match(JSON.parse(await gw.waitFor(/"reqId":"lines-404"/)), { level: 'warn', status: 404, userAgent: 'probe/1.0', ip: '127.0.0.1' })
})
