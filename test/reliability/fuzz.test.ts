/**
 * Generative fuzzing (fast-check) of paths, headers, bodies and raw-socket framing across every
 * route family, against a real gateway in front of healthy stand-ins. With no upstream fault, any
 * 5xx is one the gateway made itself for a client's mistake, so the rule is: never a 5xx, never a
 * crash, never a hang; and a request is charged only when it was answered with a 2xx.
 * Credentials never appear in logs, metrics or upstream requests; only the admin token opens /admin.
 */
import t from 'tap'
import fc from 'fast-check'
import { randomBytes } from 'node:crypto'
import { Agent, request } from 'undici'
import { buildProvePayload } from '../../examples/upstreams/tagged.ts'
import { startGatewayProcess } from '../helpers/gateway-process.ts'
import { ADMIN_TOKEN, CREDENTIALS, KEY, SECRET, startUpstreams, suiteConfig, suiteEnv } from './harness/environment.ts'
import { call, inBatches, type Outcome } from './harness/client.ts'
import { creditsUsed, settledCreditsUsed } from './harness/admin.ts'
import { rawExchange } from './harness/raw-http.ts'
import { FILE_TIMEOUT_MS, scale, START_TIMEOUT_MS } from './harness/scale.ts'

t.setTimeout(FILE_TIMEOUT_MS)

const SEED = Number(process.env.RELIABILITY_SEED ?? Date.now() % 2 ** 31)
const DEADLINE_MS = 10000
const FRAMING_DEADLINE_MS = 20000
const PROVE = buildProvePayload(Buffer.from('fuzz'))

// ---- generators -------------------------------------------------------------------------------

const keyish = fc.constantFrom(KEY, KEY, KEY, `tk_${'0'.repeat(20)}`, '', encodeURIComponent(KEY).replace('_', '%5F'), KEY.toUpperCase())
const segmentToken = fc.constantFrom('a', 'Z', '0', '9', '-', '_', '.', '..', '%2F', '%2f', '%5C', '%00', '%zz', '%', '%25', '~', '!', '$', '&', "'", '(', ')', '*', '+', ',', ';', '=', ':', '@', '%E2%82%AC', '%FF', '//', 'prove', 'api', 'v1')
const segment = fc.array(segmentToken, { minLength: 0, maxLength: 6 }).map((parts) => parts.join(''))
const queryPart = fc.tuple(fc.constantFrom('limit', 'order', 'account.id', 'account.balance', 'method', 'params', 'id', 'tee_enabled', 'timestamp', 'x', ''), segment).map(([k, v]) => `${k}=${v}`)

const family = fc.tuple(keyish, fc.constantFrom(
  (k: string) => `/privnet/zkpaas/${k}/prove`,
  (k: string) => `/privnet/zkpaas/${k}/prove-batch`,
  (k: string) => `/privnet/zkpaas/${k}/health`,
  (k: string) => `/privnet/rpc/${k}`,
  (k: string) => `/events/ledger/create/account/${k}`,
  (k: string) => `/events/ledger/create/ethtopic/${k}`,
  (k: string) => `/events/ledger/settings/${k}`,
  () => '/ledger/testnet/api/v1/accounts',
  () => '/ledger/testnet/api/v1/accounts/0.0.1001',
  () => '/ledger/testnet/api/v1/transactions',
  (k: string) => `/x402/base/testnet/${k}/verify`,
  (k: string) => `/x402/base/testnet/${k}/settle`,
  (k: string) => `/x402/base/testnet/${k}/supported`,
  (k: string) => `/x402/solana/mainnet/${k}/health`,
  () => '/',
)).map(([k, make]) => make(k))

const path = fc
  .tuple(family, fc.constantFrom('keep', 'keep', 'append', 'replace', 'double-slash', 'dot'), segment, fc.array(queryPart, { maxLength: 4 }))
  .map(([base, how, seg, query]) => {
    let p = base
    if (how === 'append') p = `${base}/${seg}`
    if (how === 'replace') p = base.split('/').map((s, i, all) => (i === all.length - 1 ? seg : s)).join('/') || '/'
    if (how === 'double-slash') p = base.replace('/', '//')
    if (how === 'dot') p = base.replace(/\/([^/]*)$/, '/./$1')
    if (!p.startsWith('/')) p = `/${p}`
    return query.length ? `${p}?${query.join('&')}` : p
  })

