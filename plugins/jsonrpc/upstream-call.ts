/**
 * Sends calls to the node in one HTTP request. The gateway numbers the calls itself (0, 1, ...)
 * and maps the answers back by position: client ids never reach the node, so any id JSON-RPC
 * allows works (the node accepts only unsigned integers and strings), and ids cannot collide with
 * the sub-calls the gateway adds (privnet_chainInfo).
 */
import type { RequestContext } from '../../core/proxy/plugin-api.ts'
import type { UpstreamHandle } from '../../core/proxy/plugin-api.ts'
import { upstreamFailure } from '../../core/proxy/plugin-api.ts'
import { errors, GatewayError } from '../../core/proxy/plugin-api.ts'
import { parseBoundedJson, type JsonTextError } from '../../core/proxy/plugin-api.ts'
import { isObject, type RpcErrorObject, type RpcParams } from './calls.ts'
import type { InFlight } from '../_shared/coalesce.ts'

export interface OutgoingCall {
  method: string
  params?: RpcParams
  /** Sent without an id; the node answers nothing for it. */
  notification?: boolean
}

/** What the node answered for one call; undefined for notifications or a missing answer. */
export type NodeOutcome = { result: unknown } | { error: RpcErrorObject }

/** Sends calls, resolves with one outcome per call, in order. */
export type RpcSender = (calls: readonly OutgoingCall[]) => Promise<(NodeOutcome | undefined)[]>

export interface SenderOptions {
  upstream: UpstreamHandle
  path: string
  maxResponseBytes: number
  /** Node methods marked read-only in config: a request of only these may be retried on another target. */
  readOnly?: ReadonlySet<string>
  /** Coalescing of identical read-only exchanges (see coalesce.ts); absent: every call goes upstream. */
  coalesce?: CoalesceOptions
}

/** One HTTP exchange with the node: its status and the whole body. */
export interface Exchange {
  status: number
  raw: Buffer
}

export interface CoalesceOptions {
  /** The exchanges in flight, shared by every request of the route (and its reloads). */
  inFlight: InFlight<Exchange>
  /** Node methods (as sent, after aliases) that only read; a request with any other is never coalesced. */
  readOnly: ReadonlySet<string>
  /** Called when this request was answered from another request's exchange. */
  joined(): void
}

function badAnswer(name: string, why: string): GatewayError {
  return new GatewayError(502, 'upstream_bad_response', `upstream ${name} ${why}`)
}

async function readCapped(body: AsyncIterable<Buffer> & { destroy(): void }, cap: number, name: string): Promise<Buffer> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of body) {
    size += chunk.length
    if (size > cap) {
      body.destroy()
      throw errors.responseTooLarge(`upstream ${name} answered more than ${cap} bytes`)
    }
    chunks.push(chunk)
  }
  return Buffer.concat(chunks, size)
}

function outcomeOf(entry: Record<string, unknown>): NodeOutcome | undefined {
  if (Object.hasOwn(entry, 'result')) return { result: entry.result }
  if (isObject(entry.error) && typeof entry.error.code === 'number' && typeof entry.error.message === 'string') {
    return { error: entry.error as unknown as RpcErrorObject }
  }
  return undefined
}

/**
 * A sender bound to one request: it carries the request's headers for the upstream and aborts
 * with the client.
 *
 * @example
 * ```ts
 * const send = createSender(ctx, { upstream: init.upstream('privnet-node'), path: '/', maxResponseBytes: 1 << 23 })
 * const [chain] = await send([{ method: 'system_chain', params: [] }])
 * // { result: 'privnet-preview' }
 * ```
 */
export function createSender(ctx: RequestContext, options: SenderOptions): RpcSender {
  const { upstream } = options
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(ctx.upstreamHeaders)) if (value !== null) headers[name] = value
  headers['content-type'] = 'application/json'
  headers.accept = 'application/json'

  const exchange = async (body: string, signal: AbortSignal, retrySafe: boolean): Promise<Exchange> => {
    try {
      const response = await upstream.pool.request({ path: upstream.basePath + options.path, method: 'POST', headers, body, signal, retrySafe })
      return { status: response.statusCode, raw: await readCapped(response.body, options.maxResponseBytes, upstream.name) }
    } catch (error) {
      throw upstreamFailure(error, upstream.name)
    }
  }
  const { coalesce } = options
  // The wire body holds the gateway's own ids (0, 1, ...), never the client's: two clients' calls
  // with the same methods and params are the same bytes, and each client's ids are put back by
  // dispatch from its own entries.
  const { readOnly } = options
  const shared = (calls: readonly OutgoingCall[], body: string): Promise<Exchange> => {
    const reads = readOnly !== undefined && calls.every((call) => readOnly.has(call.method))
    if (!coalesce || !reads) return exchange(body, ctx.signal, reads)
    const { result, joined } = coalesce.inFlight.run(`${upstream.name}\n${upstream.config.url}\n${options.path}\n${body}`, ctx.signal, (signal) => exchange(body, signal, true))
    if (joined) coalesce.joined()
    // A client that went away stops waiting with its signal's reason: the same error as an aborted call of its own.
    return result.catch((error: unknown) => Promise.reject(upstreamFailure(error, upstream.name)))
  }

  return async (calls) => {
    const wire = calls.map((call, index) => {
      const message: Record<string, unknown> = { jsonrpc: '2.0', method: call.method }
      if (call.params !== undefined) message.params = call.params
      if (!call.notification) message.id = index
      return message
    })
    // Serialised before the call, not inside its error handling: a failure here is ours, never
    // the node's, and must not be reported as the node being down.
    const body = JSON.stringify(wire.length === 1 ? wire[0] : wire)
    let status: number
    let raw: Buffer
    const started = performance.now()
    try {
      ;({ status, raw } = await shared(calls, body))
    } finally {
      ctx.upstreamMs = (ctx.upstreamMs ?? 0) + performance.now() - started
    }
    ctx.upstreamStatus = status
    if (status !== 200) throw badAnswer(upstream.name, `answered HTTP ${status}`)
    const outcomes = new Array<NodeOutcome | undefined>(calls.length)
    if (raw.length === 0) return outcomes
    let parsed: unknown
    try {
      parsed = parseBoundedJson(raw)
    } catch (error) {
      // An answer nested past the bound could not be re-serialised for the client.
      throw badAnswer(upstream.name, (error as JsonTextError).tooDeep ? `answered JSON that ${(error as Error).message}` : 'answered with invalid JSON')
    }
    for (const entry of Array.isArray(parsed) ? parsed : [parsed]) {
      if (!isObject(entry) || typeof entry.id !== 'number' || !Number.isInteger(entry.id)) continue
      if (entry.id >= 0 && entry.id < calls.length && !calls[entry.id].notification) outcomes[entry.id] = outcomeOf(entry)
    }
    return outcomes
  }
}
