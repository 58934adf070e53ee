/**
 * The GET form of a JSON-RPC call: `GET /privnet/rpc/<key>?method=system_chain&params=[]&id=1`.
 *
 * - `method` (required): the method name.
 * - `params` (optional): JSON text of an array or an object, URL-encoded. Invalid JSON → -32700.
 * - `id` (optional): a number when it is an integer literal (`-?[0-9]+`), otherwise the string as
 *   given; absent means null. A GET call is always answered, never a notification.
 * - Any other parameter, or one given twice, → -32600. No batches: use POST for those.
 */
import { parseBoundedJson, type JsonTextError } from '../../core/proxy/plugin-api.ts'
import { isObject, rpcError, type Entry, type RpcId } from './calls.ts'

const KNOWN = new Set(['method', 'params', 'id'])
const INTEGER = /^-?(0|[1-9][0-9]*)$/

/**
 * The id a GET call answers with.
 *
 * @example
 * ```ts
 * queryId('42') // 42
 * queryId('a1') // 'a1'
 * queryId(null) // null
 * ```
 */
export function queryId(raw: string | null): RpcId {
  if (raw === null) return null
  if (INTEGER.test(raw)) {
    const n = Number(raw)
    if (Number.isSafeInteger(n)) return n
  }
  return raw
}

/**
 * Reads the call a GET request carries.
 *
 * @example
 * ```ts
 * readQueryCall(new URLSearchParams('method=system_chain&id=1'))
 * // { call: { id: 1, notification: false, method: 'system_chain', params: undefined } }
 * ```
 */
export function readQueryCall(query: URLSearchParams): Entry {
  const seen = new Set<string>()
  const ids = query.getAll('id')
  const id = ids.length === 1 ? queryId(ids[0]) : null
  for (const name of query.keys()) {
    if (!KNOWN.has(name)) return { id, error: rpcError('invalidRequest', `unknown query parameter ${JSON.stringify(name)}; expected method, params and id`) }
    if (seen.has(name)) return { id, error: rpcError('invalidRequest', `query parameter ${name} must appear once`) }
    seen.add(name)
  }
  const method = query.get('method')
  if (!method) return { id, error: rpcError('invalidRequest', 'query parameter method is required') }
  const rawParams = query.get('params')
  if (rawParams === null) return { call: { id, notification: false, method } }
  let params: unknown
  try {
    params = parseBoundedJson(rawParams)
  } catch (error) {
    const why = (error as JsonTextError).tooDeep ? `query parameter params ${(error as Error).message}` : 'query parameter params is not valid JSON'
    return { id, error: rpcError('parse', why) }
  }
  if (!Array.isArray(params) && !isObject(params)) return { id, error: rpcError('invalidRequest', 'params must be an array or an object') }
  return { call: { id, notification: false, method, params } }
}
