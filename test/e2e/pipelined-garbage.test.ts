/**
 * A pipelined request followed by bytes the HTTP parser refuses (issue 18, defect 2). The parser's
 * refusal used to end the socket at once, while the earlier request was still being answered: the
 * item was stored and the credit charged, but the client only ever read `400 malformed HTTP
 * request`. Answers already under way are now finished, in order, before the 400 closes the
 * connection, so every charge stands for an answer the client received.
 */
import t from 'tap'
import { connect } from 'node:net'
import { Pool } from 'undici'
import { hashCredential } from '../../core/projects/projects.ts'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream, type TestUpstream } from '../helpers/upstream.ts'

const KEY = 'pipe-key-0123456789abcdef'
const ADMIN_TOKEN = 'pipe-admin-token-0123456789'

const config = (upstreamUrl: string) => `version: 1
server: { listen: { host: 127.0.0.1, port: 0 } }
admin: { listen: { host: 127.0.0.1, port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
log: { level: info }
watch: false
projects:
  - id: piper
    scopes: [events, rpc]
    credits: { allocation: 100, period: month }
    keys:
      - { label: default, hash: ${hashCredential(KEY)} }
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
  - name: proxied
    path: /rpc/:apiKey/*rest
    rewrite: /*rest
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: rpc } }
      - { name: credit-meter, config: { apiType: PRIVNET_RPC, cost: 1 } }
upstreams:
  echo: { url: '${upstreamUrl}' }
`

let gw: GatewayProcess
let up: TestUpstream
t.before(async () => {
  up = await startTestUpstream()
  gw = await startGatewayProcess(config(up.url))
})
t.teardown(async () => {
  await gw?.stop('SIGKILL')
  await up?.close()
})

async function used(): Promise<number> {
  const pool = new Pool(gw.adminUrl)
  try {
    const res = await pool.request({ path: '/admin/projects/piper/usage', method: 'GET', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    return ((await res.body.json()) as { balance: { used: number } }).balance.used
  } finally {
    await pool.close()
  }
}

/** Writes `bytes` in one segment and reads until the gateway closes the connection. */
function exchange(bytes: string, options: { halfClose?: boolean } = {}): Promise<string> {
  const { port } = new URL(gw.url)
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1')
    let text = ''
    socket.setTimeout(10000, () => socket.destroy(new Error(`no close within 10 s; read so far:\n${text}`)))
    // halfClose: FIN right after the bytes, still reading (as `nc -q` or a pipelining client does).
    socket.on('connect', () => (options.halfClose ? socket.end(bytes) : socket.write(bytes)))
    socket.on('data', (chunk) => (text += chunk.toString('latin1')))
    socket.on('error', reject)
    socket.on('close', () => resolve(text))
  })
}

function createRequest(itemId: string): string {
  const body = JSON.stringify({ scoutSettings: { item_id: itemId, network_id: 296 } })
  return `POST /events/ledger/create/contract/${KEY} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
}

t.test('answers under way are sent before the 400 that closes the connection', async (t) => {
  const before = await used()
  const text = await exchange(createRequest('0.0.7001') + 'GARBAGE\r\n\r\n')
  const heads = [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]))
  t.same(heads, [200, 400], 'the created item, then the refusal')
  t.match(text, /"item_id":"0\.0\.7001"/, 'the client received its item')
  t.equal(await used(), before + 1, 'one credit, for the answer the client received')
})

t.test('several pipelined answers all arrive, in order, before the 400', async (t) => {
  const before = await used()
  const text = await exchange(createRequest('0.0.7101') + createRequest('0.0.7102') + createRequest('0.0.7103') + 'GARBAGE\r\n\r\n')
  const heads = [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]))
  t.same(heads, [200, 200, 200, 400])
  const ids = [...text.matchAll(/"item_id":"(0\.0\.71\d\d)"/g)].map((m) => m[1])
  t.same(ids, ['0.0.7101', '0.0.7102', '0.0.7103'])
  t.equal(await used(), before + 3)
})

t.test('a request the bad bytes interrupt is not waited for: 400 at once, nothing charged', async (t) => {
  const before = await used()
  const head = `POST /events/ledger/create/contract/${KEY} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n`
  const text = await exchange(createRequest('0.0.7201') + head + '5\r\n{"sco\r\nZZZ\r\n\r\n')
  const heads = [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]))
  t.same(heads, [200, 400], 'the whole request is answered, the broken one is refused')
  t.equal(await used(), before + 1, 'only the answered request is charged')
})

t.test('garbage alone is still refused at once', async (t) => {
  const text = await exchange(`GARBAGE /events/ledger/create/contract/${KEY}\r\n\r\n`)
  t.match(text, /^HTTP\/1\.1 400 /)
  t.match(text, /"code":"bad_request"/)
})
