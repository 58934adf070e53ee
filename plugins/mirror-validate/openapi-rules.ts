/**
 * Validation of the mirror operations beyond the eight hand-written routes (rules.ts), driven by
 * the pinned OpenAPI document and corrected by the node's handlers where they differ from it
 * (facts from the REST module's `utils.js::filterValidityChecks`, `validateReq`, the controllers'
 * `Bound` parsing and path checks; rest-java binds by type and ignores unknown keys). Re-implemented.
 *
 * Order, as the node: for `in-order` handlers the query (older validator), then the path; for
 * `filters` handlers the path, then the query (counts, bad values, unknown keys), then bounds.
 */
import { isValidEntityId, parseAccountAlias, parseEntityId } from './entity-id.ts'
import type { ParamSchema } from './openapi-compile.ts'
import type { OperationMatch } from './openapi-routes.ts'
import { isTransactionHash, parseTransactionId } from './transaction-id.ts'
import { checkAsFilters, checkInQueryOrder, commonChecks, invalid, type Checks, type ValueCheck } from './checks.ts'
import {
  isBooleanFilter, isOneOf, isPositiveLong, isPublicKey, isTimestamp, parseMirrorQuery,
  type QueryFilter,
} from './query.ts'
import type { MirrorRejection } from './rules.ts'

const ETH_OR_HEDERA_HASH = /^(0x)?([0-9A-Fa-f]{64}|[0-9A-Fa-f]{96})$/
const ETH_HASH = /^(0x)?[0-9A-Fa-f]{64}$/
const TOPIC = /^(0x)?[0-9A-Fa-f]{1,64}$/
const TOKEN_TYPES = ['all', 'fungible_common', 'non_fungible_unique']

const reject = (...messages: string[]): MirrorRejection => ({ status: 400, messages: messages.map((message) => ({ message })) })

/** Path parameters: the check and the name the node's error text uses. */
const PATH_CHECKS: Record<string, { name: string; ok: (value: string) => boolean | string }> = {
  idOrAliasOrEvmAddress: {
    name: 'idOrAliasOrEvmAddress',
    ok: (v) => (isValidEntityId(v) ? parseEntityId(v) !== null : parseAccountAlias(v) !== null),
  },
  hashOrNumber: { name: 'hashOrNumber', ok: (v) => ETH_OR_HEDERA_HASH.test(v) || isPositiveLong(v, true) },
  contractIdOrAddress: { name: 'contractid', ok: (v) => isValidEntityId(v) && parseEntityId(v) !== null },
  transactionIdOrHash: {
    name: 'transactionIdOrHash',
    // A malformed id fails with the transaction id text itself, not `Invalid parameter`.
    ok: (v) => {
      if (ETH_HASH.test(v)) return true
      const parsed = parseTransactionId(v)
      return 'error' in parsed ? parsed.error : true
    },
  },
  timestamp: { name: 'timestamp', ok: isTimestamp },
  scheduleId: { name: 'scheduleid', ok: (v) => isValidEntityId(v, 'none') && parseEntityId(v) !== null },
  tokenId: { name: 'tokenid', ok: (v) => parseEntityId(v, 'num-alias') !== null },
  serialNumber: { name: 'serialnumber', ok: (v) => isPositiveLong(v) },
  topicId: { name: 'topic.id', ok: (v) => isValidEntityId(v, 'none') && parseEntityId(v) !== null },
  sequenceNumber: { name: 'sequencenumber', ok: (v) => isPositiveLong(v) },
  hookId: { name: 'hookId', ok: (v) => /^\d{1,19}$/.test(v) && BigInt(v) <= 2n ** 63n - 1n },
  transactionId: { name: 'transactionId', ok: (v) => isTransactionHash(v) || !('error' in parseTransactionId(v)) },
}

/** `/topics/messages/{timestamp}` names its path parameter differently. */
const PATH_NAME_BY_OPERATION: Record<string, Record<string, string>> = {
  getTopicMessageByTimestamp: { timestamp: 'consensus_timestamp' },
}

const eqOnly = (check: (v: string) => boolean): ValueCheck => (op, v) => op === 'eq' && check(v)
const basic = new Set(['eq', 'gt', 'gte', 'lt', 'lte'])

/** The REST module's per-key value checks beyond the eight routes' (utils.js filterValidityChecks). */
const handlerChecks = (limit: ValueCheck): Checks => ({
  ...commonChecks(limit),
  'block.hash': eqOnly((v) => ETH_OR_HEDERA_HASH.test(v)),
  'block.number': (op, v) => basic.has(op) && (isPositiveLong(v, true) || (/^0x[0-9a-fA-F]+$/.test(v) && Number.parseInt(v, 16) <= Number.MAX_SAFE_INTEGER)),
  'contract.id': (op, v) => (/^(\d{1,4}\.)?(\d{1,5}\.)?(0x)?[A-Fa-f0-9]{40}$/.test(v) ? op === 'eq' : isValidEntityId(v, 'none')),
  from: (_op, v) => isValidEntityId(v, 'any'),
  hbar: isBooleanFilter,
  index: (_op, v) => /^\d+$/.test(v),
  internal: isBooleanFilter,
  publickey: (_op, v) => isPublicKey(v),
  'schedule.id': (_op, v) => isValidEntityId(v),
  serialnumber: (_op, v) => isPositiveLong(v),
  slot: (op, v) => basic.has(op) && TOPIC.test(v),
  'spender.id': (_op, v) => isValidEntityId(v),
  'token.id': (_op, v) => isValidEntityId(v, 'num-alias'),
  topic0: eqOnly((v) => TOPIC.test(v)),
  topic1: eqOnly((v) => TOPIC.test(v)),
  topic2: eqOnly((v) => TOPIC.test(v)),
  topic3: eqOnly((v) => TOPIC.test(v)),
  'transaction.index': (op, v) => op === 'eq' && isPositiveLong(v, true),
  'transaction.hash': eqOnly((v) => ETH_OR_HEDERA_HASH.test(v)),
  // On /tokens `type` is a token type; on /transactions credit or debit (commonChecks).
  type: (_op, v) => isOneOf(v, TOKEN_TYPES),
})

