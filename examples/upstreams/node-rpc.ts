/**
 * Stand-in for the privacy network's node JSON-RPC endpoint (a Substrate node: jsonrpsee over
 * HTTP), answering in jsonrpsee's exact shapes from a small deterministic chain model.
 *
 * HTTP (shared/reference/upstreams.md §2.1):
 * - POST with a JSON content type (`application/json`, `application/json; charset=utf-8`,
 *   `application/json-rpc`…), any path → JSON-RPC 2.0, `application/json; charset=utf-8`;
 *   POST with another content type → 415 text; any other method → 405 text.
 * - GET `/health` → `{"peers":n,"isSyncing":false,"shouldHavePeers":true}`; GET
 *   `/health/readiness` → 200 empty; other methods on those paths → 405. No WebSocket.
 * - Body over `maxRequestBytes` (15 MiB like the node) → 413 with error -32007; a body that does
 *   not start with `{` or `[` → 400 with a parse error.
 *
 * JSON-RPC (jsonrpsee): answers are `{"jsonrpc":"2.0","id":…,"result"|"error":…}` in that key
 * order; notifications (no `id`) get no entry, and a request or batch of only notifications gets
 * an empty 200 body; `[]` → -32600; unparsable JSON → -32700 with id null; a malformed call that
 * still has an `id` → -32600 with that id; unknown method -32601 `Method not found`; bad params
 * -32602 `Invalid params` with the reason in `data`.
 *
 * Methods: system_chain, system_name, system_version, system_properties, system_health,
 * chain_getHeader [hash?], chain_getBlockHash [number|number[]?], chain_getFinalizedHead,
 * rpc_methods, midnight_ledgerVersion [at?], midnight_apiVersions. Upstream has no
 * `privnet_chainInfo`; mapping the product's method names onto these is the gateway's job.
 *
 * Run alone: `node --import tsx examples/upstreams/node-rpc.ts --port 19944 [--peers 3]`.
 */
import { createHash } from 'node:crypto'
import { isMainModule, numberFlag, runStandalone, send, startStandIn, type StandIn, type StandInOptions } from './standin.ts'

export type { StandIn, RecordedRequest } from './standin.ts'

export interface NodeRpcOptions extends StandInOptions {
  /** `system_chain`; default `privnet-preview`. */
  chain?: string
  /** Peers reported by `system_health` and `/health`; default 3. */
  peers?: number
  /** Best block number of the fake chain; default 4096 (finalized lags by 2). */
  bestNumber?: number
  /** `midnight_ledgerVersion`; default `=7.0.0`. */
  ledgerVersion?: string
  /** Largest accepted request body; default 15 MiB like the node's `--rpc-max-request-size`. */
  maxRequestBytes?: number
  /** Delay before each JSON-RPC answer, ms (default 0): lets tests hold calls in flight. */
  latencyMs?: number
}

const JSON_TYPE = 'application/json; charset=utf-8'
const TEXT = 'text/plain'
const JSON_CONTENT_TYPES = new Set([
  'application/json',
  'application/json; charset=utf-8',
  'application/json;charset=utf-8',
  'application/json-rpc',
  'application/json-rpc;charset=utf-8',
  'application/json-rpc; charset=utf-8',
])

type Id = number | string | null
type ErrorObject = { code: number; message: string; data?: unknown }
/** Raw `params`: positional array, named object, or (invalid once a method reads it) anything. */
type Params = unknown

class RpcError extends Error {
  constructor(readonly object: ErrorObject) {
    super(object.message)
  }
}

const invalidParams = (reason: string) => new RpcError({ code: -32602, message: 'Invalid params', data: reason })
const PARSE_ERROR: ErrorObject = { code: -32700, message: 'Parse error' }
const INVALID_REQUEST: ErrorObject = { code: -32600, message: 'Invalid request' }
const METHOD_NOT_FOUND: ErrorObject = { code: -32601, message: 'Method not found' }

/** Serialises one answer in jsonrpsee's key order. */
function answer(id: Id, payload: { result: unknown } | { error: ErrorObject }): string {
  return 'result' in payload
    ? `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${JSON.stringify(payload.result)}}`
    : `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"error":${JSON.stringify(payload.error)}}`
}

