/**
 * A stand-in Hiero mirror node for local runs and tests. It serves every GET route of the node's
 * REST API under `/api/v1/...`, exactly where the real node serves them: the eight main ones from a
 * small deterministic fixture ledger (see mirror-fixture.ts), the others with the example bodies of
 * the pinned OpenAPI document (mirror-examples.ts) after the node's own validation; with the real node's
 * - 400 answers: same texts, order and `{"_status":{"messages":[...]}}` shape (it runs the
 *   gateway's own mirror rules in the real node's mode, which caps `limit` above 100);
 * - 404 `Not found` for unknown ids and routes (rest-java's shape for `/topics/{id}`);
 * - relative `links.next` plus a `Link: <next>; rel="next"` header;
 * - per-route `cache-control` on success only.
 * Every request is recorded (method, path with query, headers), so tests can check that gateway
 * credentials never arrive and count upstream hits.
 *
 * Run alone: `node --import tsx examples/upstreams/mirror.ts --port 18551 [--host 127.0.0.1] [--network mainnet]`
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { pathToFileURL } from 'node:url'
import { checkMirrorRequest } from '../../plugins/mirror-validate/rules.ts'
import { MIRROR_ROUTES, matchMirrorPath } from '../../plugins/mirror-validate/routes.ts'
import { buildLedger, type MirrorLedger, type MirrorNetwork } from './mirror-fixture.ts'
import { MIRROR_HANDLERS } from './mirror-handlers.ts'
import { checkMirrorOperation } from '../../plugins/mirror-validate/operation-check.ts'
import { checkContractCall } from '../../plugins/mirror-validate/contract-call.ts'
import type { ResolvedOperation } from '../../plugins/mirror-validate/openapi-routes.ts'
import { createRequire } from 'node:module'

/** Example 200 bodies per operation, from the pinned OpenAPI (mirror-examples.ts). */
const EXAMPLES = createRequire(import.meta.url)('./mirror-examples.json') as Record<string, Record<string, unknown>>

/** The node's `response.headers.path` table (rest/config/application.yml, v0.160); default max-age=1. */
const CACHE_CONTROL: Record<string, string> = {
  getAccounts: 'public, max-age=10',
  getAccount: 'public, max-age=2',
  getStakingRewards: 'public, max-age=60',
  getBlock: 'public, max-age=600',
  getContracts: 'public, max-age=10',
  getContractResultByIdAndTimestamp: 'public, max-age=600',
  getContractsResults: 'public, max-age=10',
  getContractsLogs: 'public, max-age=10',
  getContractResultByTransactionIdOrHash: 'public, max-age=600',
  getContractActions: 'public, max-age=600',
  getSchedules: 'public, max-age=10',
  getTokens: 'public, max-age=10',
  getToken: 'public, max-age=5',
  getTopicMessageByIdAndSequenceNumber: 'public, max-age=600',
  getTopicMessageByTimestamp: 'public, max-age=600',
  getTransactions: 'public, max-age=2',
  getTransaction: 'public, max-age=600',
}

/** Cursor keys the node pages on, and a value each accepts, in the order they are tried. */
const CURSORS: [string, string][] = [
  ['timestamp', 'lt:1700000000.000000000'], ['account.id', 'gt:0.0.1001'], ['token.id', 'gt:0.0.1001'],
  ['spender.id', 'gt:0.0.1001'], ['serialnumber', 'gt:1'], ['contract.id', 'gt:0.0.1001'], ['schedule.id', 'gt:0.0.1001'],
  ['node.id', 'gt:1'], ['registerednode.id', 'gt:1'], ['index', 'gt:1'], ['slot', 'gt:0x1'], ['block.number', 'lt:100'],
  ['hook.id', 'gt:1'], ['key', 'gt:0x1'], ['sequencenumber', 'gt:1'],
]

