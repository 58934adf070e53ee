/**
 * Request validation for the mirror-node REST proxy, answering as the real node would: the same
 * 400 texts in the same order, in the same `{"_status":{"messages":[...]}}` shape.
 *
 * Facts come from the Hiero mirror node's REST module (v0.160): which parameters each handler
 * accepts, what it checks, and in which order it checks path and query. Its OpenAPI patterns are
 * not what it enforces, so they are not used here. Two handler families order messages differently:
 * - `/accounts` (the older validator) reports in query order, unknown parameters in place, and
 *   rejects `op:value` texts with more than one colon;
 * - every other route reports repeated-count errors, then invalid values (one per bad value),
 *   then unknown parameters (one per value), and reads `op:value` from the right.
 * After those checks, ids are parsed (`Invalid entity ID "<id>"`), then timestamp operator rules.
 * Each later step only runs when the earlier ones passed, because upstream throws at the first.
 *
 * One deliberate difference: the spec's `limit` range is 1-100, so by default `limit` above
 * `maxLimit` is `Invalid parameter: limit`; the real node silently caps it (`limitAboveMax: 'cap'`).
 * The timestamp rules of `/accounts/{id}` and `/transactions` follow the node's
 * `query.strictTimestampParam` (default true); `strictTimestamp: false` follows a node with it off.
 */
import { MIRROR_ROUTES, type MirrorRouteName } from './routes.ts'
import { isValidEntityId, paddedEntityId, parseAccountAlias, parseEntityId } from './entity-id.ts'
import { isTransactionHash, parseTransactionId } from './transaction-id.ts'
import { groupMirrorQuery, isPositiveLong, parseMirrorQuery } from './query.ts'
import {
  ACCEPTED, TOKEN_INFO_CHECKS, checkAsFilters, checkInQueryOrder, commonChecks, entityParseError, invalid,
  timestampRuleError, tokenListChecks, type ValueCheck,
} from './checks.ts'

export type { MirrorRouteName } from './routes.ts'

export interface MirrorMessage {
  message: string
  /** rest-java (`/topics/{id}`) puts the explanation here and the reason phrase in `message`. */
  detail?: string
  /** web3 (`/contracts/call`) adds the revert data, empty for a validation error. */
  data?: string
}

/** How the real node would refuse a request. */
export interface MirrorRejection {
  status: 400 | 404
  messages: MirrorMessage[]
}

export interface MirrorValidationOptions {
  /** Largest `limit` (default 100, the spec's and the node's maximum). */
  maxLimit?: number
  /** `reject` (default): above `maxLimit` is invalid; `cap`: accepted, as the real node does. */
  limitAboveMax?: 'reject' | 'cap'
  /**
   * The node's `query.strictTimestampParam` (default true, as the node ships): on `/accounts/{id}`
   * and `/transactions` repeated range operators and eq combined with a range are refused; false
   * accepts them, as a node configured with `strictTimestampParam: false` does.
   */
  strictTimestamp?: boolean
}

const reject = (...messages: string[]): MirrorRejection => ({ status: 400, messages: messages.map((message) => ({ message })) })
/** Upstream throws once per step: all of a step's messages, or nothing when the step passed. */
const rejectAll = (messages: (string | null)[]): MirrorRejection | null => {
  const found = messages.filter((m): m is string => m !== null)
  return found.length > 0 ? reject(...found) : null
}

/** Upstream reads a parameter as "present" when it is a non-empty string or any repeated list. */
const present = (values: string[] | undefined): values is string[] =>
  values !== undefined && (values.length > 1 || values[0] !== '')

function accountPathError(id: string): string | null {
  const ok = isValidEntityId(id) ? parseEntityId(id) !== null : parseAccountAlias(id) !== null
  return ok ? null : invalid('idOrAliasOrEvmAddress')
}

/** `/topics/{id}` is answered by rest-java behind nginx; both have their own id rules and texts. */
function checkTopicPath(id: string): MirrorRejection | null {
  // nginx sends only numeric ids to rest-java; anything else reaches the REST module, which has no such route.
  if (!/^(\d+\.){0,2}\d+$/.test(id)) return { status: 404, messages: [{ message: 'Not found' }] }
  const match = /^((\d{1,4})\.)?((\d{1,5})\.)?(\d{1,12})$/.exec(id)
  const parts = match ? [match[2], match[4]].filter((p) => p !== undefined).map(Number) : []
  const [shard, realm] = parts.length === 2 ? parts : [0, parts[0] ?? 0]
  if (!match || shard > 1023 || realm > 65535 || Number(match[5]) > 2 ** 38 - 1) {
    return { status: 400, messages: [{ message: 'Bad Request', detail: "Failed to convert 'id'" }] }
  }
  return null
}

