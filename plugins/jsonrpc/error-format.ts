/**
 * The `jsonrpc` error format: a gateway error (auth, credits, rate limit, body size, upstream
 * down...) on a JSON-RPC route is rendered as a JSON-RPC error object, so JSON-RPC clients can
 * read it. The HTTP status stays the gateway's (401, 402, 429...): the request as a whole failed.
 *
 * `error.code`: -32700 for invalid JSON; -32600 for other malformed requests (400, 404, 405, 413,
 * 415, 431); -32603 for gateway/upstream failures (5xx); -32000 otherwise (401, 402, 403, 429).
 * `error.message` is the gateway's message; `error.data` = `{code, status}` with the gateway's
 * stable code, which is what clients should match on.
 */
import type { ErrorFormatter, RequestContext } from '../../core/proxy/plugin-api.ts'
import type { GatewayError } from '../../core/proxy/plugin-api.ts'
import { answer, isId, isObject, type RpcId } from './calls.ts'
import { queryId } from './get-form.ts'

const MALFORMED_STATUSES = new Set([400, 404, 405, 413, 415, 431])

export function rpcCodeFor(error: GatewayError): number {
  if (error.code === 'invalid_json') return -32700
  if (MALFORMED_STATUSES.has(error.status)) return -32600
  if (error.status >= 500) return -32603
  return -32000
}

/** The id of the request the error answers, where one can be read; null otherwise (and for batches). */
function requestId(error: GatewayError, ctx: RequestContext | undefined): RpcId {
  if (error.detail && isId(error.detail.id)) return error.detail.id
  const body = ctx?.body?.json
  if (isObject(body)) return isId(body.id) ? body.id : null
  if (ctx && (ctx.method === 'GET' || ctx.method === 'HEAD')) return queryId(ctx.query.getAll('id').length === 1 ? ctx.query.get('id') : null)
  return null
}

export const jsonRpcErrorFormat: ErrorFormatter = (error, ctx) => ({
  status: error.status,
  headers: { 'content-type': 'application/json; charset=utf-8', ...error.headers },
  body: JSON.stringify(
    answer(requestId(error, ctx), { error: { code: rpcCodeFor(error), message: error.message, data: { code: error.code, status: error.status } } }),
  ),
})