/** web3's `/contracts/call`: its validation, then a 32-byte result (no EVM runs here). */
function contractCall(raw: Buffer): Answer {
  let json: unknown
  try {
    json = JSON.parse(raw.toString('utf8'))
  } catch {
    return { status: 400, body: { _status: { messages: [{ message: 'Bad Request', detail: 'Unable to read the request body', data: '' }] } }, headers: {} }
  }
  const rejection = checkContractCall(json)
  if (rejection) return { status: rejection.status, body: { _status: { messages: rejection.messages } }, headers: {} }
  return { status: 200, body: { result: '0x' + '0'.repeat(63) + '1' }, headers: {} }
}

/**
 * A page of an operation the fixture ledger does not model: its example body, `links` last (as the
 * node writes it) with one next page on the operation's cursor, then `null`.
 */
function exampleAnswer(operation: ResolvedOperation, url: URL): Answer {
  const example = EXAMPLES[operation.operationId] ?? {}
  const headers: Record<string, string> = { 'cache-control': CACHE_CONTROL[operation.operationId] ?? 'public, max-age=1' }
  if (!('links' in example)) return { status: 200, body: example, headers }
  const { links: _links, ...rest } = example
  const cursor = CURSORS.find(([key]) => operation.query.has(key))
  let next: string | null = null
  if (cursor && !url.searchParams.has(cursor[0])) {
    const query = new URLSearchParams(url.searchParams)
    query.set('limit', query.get('limit') ?? '25')
    query.append(cursor[0], cursor[1])
    // The node leaves `:` of operators unescaped in its links.
    next = `${url.pathname}?${[...query].map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v).replace(/%3A/g, ':')}`).join('&')}`
    headers.link = `<${next}>; rel="next"`
  }
  return { status: 200, body: { ...rest, links: { next } }, headers }
}

export interface RecordedRequest {
  method: string
  /** Path and query as received, e.g. `/api/v1/accounts?limit=2`. */
  path: string
  headers: IncomingHttpHeaders
}

export interface MirrorStandInOptions {
  /** Default 127.0.0.1. */
  host?: string
  /** Default 0 (any free port). */
  port?: number
  /** Which fixture ledger to serve; default testnet. */
  network?: MirrorNetwork
  /** Delay before each answer, ms (default 0): lets tests hold requests in flight. */
  latencyMs?: number
}

export interface MirrorStandIn {
  /** Origin, e.g. `http://127.0.0.1:18551`; the API is under `${url}/api/v1`. */
  readonly url: string
  readonly port: number
  readonly network: MirrorNetwork
  readonly ledger: MirrorLedger
  /** Every request received since start or the last reset, oldest first. */
  readonly requests: RecordedRequest[]
  /** Delay before each answer, ms; may be changed while running. */
  latencyMs: number
  /**
   * `cache-control` of successful answers, for tests of caches that follow it: undefined (default)
   * sends the node's per-route value, a string replaces it, null sends none. May be changed while running.
   */
  cacheControl?: string | null
  /** Forgets the recorded requests. */
  reset(): void
  close(): Promise<void>
}

const JSON_TYPE = 'application/json; charset=utf-8'
const API_PREFIX = '/api/v1'

interface Answer {
  status: number
  body: unknown
  headers: Record<string, string>
}

function notFound(): Answer {
  return { status: 404, body: { _status: { messages: [{ message: 'Not found' }] } }, headers: {} }
}

