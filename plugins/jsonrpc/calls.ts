/**
 * JSON-RPC 2.0 call objects: validation of one entry and the shapes of answers
 * (https://www.jsonrpc.org/specification). A call is valid when `jsonrpc` is "2.0", `method` a
 * non-empty string, `params` absent, an array or an object, and `id` absent, a number, a string or
 * null. A valid call without an `id` member is a notification: it runs but gets no answer. An
 * invalid call is always answered (-32600), with its id when that id is readable, else null.
 */

export type RpcId = number | string | null
export type RpcParams = unknown[] | Record<string, unknown>

export interface RpcErrorObject {
  code: number
  message: string
  data?: unknown
}

/** The standard codes and their texts. */
export const RPC_ERRORS = {
  parse: { code: -32700, message: 'Parse error' },
  invalidRequest: { code: -32600, message: 'Invalid Request' },
  methodNotFound: { code: -32601, message: 'Method not found' },
  invalidParams: { code: -32602, message: 'Invalid params' },
  internal: { code: -32603, message: 'Internal error' },
} as const

export interface RpcCall {
  id: RpcId
  /** No `id` member: run it, answer nothing. */
  notification: boolean
  method: string
  params?: RpcParams
}

/** One entry of a request after validation: a call to run, or the error that answers it. */
export type Entry = { call: RpcCall } | { id: RpcId; error: RpcErrorObject }

/** One answer, keys in the order JSON-RPC servers write them. */
export type Answer = { jsonrpc: '2.0'; id: RpcId; result: unknown } | { jsonrpc: '2.0'; id: RpcId; error: RpcErrorObject }

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

export function isId(value: unknown): value is RpcId {
  return value === null || typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value))
}

/** A standard error with `data` saying what exactly was wrong. */
export function rpcError(kind: keyof typeof RPC_ERRORS, data?: unknown): RpcErrorObject {
  return data === undefined ? { ...RPC_ERRORS[kind] } : { ...RPC_ERRORS[kind], data }
}

/**
 * An answer object.
 *
 * @example
 * ```ts
 * answer(1, { result: 'privnet-preview' }) // { jsonrpc: '2.0', id: 1, result: 'privnet-preview' }
 * ```
 */
export function answer(id: RpcId, outcome: { result: unknown } | { error: RpcErrorObject }): Answer {
  return 'error' in outcome ? { jsonrpc: '2.0', id, error: outcome.error } : { jsonrpc: '2.0', id, result: outcome.result }
}

/**
 * Validates one call object (a single request or one batch element).
 *
 * @example
 * ```ts
 * readEntry({ jsonrpc: '2.0', id: 7, method: 'system_chain', params: [] })
 * // { call: { id: 7, notification: false, method: 'system_chain', params: [] } }
 * readEntry({ jsonrpc: '1.0', id: 7, method: 'x' })
 * // { id: 7, error: { code: -32600, message: 'Invalid Request', data: 'jsonrpc must be "2.0"' } }
 * ```
 */
export function readEntry(value: unknown): Entry {
  if (!isObject(value)) return { id: null, error: rpcError('invalidRequest', 'a call must be a JSON object') }
  const hasId = Object.hasOwn(value, 'id')
  if (hasId && !isId(value.id)) return { id: null, error: rpcError('invalidRequest', 'id must be a number, a string or null') }
  const id = hasId ? (value.id as RpcId) : null
  if (value.jsonrpc !== '2.0') return { id, error: rpcError('invalidRequest', 'jsonrpc must be "2.0"') }
  if (typeof value.method !== 'string' || value.method === '') return { id, error: rpcError('invalidRequest', 'method must be a non-empty string') }
  const params = value.params
  if (params !== undefined && !Array.isArray(params) && !isObject(params)) {
    return { id, error: rpcError('invalidRequest', 'params must be an array or an object') }
  }
  return { call: { id, notification: !hasId, method: value.method, params: params as RpcParams | undefined } }
}

/** True for absent params, `[]` and `{}`: what a method without parameters accepts. */
export function hasNoParams(params: RpcParams | undefined): boolean {
  return params === undefined || (Array.isArray(params) ? params.length === 0 : Object.keys(params).length === 0)
}
