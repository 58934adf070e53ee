/**
 * Failures after the head on a streamed route (issue 18, defect 3). The rule: a charge stands only
 * if the client received the complete answer the upstream meant to send. An upstream that resets,
 * stalls past its body timeout or ends short after the head leaves the client a cut answer, so its
 * reservation is refunded and the access line shows the failure. A client that leaves on its own
 * after the head keeps today's policy: the charge stands (the upstream did the work).
 */
import t from 'tap'
import { createServer, type Server, type Socket } from 'node:net'
import { request as httpRequest } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Pool } from 'undici'
import { hashCredential } from '../../core/projects/projects.ts'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'

const KEY = 'stream-key-0123456789abcdef'
const ADMIN_TOKEN = 'stream-admin-token-0123456789'
const FULL = 1000
const HEAD = `HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: ${FULL}\r\n\r\n`

/** A proof server that misbehaves on purpose, by path, speaking raw HTTP/1.1. */
function startFaultUpstream(): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>()
  const server: Server = createServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => {})
    let buffered = ''
    socket.on('data', (chunk) => {
      buffered += chunk.toString('latin1')
      const end = buffered.indexOf('\r\n\r\n')
      if (end === -1) return
      const path = buffered.slice(0, end).split(' ')[1]
      buffered = ''
      const half = Buffer.alloc(FULL / 2, 0x61)
      if (path === '/prove/ok') socket.write(HEAD + 'a'.repeat(FULL))
      else if (path === '/prove/reset') {
        socket.write(HEAD)
        socket.write(half, () => setTimeout(() => socket.resetAndDestroy(), 50))
      } else if (path === '/prove/short') {
        socket.write(HEAD)
        socket.end(half)
      } else if (path === '/prove/stall') socket.write(HEAD)
      else if (path === '/prove/slow') {
        socket.write(HEAD)
        socket.write(half)
        setTimeout(() => socket.writable && socket.write(half), 3000).unref()
      }
    })
  })
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        close: () => {
          for (const socket of sockets) socket.destroy()
          return new Promise((done) => server.close(() => done()))
        },
      }),
    ),
  )
}

const config = (upstream: string) => `version: 1
server: { listen: { host: 127.0.0.1, port: 0 } }
admin: { listen: { host: 127.0.0.1, port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
log: { level: info }
watch: false
projects:
  - id: streamer
    plan: enterprise
    scopes: [zkpaas]
    credits: { allocation: 1000, period: month }
    keys:
      - { label: default, hash: ${hashCredential(KEY)} }
upstreams:
  proof:
    url: ${upstream}
    timeouts: { bodyMs: 600 }
routes:
  - name: prove
    methods: [POST]
    path: /prove/:how/:apiKey
    rewrite: /prove/:how
    upstream: proof
    apiType: PRIVNET_ZKPAAS
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: zkpaas } }
      - { name: credit-meter, config: { apiType: PRIVNET_ZKPAAS, cost: 1 } }
`

let upstream: Awaited<ReturnType<typeof startFaultUpstream>>
let gw: GatewayProcess
t.before(async () => {
  upstream = await startFaultUpstream()
  gw = await startGatewayProcess(config(upstream.url))
})
t.teardown(async () => {
  if (gw?.child.exitCode !== null) t.comment(gw?.output.join('\n'))
  await gw?.stop('SIGKILL')
  await upstream?.close()
})

async function used(): Promise<number> {
  const pool = new Pool(gw.adminUrl)
  try {
    const res = await pool.request({ path: '/admin/projects/streamer/usage', method: 'GET', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    return ((await res.body.json()) as { balance: { used: number } }).balance.used
  } finally {
    await pool.close()
  }
}

interface Received {
  status?: number
  bytes: number
  error?: string
}

/** A node:http client: what status and how many body bytes arrived, and how it ended. */
function prove(how: string, options: { leaveAfterBytes?: number } = {}): Promise<Received> {
  return new Promise((resolve) => {
    const got: Received = { bytes: 0 }
    const req = httpRequest(`${gw.url}/prove/${how}/${KEY}`, { method: 'POST', headers: { 'content-type': 'application/octet-stream', 'x-request-id': `prove-${how}` } })
    req.on('response', (res) => {
      got.status = res.statusCode
      res.on('data', (chunk: Buffer) => {
        got.bytes += chunk.length
        if (options.leaveAfterBytes !== undefined && got.bytes >= options.leaveAfterBytes) req.destroy()
      })
      res.on('end', () => resolve(got))
      res.on('error', (error) => ((got.error = (error as NodeJS.ErrnoException).code ?? error.message), resolve(got)))
      res.on('close', () => resolve(got))
    })
    req.on('error', (error) => ((got.error = (error as NodeJS.ErrnoException).code ?? error.message), resolve(got)))
    req.end('proof')
  })
}

const accessLine = (id: string) => gw.waitFor(new RegExp(`"reqId":"${id}".*"status"`), 5000).then((line) => JSON.parse(line))

t.test('a complete answer is charged', async (t) => {
  const before = await used()
  const got = await prove('ok')
  t.same(got, { status: 200, bytes: FULL })
  t.equal(await used(), before + 1)
})

for (const [how, status, code] of [
  ['reset', 502, 'upstream_unavailable'],
  ['short', 502, 'upstream_unavailable'],
  ['stall', 504, 'upstream_timeout'],
] as const) {
  t.test(`upstream ${how} after the head: the client gets a cut answer, the credit comes back`, async (t) => {
    const before = await used()
    const got = await prove(how)
    t.ok(got.bytes < FULL, `the client did not get the whole answer (${got.bytes} bytes, ${got.error ?? 'no error'})`)
    t.ok(got.error !== undefined || got.status === undefined, 'and its client notices')
    const line = await accessLine(`prove-${how}`)
    t.match(line, { status, error: code, truncated: true, sentStatus: 200, level: 'error' }, 'the access line shows the failure')
    t.type(line.cause, 'string', `and its cause: ${line.cause}`)
    t.equal(await used(), before, 'nothing charged')
  })
}

t.test('a client that leaves after the head is charged, as before', async (t) => {
  const before = await used()
  const got = await prove('slow', { leaveAfterBytes: 1 })
  t.equal(got.status, 200)
  t.ok(got.bytes < FULL)
  const line = await accessLine('prove-slow')
  t.match(line, { status: 200, aborted: true })
  t.notOk(line.truncated, 'not an upstream failure')
  t.equal(await used(), before + 1, 'the service did its work; the client chose to leave')
})