const memo = new WeakMap<ValueCheck, Checks>()
function checksFor(limit: ValueCheck): Checks {
  let checks = memo.get(limit)
  if (!checks) memo.set(limit, (checks = handlerChecks(limit)))
  return checks
}

/** A value check from the OpenAPI schema alone (rest-java keys the REST module does not know). */
export function schemaCheck(schema: ParamSchema): (text: string) => boolean {
  const item = schema.type === 'array' && schema.items ? schema.items : schema
  const pattern = item.pattern ? new RegExp(item.pattern) : undefined
  const allowed = item.enum?.map((v) => v.toLowerCase())
  return (text) => {
    if (allowed && !allowed.includes(text.toLowerCase())) return false
    if (pattern && !pattern.test(text)) return false
    if (item.type === 'boolean') return /^(true|false)$/i.test(text)
    if (item.type === 'integer') {
      if (!/^-?\d{1,19}$/.test(text)) return false
      const value = BigInt(text)
      if (item.minimum !== undefined && value < BigInt(Math.ceil(item.minimum))) return false
      if (item.maximum !== undefined && item.maximum < 2 ** 53 && value > BigInt(item.maximum)) return false
      return value <= 2n ** 63n - 1n
    }
    return true
  }
}

const schemaChecks = new WeakMap<ParamSchema, (text: string) => boolean>()
function checkBySchema(schema: ParamSchema, text: string): boolean {
  let check = schemaChecks.get(schema)
  if (!check) schemaChecks.set(schema, (check = schemaCheck(schema)))
  return check(text)
}

function pathRejection(match: OperationMatch): MirrorRejection | null {
  const bad: string[] = []
  const renamed = PATH_NAME_BY_OPERATION[match.operation.operationId] ?? {}
  for (const [param, value] of Object.entries(match.params)) {
    const rule = PATH_CHECKS[param]
    if (!rule) continue
    const outcome = rule.ok(value)
    if (typeof outcome === 'string') return reject(outcome)
    if (!outcome) bad.push(invalid(renamed[param] ?? rule.name))
  }
  return bad.length > 0 ? reject(...bad) : null
}

/** `Bound` parsing of the controllers: per key one eq, one gt/gte, one lt/lte, never ne; the first breach fails. */
export function boundRejection(filters: readonly QueryFilter[], keys: readonly string[]): MirrorRejection | null {
  for (const key of keys) {
    const seen = new Set<string>()
    for (const { op } of filters.filter((f) => f.key === key)) {
      const side = op === 'eq' ? 'eq' : op === 'gt' || op === 'gte' ? 'lower' : op === 'lt' || op === 'lte' ? 'upper' : 'ne'
      if (side === 'ne') return reject(`Not equal (ne) operator is not supported for ${key}`)
      if (seen.has(side)) {
        return reject(side === 'eq' ? `Only one equal (eq) operator is allowed for ${key}` : `Only one ${side === 'lower' ? 'gt/gte' : 'lt/lte'} operator is allowed for ${key}`)
      }
      seen.add(side)
    }
  }
  return null
}

/** rest-java binds only the keys it declares; a value that does not convert is `Invalid parameter: <key>`. */
function lenientRejection(match: OperationMatch, params: Map<string, string[]>): MirrorRejection | null {
  const bad: string[] = []
  for (const [key, values] of params) {
    const schema = match.operation.query.get(key)
    if (!schema) continue
    if (values.some((text) => !checkBySchema(schema, text))) bad.push(invalid(key))
  }
  return bad.length > 0 ? reject(...bad) : null
}

/**
 * How the node would refuse a request to an operation without hand-written rules, or `null`.
 * @example validateOperation(matchOperation('get', ['blocks', 'x'])!, new URLSearchParams(), limit)
 * // { status: 400, messages: [{ message: 'Invalid parameter: hashOrNumber' }] }
 */
export function validateOperation(match: OperationMatch, query: URLSearchParams, limit: ValueCheck): MirrorRejection | null {
  const { operation } = match
  const accepted = new Set(operation.query.keys())
  if (operation.walk === 'ignored') return pathRejection(match)
  const { params, parseError } = parseMirrorQuery(query)
  if (parseError) return reject(parseError)
  if (operation.walk === 'lenient') return pathRejection(match) ?? lenientRejection(match, params)
  const checks = checksFor(limit)
  if (operation.walk === 'in-order') {
    const outcome = checkInQueryOrder(params, accepted, checks)
    return outcome.messages.length > 0 ? reject(...outcome.messages) : pathRejection(match)
  }
  const fromPath = pathRejection(match)
  if (fromPath) return fromPath
  const outcome = checkAsFilters(params, accepted, checks)
  if (outcome.messages.length > 0) return reject(...outcome.messages)
  // The filter builder's dependency check, after the values passed.
  if (params.has('transaction.index') && !params.has('block.number') && !params.has('block.hash')) {
    return reject('Invalid parameter usage: transaction.index - transaction.index requires block.number or block.hash filter to be specified')
  }
  return operation.bounds ? boundRejection(outcome.filters, operation.bounds) : null
}