/** jsonrpsee ids are null, a string, or an unsigned integer. */
function isId(value: unknown): value is Id {
  return value === null || typeof value === 'string' || (Number.isSafeInteger(value) && (value as number) >= 0)
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

const hex32 = (text: string) => `0x${createHash('sha256').update(text).digest('hex')}`
const HASH_PATTERN = /^0x[0-9a-fA-F]{64}$/

/** A positional (array) or named (object) parameter, as jsonrpsee's macros accept both. */
function param(params: Params, index: number, name: string): unknown {
  if (Array.isArray(params)) return params[index]
  if (isObject(params)) return params[name]
  throw invalidParams(`invalid type: ${JSON.stringify(params)}, expected a sequence or a map`)
}

function buildMethods(options: NodeRpcOptions): Map<string, (params: Params) => unknown> {
  const chain = options.chain ?? 'privnet-preview'
  const peers = options.peers ?? 3
  const best = options.bestNumber ?? 4096
  const finalized = Math.max(0, best - 2)
  const blockHash = (n: number) => hex32(`${chain}:block:${n}`)
  const byHash = new Map<string, number>()
  for (let n = 0; n <= best; n++) byHash.set(blockHash(n), n)

  const blockAt = (value: unknown, name: string): number | null => {
    if (value === undefined || value === null) return best
    if (typeof value !== 'string' || !HASH_PATTERN.test(value)) {
      throw invalidParams(`invalid type for ${name}: expected a 0x-prefixed 32-byte hex string`)
    }
    return byHash.get(value.toLowerCase()) ?? null
  }
  const header = (n: number) => ({
    parentHash: n === 0 ? `0x${'0'.repeat(64)}` : blockHash(n - 1),
    number: `0x${n.toString(16)}`,
    stateRoot: hex32(`${chain}:state:${n}`),
    extrinsicsRoot: hex32(`${chain}:extrinsics:${n}`),
    digest: { logs: [] },
  })
  const hashOfNumber = (value: unknown): string | null => {
    let n: number
    if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) n = value
    else if (typeof value === 'string' && /^0x[0-9a-fA-F]{1,16}$/.test(value)) n = Number.parseInt(value.slice(2), 16)
    else throw invalidParams('invalid type for number: expected a block number or a 0x-prefixed hex number')
    return n <= best ? blockHash(n) : null
  }
  const health = { peers, isSyncing: false, shouldHavePeers: true }

  const methods = new Map<string, (params: Params) => unknown>([
    ['system_chain', () => chain],
    ['system_name', () => 'privnet-node'],
    ['system_version', () => '0.20.1-standin'],
    ['system_properties', () => ({ ss58Format: 42, tokenDecimals: 6, tokenSymbol: 'PRIV' })],
    ['system_health', () => health],
    [
      'chain_getHeader',
      (params) => {
        const n = blockAt(param(params, 0, 'hash'), 'hash')
        return n === null ? null : header(n)
      },
    ],
    [
      'chain_getBlockHash',
      (params) => {
        const value = param(params, 0, 'number')
        if (value === undefined || value === null) return blockHash(best)
        return Array.isArray(value) ? value.map(hashOfNumber) : hashOfNumber(value)
      },
    ],
    ['chain_getFinalizedHead', () => blockHash(finalized)],
    ['midnight_apiVersions', () => [2]],
    [
      'midnight_ledgerVersion',
      (params) => {
        if (blockAt(param(params, 0, 'at'), 'at') === null) {
          throw new RpcError({ code: -32602, message: 'Unable to get block by hash' })
        }
        return options.ledgerVersion ?? '=7.0.0'
      },
    ],
  ])
  methods.set('rpc_methods', () => ({ methods: [...methods.keys()].sort() }))
  return methods
}

/**
 * Starts the stand-in node RPC on loopback (port 0 unless given).
 *
 * @example
 * ```ts
 * const node = await startNodeRpc()
 * const res = await fetch(node.url, {
 *   method: 'POST', headers: { 'content-type': 'application/json' },
 *   body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'system_chain', params: [] }),
 * })
 * // {"jsonrpc":"2.0","id":1,"result":"privnet-preview"}
 * await node.close()
 * ```
 */