function answer(ledger: MirrorLedger, method: string, rawUrl: string, body: Buffer): Answer {
  const url = new URL(rawUrl, 'http://stand-in')
  if (method === 'POST' && url.pathname === API_PREFIX + '/contracts/call') return contractCall(body)
  if (method === 'POST' && url.pathname === API_PREFIX + '/network/fees') {
    const { rejection } = checkMirrorOperation(method, ['network', 'fees'], url.searchParams, {})
    if (rejection) return { status: rejection.status, body: { _status: { messages: rejection.messages } }, headers: {} }
    return { status: 200, body: EXAMPLES.estimateFees ?? {}, headers: {} }
  }
  // Express answers only GET (and HEAD) on these routes; anything else falls through to Not found.
  if ((method !== 'GET' && method !== 'HEAD') || !url.pathname.startsWith(API_PREFIX + '/')) return notFound()
  const match = matchMirrorPath(url.pathname.slice(API_PREFIX.length))
  if (!match) {
    // The rest of the API: the node's validation, then the OpenAPI example of the answer.
    let segments: string[]
    try {
      segments = url.pathname.slice(API_PREFIX.length + 1).split('/').map(decodeURIComponent)
    } catch {
      return notFound()
    }
    const { operation, rejection } = checkMirrorOperation(method, segments, url.searchParams, { limitAboveMax: 'cap' })
    if (rejection) return { status: rejection.status, body: { _status: { messages: rejection.messages } }, headers: {} }
    return exampleAnswer(operation!, url)
  }
  const pathParams: Record<string, string> = match.id === undefined ? {} : { id: match.id }
  const rejection = checkMirrorRequest(match.route, pathParams, url.searchParams, { limitAboveMax: 'cap' })
  if (rejection) return { status: rejection.status, body: { _status: { messages: rejection.messages } }, headers: {} }
  const result = MIRROR_HANDLERS[match.route]({ ledger, id: match.id ?? '', query: url.searchParams, path: url.pathname })
  if (result.status !== 200) return { ...result, headers: {} }
  const headers: Record<string, string> = { 'cache-control': MIRROR_ROUTES[match.route].cacheControl }
  const next = (result.body as { links?: { next?: string | null } }).links?.next
  if (next) headers.link = `<${next}>; rel="next"`
  return { ...result, headers }
}

/**
 * Starts a stand-in mirror node.
 * @example
 * const mirror = await startMirror({ network: 'testnet' })
 * const res = await fetch(`${mirror.url}/api/v1/accounts?limit=2`)
 * await mirror.close()
 */
export async function startMirror(options: MirrorStandInOptions = {}): Promise<MirrorStandIn> {
  const network = options.network ?? 'testnet'
  const ledger = buildLedger(network)
  const requests: RecordedRequest[] = []
  let server: Server
  const standIn: MirrorStandIn & { url: string; port: number } = {
    url: '',
    port: 0,
    network,
    ledger,
    requests,
    latencyMs: options.latencyMs ?? 0,
    reset: () => void requests.splice(0, requests.length),
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()))
        server.closeAllConnections()
      }),
  }
  server = createServer((req, res) => {
    const method = req.method ?? 'GET'
    const rawUrl = req.url ?? '/'
    requests.push({ method, path: rawUrl, headers: { ...req.headers } })
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    const send = () => {
      const { status, body, headers } = answer(ledger, method, rawUrl, Buffer.concat(chunks))
      if (status === 200 && standIn.cacheControl !== undefined) {
        if (standIn.cacheControl === null) delete headers['cache-control']
        else headers['cache-control'] = standIn.cacheControl
      }
      const text = JSON.stringify(body)
      res.writeHead(status, { ...headers, 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(text) })
      res.end(method === 'HEAD' ? undefined : text)
    }
    req.on('end', () => {
      if (standIn.latencyMs > 0) setTimeout(send, standIn.latencyMs)
      else send()
    })
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve())
  })
  const address = server.address() as AddressInfo
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address
  standIn.port = address.port
  standIn.url = `http://${host}:${address.port}`
  return standIn
}

function flag(name: string): string | undefined {
  const index = process.argv.indexOf(`--${name}`)
  return index >= 0 ? process.argv[index + 1] : undefined
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const network = flag('network') === 'mainnet' ? 'mainnet' : 'testnet'
  const mirror = await startMirror({ host: flag('host'), port: Number(flag('port') ?? 18551), network })
  process.stdout.write(`stand-in mirror node (${network}) listening on ${mirror.url}/api/v1\n`)
  const stop = () => void mirror.close().then(() => process.exit(0))
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
}