type RouteCheck = (id: string, query: URLSearchParams, limit: ValueCheck, strictTimestamp: boolean) => MirrorRejection | null

/** The node's strict timestamp rules, when they apply (utils.js `parseTimestampFilters`). */
const timestampRules = (strict: boolean, filters: Parameters<typeof timestampRuleError>[0]) => (strict ? timestampRuleError(filters) : null)

const ROUTE_CHECKS: Record<MirrorRouteName, RouteCheck> = {
  'accounts.list': (_id, query, limit) => {
    const { params, parseError } = parseMirrorQuery(query)
    if (parseError) return reject(parseError)
    const outcome = checkInQueryOrder(params, ACCEPTED['accounts.list'], commonChecks(limit))
    return rejectAll(outcome.messages) ?? rejectAll([entityParseError(outcome.filters)])
  },
  'accounts.get': (id, query, limit, strict) => {
    const { params, parseError } = parseMirrorQuery(query)
    if (parseError) return reject(parseError)
    const outcome = checkAsFilters(params, ACCEPTED['accounts.get'], commonChecks(limit))
    return rejectAll(outcome.messages) ?? rejectAll([accountPathError(id) ?? timestampRules(strict, outcome.filters)])
  },
  'transactions.list': (_id, query, limit, strict) => {
    const { params, parseError } = parseMirrorQuery(query)
    if (parseError) return reject(parseError)
    const outcome = checkAsFilters(params, ACCEPTED['transactions.list'], commonChecks(limit))
    return rejectAll(outcome.messages) ?? rejectAll([entityParseError(outcome.filters) ?? timestampRules(strict, outcome.filters)])
  },
  'transactions.get': (id, query, limit) => {
    const { params, parseError } = parseMirrorQuery(query)
    if (parseError) return reject(parseError)
    const outcome = checkAsFilters(params, ACCEPTED['transactions.get'], commonChecks(limit))
    if (outcome.messages.length > 0) return reject(...outcome.messages)
    if (isTransactionHash(id)) return null
    const parsed = parseTransactionId(id)
    return 'error' in parsed ? reject(parsed.error) : null
  },
  'tokens.list': (_id, query, limit) => {
    const { params, parseError } = parseMirrorQuery(query)
    if (parseError) return reject(parseError)
    if (present(params.get('name')) && present(params.get('token.id'))) {
      return reject('token.id and name can not be used together. Use a more specific name instead.')
    }
    if (present(params.get('name')) && present(params.get('account.id'))) {
      return reject('account.id and name cannot be used together')
    }
    const outcome = checkAsFilters(params, ACCEPTED['tokens.list'], tokenListChecks(limit))
    if (outcome.messages.length > 0) return reject(...outcome.messages)
    const parseFailure = entityParseError(outcome.filters)
    if (parseFailure) return reject(parseFailure)
    // The handler re-reads account.id raw: one plain id only, no operator, no repeats.
    const accountIds = params.get('account.id')
    if (!present(accountIds)) return null
    if (accountIds.length > 1) return reject(`Entity ID "${accountIds.join(',')}" is not a string`)
    return parseEntityId(accountIds[0]) ? null : reject(invalid('account.id'))
  },
  'tokens.get': (id, query) => {
    if (!parseEntityId(id, 'num-alias')) return reject(invalid('tokenid'))
    const { params, parseError } = parseMirrorQuery(query)
    if (parseError) return reject(parseError)
    return rejectAll(checkAsFilters(params, ACCEPTED['tokens.get'], TOKEN_INFO_CHECKS, false).messages)
  },
  'topics.get': (id) => checkTopicPath(id),
  'topics.messages': (id, query, limit) => {
    if (!isValidEntityId(id, 'none')) return reject(invalid('topic.id'))
    const { params, parseError } = parseMirrorQuery(query)
    if (parseError) return reject(parseError)
    const outcome = checkAsFilters(params, ACCEPTED['topics.messages'], commonChecks(limit))
    if (outcome.messages.length > 0) return reject(...outcome.messages)
    return parseEntityId(id) ? null : reject(`Invalid entity ID "${paddedEntityId(id)}"`)
  },
}