export async function startNodeRpc(options: NodeRpcOptions = {}): Promise<StandIn> {
  const methods = buildMethods(options)
  const maxRequestBytes = options.maxRequestBytes ?? 15 * 1024 * 1024

  /** One call; null for a notification (no answer entry). `inBatch` changes how junk is named. */
  function handleCall(call: unknown, inBatch: boolean): string | null {
    const readableId = isObject(call) && 'id' in call && isId(call.id)
    const wellFormed = isObject(call) && call.jsonrpc === '2.0' && typeof call.method === 'string'
    // A well-formed call without a usable id parses as a notification (serde skips the field).
    if (wellFormed && !readableId) return null
    if (!wellFormed) {
      // jsonrpsee: with a readable id it is an invalid request; without, a lone call is a parse
      // error while a batch entry is still an invalid request.
      const id = readableId ? (call.id as Id) : null
      return answer(id, { error: readableId || inBatch ? INVALID_REQUEST : PARSE_ERROR })
    }
    const id = call.id as Id
    const method = methods.get(call.method as string)
    if (method === undefined) return answer(id, { error: METHOD_NOT_FOUND })
    try {
      return answer(id, { result: method(call.params ?? []) })
    } catch (error) {
      if (error instanceof RpcError) return answer(id, { error: error.object })
      return answer(id, { error: { code: -32603, message: 'Internal error' } })
    }
  }

  function handleBody(text: string): { status: number; body: string } {
    const trimmed = text.trimStart()
    const single = trimmed.startsWith('{')
    if (!single && !trimmed.startsWith('[')) return { status: 400, body: answer(null, { error: PARSE_ERROR }) }
    let parsed: unknown
    try {
      parsed = JSON.parse(trimmed)
    } catch {
      return { status: 200, body: answer(null, { error: PARSE_ERROR }) }
    }
    if (single) return { status: 200, body: handleCall(parsed, false) ?? '' }
    const batch = parsed as unknown[]
    if (batch.length === 0) return { status: 200, body: answer(null, { error: INVALID_REQUEST }) }
    const entries = batch.map((call) => handleCall(call, true)).filter((entry) => entry !== null)
    return { status: 200, body: entries.length === 0 ? '' : `[${entries.join(',')}]` }
  }

  return startStandIn(options, async (req, body, res) => {
    const path = new URL(req.url ?? '/', 'http://stand-in').pathname
    if (path === '/health' || path === '/health/readiness') {
      if (req.method !== 'GET') return send(res, 405, 'Used HTTP Method is not allowed. POST is required\n', TEXT)
      if (path === '/health/readiness') return send(res, 200, '')
      return send(res, 200, JSON.stringify(methods.get('system_health')!([])), JSON_TYPE)
    }
    if (req.method !== 'POST') return send(res, 405, 'Used HTTP Method is not allowed. POST is required\n', TEXT)
    const contentType = (req.headers['content-type'] ?? '').toLowerCase()
    if (!JSON_CONTENT_TYPES.has(contentType)) {
      return send(res, 415, 'Supplied content type is not allowed. Content-Type: application/json is required\n', TEXT)
    }
    if (body.length > maxRequestBytes) {
      const error = { code: -32007, message: 'Request is too big', data: `Exceeded max limit of ${maxRequestBytes}` }
      return send(res, 413, answer(null, { error }), JSON_TYPE)
    }
    const { status, body: out } = handleBody(body.toString('utf8'))
    if (options.latencyMs) await new Promise((resolve) => setTimeout(resolve, options.latencyMs))
    send(res, status, out, JSON_TYPE)
  })
}

if (isMainModule(import.meta.url)) {
  void runStandalone('node-rpc', (flags) =>
    startNodeRpc({
      host: flags.host,
      port: numberFlag(flags, 'port') ?? 9944,
      peers: numberFlag(flags, 'peers'),
      chain: flags.chain,
    }),
  )
}