const printable = fc.string({ unit: fc.constantFrom(...'abcXYZ019 -_.:;,/=+*"\'()[]{}<>?@!#$%^&~|\\'.split('')), maxLength: 40 })
const headerName = fc.string({ unit: fc.constantFrom(...'abcdefxyz-_019'.split('')), minLength: 1, maxLength: 16 }).filter((n) => /^[a-z0-9]/.test(n))
const headers = fc
  .record(
    {
      'content-type': fc.constantFrom('application/json', 'application/octet-stream', 'text/plain', 'application/json; charset=utf-8', 'multipart/form-data; boundary=x', 'application/x-www-form-urlencoded', 'application/jsonx', ''),
      'x-api-key': fc.oneof(fc.constant(KEY), printable),
      'x-api-secret': fc.oneof(fc.constant(SECRET), printable),
      sponsored: fc.constantFrom('true', '1', 'false', '0', 'yes', '', 'TRUE'),
      accept: fc.constantFrom('*/*', 'application/json', 'text/html', ''),
      'content-encoding': fc.constantFrom('gzip', 'br', 'identity', 'x'),
      'x-forwarded-for': printable,
      'payment-signature': printable,
      authorization: printable,
    },
    { requiredKeys: [] },
  )
  .chain((base) => fc.dictionary(headerName, printable, { maxKeys: 4 }).map((extra) => ({ ...extra, ...base })))

const jsonRpcCall = fc.record({
  jsonrpc: fc.constantFrom('2.0', '2.0', '1.0', 2, null),
  id: fc.oneof(fc.integer(), fc.string({ maxLength: 8 }), fc.constant(null), fc.jsonValue({ maxDepth: 2 })),
  method: fc.oneof(fc.constantFrom('system_chain', 'chain_getHeader', 'chain_getBlockHash', 'privnet_chainInfo', 'privnet_ledgerVersion', 'rpc_methods', 'author_submit'), fc.string({ maxLength: 12 })),
  params: fc.oneof(fc.constant([]), fc.jsonValue({ maxDepth: 4 })),
}, { requiredKeys: ['method'] })

/** `depth` levels of arrays or objects around a value, e.g. deep JSON-RPC params. */
function nested(depth: number, kind: 'array' | 'object'): string {
  return kind === 'array' ? '['.repeat(depth) + '1' + ']'.repeat(depth) : '{"a":'.repeat(depth) + '1' + '}'.repeat(depth)
}

const body: fc.Arbitrary<string | Buffer | undefined> = fc.oneof(
  fc.constant(undefined),
  fc.uint8Array({ maxLength: 2048 }).map((b) => Buffer.from(b)),
  fc.jsonValue({ maxDepth: 5 }).map((v) => JSON.stringify(v)),
  jsonRpcCall.map((c) => JSON.stringify(c)),
  fc.array(jsonRpcCall, { maxLength: 120 }).map((c) => JSON.stringify(c)),
  fc.tuple(fc.integer({ min: 100, max: 60000 }), fc.constantFrom('array', 'object') as fc.Arbitrary<'array' | 'object'>, fc.constantFrom('params', 'id', 'whole'))
    .map(([depth, kind, where]) => where === 'whole' ? nested(depth, kind) : where === 'id'
      ? `{"jsonrpc":"2.0","id":${nested(depth, kind)},"method":"system_chain","params":[]}`
      : `{"jsonrpc":"2.0","id":1,"method":"chain_getBlockHash","params":${nested(depth, kind)}}`),
  fc.array(fc.record({ endpoint: fc.constantFrom('prove', 'check', 'prove-tx', 'x'), payload: fc.oneof(fc.constant(PROVE.toString('base64')), fc.base64String({ maxLength: 64 }), fc.jsonValue({ maxDepth: 2 })) }, { requiredKeys: [] }), { maxLength: 25 })
    .map((proofs) => JSON.stringify({ proofs })),
  fc.record({ scoutSettings: fc.record({ item_id: fc.oneof(fc.constant('0.0.5802863'), fc.constant(`0x${'ab'.repeat(32)}`), fc.jsonValue({ maxDepth: 1 })), network_id: fc.oneof(fc.constantFrom(295, 296), fc.jsonValue({ maxDepth: 1 })) }, { requiredKeys: [] }) }, { requiredKeys: [] })
    .map((v) => JSON.stringify(v)),
  fc.record({ x402Version: fc.constantFrom(1, 2, 3, '2'), paymentPayload: fc.jsonValue({ maxDepth: 3 }), paymentRequirements: fc.jsonValue({ maxDepth: 3 }) }, { requiredKeys: [] })
    .map((v) => JSON.stringify(v)),
  fc.uint8Array({ maxLength: 64 }).map((tail) => Buffer.concat([PROVE, Buffer.from(tail)])),
  fc.constant(Buffer.alloc(1_200_000, 0x61)),
)