function pathIdOf(route: MirrorRouteName, pathParams: Record<string, string>): string {
  for (const name of MIRROR_ROUTES[route].pathParamNames) {
    if (Object.hasOwn(pathParams, name)) return pathParams[name]
  }
  // A gateway route may name the id differently: fall back to its last parameter.
  return Object.values(pathParams).at(-1) ?? ''
}

/**
 * How the real node would refuse this request, or `null` when it would accept it.
 * `topics.get` answers with rest-java's texts (`Bad Request` + detail) or 404 `Not found`.
 * @example
 * checkMirrorRequest('accounts.list', {}, new URLSearchParams('limit=0'))
 * // { status: 400, messages: [{ message: 'Invalid parameter: limit' }] }
 */
export function checkMirrorRequest(
  route: MirrorRouteName,
  pathParams: Record<string, string>,
  query: URLSearchParams,
  options: MirrorValidationOptions = {},
): MirrorRejection | null {
  return ROUTE_CHECKS[route](pathIdOf(route, pathParams), query, limitCheck(options), options.strictTimestamp !== false)
}

// One check per limit setting (they come from config), so the checks tables built on it are reused.
const limitChecks = new Map<string, ValueCheck>()

/** The `limit` value check for these options (one per setting, reused). */
export function limitCheck(options: MirrorValidationOptions): ValueCheck {
  const key = `${options.maxLimit ?? 100}\n${options.limitAboveMax === 'cap'}`
  let check = limitChecks.get(key)
  if (check === undefined) {
    const maxLimit = BigInt(options.maxLimit ?? 100)
    const capped = options.limitAboveMax === 'cap'
    check = (_op, v) => isPositiveLong(v) && (capped || BigInt(v) <= maxLimit)
    limitChecks.set(key, check)
  }
  return check
}

/**
 * The mirror's error messages for this request, in its order; empty when the request is valid.
 * @example
 * validateMirrorRequest('transactions.get', { transactionId: '0.0.10-1-x' }, new URLSearchParams())
 * // ['Invalid Transaction id. Please use "shard.realm.num-sss-nnn" format where sss are seconds and nnn are nanoseconds']
 */
export function validateMirrorRequest(
  route: MirrorRouteName,
  pathParams: Record<string, string>,
  query: URLSearchParams,
  options?: MirrorValidationOptions,
): string[] {
  return checkMirrorRequest(route, pathParams, query, options)?.messages.map((m) => m.message) ?? []
}

/**
 * The mirror's error body. @example mirrorErrorBody(['Not found']) // {"_status":{"messages":[{"message":"Not found"}]}}
 */
export function mirrorErrorBody(messages: ReadonlyArray<string | MirrorMessage>): { _status: { messages: MirrorMessage[] } } {
  return { _status: { messages: messages.map((m) => (typeof m === 'string' ? { message: m } : { ...m })) } }
}

/** Parameters where a later value overrides an earlier one upstream, so their order is meaning. */
const ORDER_SENSITIVE = new Set(['balance', 'encoding', 'limit', 'nonce', 'order', 'result', 'scheduled', 'transactions'])

/**
 * A canonical query string for cache keys: keys lower-cased and sorted, `order`/`result` values
 * lower-cased, values of set-like parameters sorted, percent-encoded. Two queries get the same
 * string only when the node treats them alike (it lower-cases keys and those two values itself).
 * @example normaliseQuery(new URLSearchParams('order=DESC&Account.id=2&account.id=1')) // 'account.id=1&account.id=2&order=desc'
 */
export function normaliseQuery(query: URLSearchParams): string {
  const { params } = groupMirrorQuery(query)
  const pairs: string[] = []
  for (const key of [...params.keys()].sort()) {
    const values = ORDER_SENSITIVE.has(key) ? params.get(key)! : [...params.get(key)!].sort()
    for (const value of values) pairs.push(`${encodeURIComponent(key)}=${encodeURIComponent(value)}`)
  }
  return pairs.join('&')
}
