/**
 * A stand-in Hiero mirror node for local runs and tests. It serves the eight REST routes the
 * gateway proxies under `/api/v1/...`, exactly where the real node serves them, from a small
 * deterministic fixture ledger (see mirror-fixture.ts), with the real node's
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

function answer(ledger: MirrorLedger, method: string, rawUrl: string): Answer {
  const url = new URL(rawUrl, 'http://stand-in')
  // Express answers only GET (and HEAD) on these routes; anything else falls through to Not found.
  if ((method !== 'GET' && method !== 'HEAD') || !url.pathname.startsWith(API_PREFIX + '/')) return notFound()
  const match = matchMirrorPath(url.pathname.slice(API_PREFIX.length))
  if (!match) return notFound()
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
  const standIn = {
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
    req.resume()
    const send = () => {
      const { status, body, headers } = answer(ledger, method, rawUrl)
      const text = JSON.stringify(body)
      res.writeHead(status, { ...headers, 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(text) })
      res.end(method === 'HEAD' ? undefined : text)
    }
    if (standIn.latencyMs > 0) setTimeout(send, standIn.latencyMs)
    else send()
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