/** JSON bodies aimed at the routes that parse them, so deep or odd JSON reaches each parser often. */
const jsonRoute = fc.constantFrom(`/privnet/rpc/${KEY}`, `/privnet/zkpaas/${KEY}/prove-batch`, `/events/ledger/create/account/${KEY}`, `/events/ledger/settings/${KEY}`, `/x402/base/testnet/${KEY}/verify`)
const deepJson = fc.tuple(fc.integer({ min: 2, max: 100_000 }), fc.constantFrom('array', 'object') as fc.Arbitrary<'array' | 'object'>, fc.constantFrom('params', 'id', 'whole', 'batch', 'proofs', 'scout', 'x402'))
  .map(([depth, kind, where]) => {
    const deep = nested(depth, kind)
    switch (where) {
      case 'params': return `{"jsonrpc":"2.0","id":1,"method":"chain_getBlockHash","params":${deep}}`
      case 'id': return `{"jsonrpc":"2.0","id":${deep},"method":"system_chain","params":[]}`
      case 'batch': return `[{"jsonrpc":"2.0","id":1,"method":"system_chain","params":[${deep}]}]`
      case 'proofs': return `{"proofs":[{"endpoint":"prove","payload":${deep}}]}`
      case 'scout': return `{"scoutSettings":{"item_id":${deep},"network_id":296}}`
      case 'x402': return `{"x402Version":2,"paymentPayload":${deep},"paymentRequirements":{}}`
      default: return deep
    }
  })
const jsonBody = fc.oneof(deepJson, body.filter((b): b is string => typeof b === 'string'))

const method = fc.constantFrom('GET', 'GET', 'POST', 'POST', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD', 'PROPFIND')

// ---- raw framing ------------------------------------------------------------------------------

/** One charged request: every 2xx answer to it costs exactly one credit. */
const chargedRequest = `GET /privnet/rpc/{{KEY}}?method=system_chain&params=%5B%5D&id=1 HTTP/1.1\r\nhost: x\r\n\r\n`
const framingPiece = fc.oneof(
  { weight: 4, arbitrary: fc.constant(chargedRequest) },
  fc.constant(`POST /privnet/rpc/{{KEY}} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 58\r\n\r\n{"jsonrpc":"2.0","id":1,"method":"system_chain","params":[]}`),
  fc.constant(`POST /privnet/rpc/{{KEY}} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n3a\r\n{"jsonrpc":"2.0","id":1,"method":"system_chain","params":[]}\r\n0\r\n\r\n`),
  fc.constant(`POST /privnet/rpc/{{KEY}} HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n`),
  fc.constant(`POST /privnet/rpc/{{KEY}} HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\nhello!`),
  fc.constant(`POST /privnet/rpc/{{KEY}} HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n`),
  fc.constant(`GET /privnet/rpc/{{KEY}}?method=system_chain HTTP/1.1\r\nhost: x\r\nbad header line\r\n\r\n`),
  fc.constant(`GET /privnet/rpc/{{KEY}}?method=system_chain HTTP/1.1\nhost: x\n\n`),
  fc.constant(`GET /ledger/testnet/api/v1/accounts HTTP/1.1\r\nhost: x\r\nx-api-key: {{KEY}}\r\nx-big: ${'a'.repeat(20000)}\r\n\r\n`),
  fc.constant('GET / HTTP/9.9\r\n\r\n'),
  fc.constant(`GET /privnet/rpc/{{KEY}}?method=system_chain&params=%5B%5D&id=1 HTTP/1.0\r\n\r\n`),
  fc.uint8Array({ minLength: 1, maxLength: 200 }).map((b) => Buffer.from(b).toString('latin1')),
  printable.map((s) => `${s}\r\n\r\n`),
)
const framing = fc.tuple(fc.array(framingPiece, { minLength: 1, maxLength: 5 }), fc.array(fc.nat(), { maxLength: 3 }), fc.constantFrom(0, 0, 5), fc.boolean())
/** Raw exchanges run in lanes, each on a project of its own, so each lane reads its own ledger. */
const LANES = Array.from({ length: 8 }, (_, i) => ({ id: `lane${i}`, key: `lk_${i}_${randomBytes(12).toString('hex')}` }))

/**
 * 501 network_not_configured is the documented answer for a chain this gateway does not serve
 * (only base/testnet is configured here); HEAD answers carry no body, so the path decides.
 */
function unconfiguredNetwork(path: string): boolean {
  const match = /^\/x402\/([^/]+)\/([^/?]+)\//.exec(path.replace(/\/+/g, '/'))
  return !!match && `${match[1]}/${match[2]}` !== 'base/testnet'
}

/**
 * Sent last on connections the client keeps open: answered in order after everything before it
 * (or never, when the gateway closed the connection), so its answer or the close marks the end.
 */
const SENTINEL = 'GET /reliability-sentinel HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n'

// ---- the test ---------------------------------------------------------------------------------

t.test('fuzzing every route family: no crash, no self-made 5xx, no hang, no charge without a 2xx, no leak', async (t) => {
  t.comment(`seed ${SEED} (RELIABILITY_SEED=${SEED} repeats this run)`)
  const up = await startUpstreams({ chain: true })
  const gw = await startGatewayProcess(suiteConfig(up, { access: true, extraProjects: LANES.map((l) => ({ ...l, allocation: 1_000_000 })) }), { env: suiteEnv(up), startTimeoutMs: START_TIMEOUT_MS })
  const dispatcher = new Agent({ connections: 8 })
  t.teardown(async () => {
    await dispatcher.close()
    await gw.stop()
    await up.close()
  })

  const problems = new Map<string, { count: number; example: string }>()
  const note = (kind: string, example: string) => {
    const entry = problems.get(kind) ?? { count: 0, example }
    entry.count++
    problems.set(kind, entry)
  }
  const statuses = new Map<number, number>()
  let sent = 0

  // 1. Requests a client library can produce: method, path, headers, body.
  const requests = fc.sample(fc.tuple(method, path, headers, body), { numRuns: scale.fuzzRuns * 3, seed: SEED })
  await inBatches(requests.map(([m, p, h, b]) => async () => {
    const withBody = m !== 'GET' && m !== 'HEAD' ? b : undefined
    let o: Outcome
    try {
      o = await call(gw.url, p, { method: m, headers: h, body: withBody, deadlineMs: DEADLINE_MS, dispatcher })
    } catch {
      return // refused by the client library before sending
    }
    if (o.error === 'UND_ERR_INVALID_ARG' || o.error === 'InvalidArgumentError') return
    sent++
    statuses.set(o.status, (statuses.get(o.status) ?? 0) + 1)
    const what = `${m} ${p.slice(0, 120)} body ${withBody === undefined ? 'none' : `${withBody.length}B ${withBody.toString().slice(0, 60)}`}`
    if (o.hung) note('hang', what)
    // 501 network_not_configured is the documented answer for a chain this gateway does not serve.
    else if (o.status >= 500 && !(o.status === 501 && unconfiguredNetwork(p))) note(`self-made ${o.status}`, `${what} → ${o.body.slice(0, 160)}`)
    else if (!o.complete && o.status !== 0) note('answer cut', `${what} → ${o.status} ${o.error}`)
  }), 8)

  // 1b. JSON bodies, deep nesting included, on the routes that parse JSON.
  const jsonRequests = fc.sample(fc.tuple(jsonRoute, jsonBody, fc.constantFrom('application/json', 'application/json; charset=utf-8')), { numRuns: scale.fuzzRuns, seed: SEED + 4 })
  await inBatches(jsonRequests.map(([p, b, type]) => async () => {
    const o = await call(gw.url, p, { method: 'POST', headers: { 'content-type': type, 'x-api-secret': SECRET }, body: b, deadlineMs: DEADLINE_MS, dispatcher })
    sent++
    statuses.set(o.status, (statuses.get(o.status) ?? 0) + 1)
    const what = `POST ${p.replace(KEY, '<key>')} body ${b.length}B ${b.slice(0, 80)}`
    if (o.hung) note('hang (JSON)', what)
    else if (o.status >= 500) note(`self-made ${o.status} (JSON)`, `${what} → ${o.body.slice(0, 160)}`)
  }), 8)

  // 2. Raw framing: pipelined requests, garbage, conflicting lengths, bad chunks, split writes.
  const exchanges = fc.sample(framing, { numRuns: scale.fuzzRuns, seed: SEED + 1 })
  let framingAnswers = 0
  let next = 0
  await Promise.all(LANES.map(async (lane) => {
    while (next < exchanges.length) {
      const [pieces, cuts, gapMs, halfClose] = exchanges[next++]
      const bytes = Buffer.from(pieces.join('').replaceAll('{{KEY}}', lane.key) + (halfClose ? '' : SENTINEL), 'latin1')
      const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b)
      const parts = [0, ...points].map((start, i, all) => bytes.subarray(start, all[i + 1] ?? bytes.length)).filter((p) => p.length)
      const before = await creditsUsed(gw.adminUrl, lane.id)
      // Half-closed: the client sent FIN after its bytes. Open: the socket stays up until the gateway
      // answers the sentinel or closes. The deadline is past the gateway's own headers timeout (10 s).
      const exchange = await rawExchange(gw.url, parts, { gapMs, deadlineMs: FRAMING_DEADLINE_MS, end: halfClose })
      sent++
      const delta = (await settledCreditsUsed(gw.adminUrl, lane.id)) - before
      const served = exchange.responses.filter((r) => r.status >= 200 && r.status < 300 && r.complete).length
      framingAnswers += exchange.responses.length
      const what = `${halfClose ? 'half-closed' : 'open'} ${JSON.stringify(pieces.map((p) => p.slice(0, 70)))} cut at ${points}`
      for (const r of exchange.responses) {
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1)
        if (r.status >= 500) note(`self-made ${r.status} (framing)`, `${what} → ${r.body.toString().slice(0, 120)}`)
      }
      if (exchange.timedOut) note('hang (framing)', what)
      // A client that half-closes has left, as far as HTTP/1.1 servers tell (node, like nginx, takes
      // the FIN for a client gone and aborts what it has not answered): by the refund rule
      // (ARCHITECTURE.md, "The credit ledger") work done for a client that left stays charged. So a
      // half-closed exchange may be charged for its unanswered requests, never for more requests
      // than it sent, and never less than what it received. With the connection open the ledger
      // follows the answers exactly.
      if (halfClose ? delta < served || delta > pieces.length : delta !== served)
        note(`charged without a 2xx answer (framing, ${halfClose ? 'client half-closed' : 'connection open'})`, `${what}: ledger +${delta}, ${served} complete 2xx answer(s)`)
    }
  }))

  // 3. The admin API: only the right token gets in.
  const tokens = fc.sample(fc.oneof(printable, fc.constant(ADMIN_TOKEN.slice(0, -1)), fc.constant(ADMIN_TOKEN + 'x'), fc.constant(ADMIN_TOKEN.toUpperCase()), fc.constant(KEY)), { numRuns: scale.fuzzRuns, seed: SEED + 2 })
  const scheme = fc.sample(fc.constantFrom('Bearer ', 'bearer ', 'Basic ', '', 'Bearer  '), { numRuns: scale.fuzzRuns, seed: SEED + 3 })
  let adminIn = 0
  await inBatches(tokens.map((token, i) => async () => {
    const res = await request(`${gw.adminUrl}/admin/projects/rel/usage`, { headers: { authorization: `${scheme[i]}${token}` } }).catch(() => undefined)
    if (!res) return
    await res.body.text()
    sent++
    if (res.statusCode === 200) adminIn++
    if (res.statusCode >= 500) note(`self-made ${res.statusCode} (admin)`, token)
  }), 8)
  t.equal(adminIn, 0, `no wrong admin token got in (${tokens.length} tried)`)
  const right = await request(`${gw.adminUrl}/admin/projects/rel/usage`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  await right.body.text()
  t.equal(right.statusCode, 200, 'the right admin token gets in')

  t.comment(`figure: ${sent} fuzzed requests and exchanges (${framingAnswers} answers on raw sockets); statuses ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}`)
  t.equal(gw.child.exitCode, null, 'no crash: the gateway is still running')
  t.notOk(gw.output.some((line) => /uncaught|unhandled|FATAL|"level":60/i.test(line)), 'no uncaught error or fatal line in the log')
  for (const [kind, { count, example }] of problems) t.fail(`${kind}: ${count} — e.g. ${example}`)
  if (problems.size === 0) t.pass('no hang, no self-made 5xx, no charge without a 2xx answer')

  // Credentials: never in the log, the metrics or what reached an upstream.
  const metrics = await (await request(`${gw.adminUrl}/metrics`)).body.text()
  const places = { 'gateway log': gw.output.join('\n'), metrics, 'upstream requests': up.recorded() }
  for (const [where, text] of Object.entries(places)) {
    const leaked = [...CREDENTIALS, ...LANES.map((l) => l.key)].filter((secret) => text.includes(secret))
    const at = leaked.length ? text.slice(Math.max(0, text.indexOf(leaked[0]) - 200), text.indexOf(leaked[0]) + 60) : ''
    t.same(leaked.map((s) => s.slice(0, 3) + '…'), [], `no credential in the ${where}${at ? `: …${at}` : ''}`)
  }
  t.ok(up.recorded().length > 0, 'requests did reach the upstreams')
})
