/**
 * The mirror node's per-parameter value checks, accepted parameter sets per route, and its two
 * ways of walking a query (see rules.ts for the order they run in). Facts from the REST module's
 * `utils.js` (filterValidityChecks, validateReq, buildAndValidateFilters, parseTimestampFilters)
 * and `tokens.js`; re-implemented.
 */
import type { MirrorRouteName } from './routes.ts'
import { isValidEntityId, paddedEntityId, parseEntityId } from './entity-id.ts'
import { isTransactionType } from './transaction-types.ts'
import {
  MAX_REPEATED_VALUES, isBooleanFilter, isEncoding, isNonNegativeInt32, isOneOf, isOperator, isPositiveLong,
  isPublicKey, isTimestamp, splitFromRight, splitStrict, type QueryFilter,
} from './query.ts'

export type ValueCheck = (op: string, value: string) => boolean
export type Checks = Record<string, ValueCheck>

/** Builds a checks table once per limit check (see rules.ts: one per limit setting), not per request. */
function memoByLimit(build: (limit: ValueCheck) => Checks): (limit: ValueCheck) => Checks {
  const built = new WeakMap<ValueCheck, Checks>()
  return (limit) => {
    let checks = built.get(limit)
    if (checks === undefined) {
      checks = build(limit)
      built.set(limit, checks)
    }
    return checks
  }
}

/** Value checks of the common validator; every one also needs a known operator. */
export const commonChecks = memoByLimit((limit) => {
  return {
    'account.balance': (_op, v) => isPositiveLong(v, true),
    'account.id': (_op, v) => isValidEntityId(v),
    'account.publickey': (_op, v) => isPublicKey(v),
    balance: isBooleanFilter,
    encoding: (_op, v) => isEncoding(v),
    limit,
    nonce: (op, v) => op === 'eq' && isNonNegativeInt32(v),
    order: (_op, v) => isOneOf(v, ['asc', 'desc']),
    result: (_op, v) => isOneOf(v, ['success', 'fail']),
    scheduled: isBooleanFilter,
    sequencenumber: (_op, v) => isPositiveLong(v),
    timestamp: (_op, v) => isTimestamp(v),
    transactions: isBooleanFilter,
    transactiontype: (_op, v) => isTransactionType(v),
    // On /transactions `type` is credit or debit; /tokens has its own checks below.
    type: (_op, v) => isOneOf(v, ['credit', 'debit']),
  }
})

/** The /tokens handler's own value checks (also with a known operator). */
export const tokenListChecks = memoByLimit((limit) => {
  return {
    'account.id': (_op, v) => isValidEntityId(v),
    limit,
    name: (op, v) => op === 'eq' && Buffer.byteLength(v) >= 3 && Buffer.byteLength(v) <= 100,
    order: (_op, v) => isOneOf(v, ['asc', 'desc']),
    publickey: (_op, v) => isPublicKey(v),
    'token.id': (_op, v) => isValidEntityId(v, 'num-alias'),
    type: (_op, v) => isOneOf(v, ['all', 'fungible_common', 'non_fungible_unique']),
  }
})

export const TOKEN_INFO_CHECKS: Checks = {
  timestamp: (op, v) => ['eq', 'lt', 'lte'].includes(op) && isTimestamp(v),
}

export const ACCEPTED: Record<Exclude<MirrorRouteName, 'topics.get'>, ReadonlySet<string>> = {
  'accounts.list': new Set(['account.balance', 'account.id', 'account.publickey', 'balance', 'limit', 'order']),
  'accounts.get': new Set(['limit', 'order', 'timestamp', 'transactiontype', 'transactions']),
  'transactions.list': new Set(['account.id', 'limit', 'order', 'result', 'timestamp', 'transactiontype', 'type']),
  'transactions.get': new Set(['nonce', 'scheduled']),
  'tokens.list': new Set(['account.id', 'limit', 'name', 'order', 'publickey', 'token.id', 'type']),
  'tokens.get': new Set(['timestamp']),
  'topics.messages': new Set(['encoding', 'limit', 'order', 'sequencenumber', 'timestamp']),
}

export const invalid = (key: string) => `Invalid parameter: ${key}`
const unknown = (key: string) => `Unknown query parameter: ${key}`
const tooMany = (key: string, count: number) =>
  `Parameter values count exceeds maximum number allowed: ${key} count: ${count} max: ${MAX_REPEATED_VALUES}`

export interface QueryOutcome {
  messages: string[]
  filters: QueryFilter[]
}

/** The older validator used by `/accounts`: query order, unknown keys reported once, in place. */
export function checkInQueryOrder(params: Map<string, string[]>, accepted: ReadonlySet<string>, checks: Checks): QueryOutcome {
  const messages: string[] = []
  const filters: QueryFilter[] = []
  for (const [key, values] of params) {
    if (!accepted.has(key)) messages.push(unknown(key))
    else if (values.length > MAX_REPEATED_VALUES) messages.push(tooMany(key, values.length))
    else {
      for (const text of values) {
        const filter = splitStrict(key, text)
        if (filter && isOperator(filter.op) && checks[key](filter.op, filter.value)) filters.push(filter)
        else messages.push(invalid(key))
      }
    }
  }
  return { messages, filters }
}

/** The filter builder used by every other route: counts, then bad values, then unknown keys. */
export function checkAsFilters(
  params: Map<string, string[]>, accepted: ReadonlySet<string>, checks: Checks, needOperator = true,
): QueryOutcome {
  const counts: string[] = []
  const filters: QueryFilter[] = []
  for (const [key, values] of params) {
    if (values.length > MAX_REPEATED_VALUES) counts.push(tooMany(key, values.length))
    else for (const text of values) filters.push(splitFromRight(key, text))
  }
  const bad: string[] = []
  const strangers: string[] = []
  for (const { key, op, value } of filters) {
    if (!accepted.has(key)) strangers.push(unknown(key))
    else if ((needOperator && !isOperator(op)) || !checks[key](op, value)) bad.push(invalid(key))
  }
  return { messages: [...counts, ...bad, ...strangers], filters }
}

/** Ids in filters are parsed after validation; the first out-of-range one fails the request. */
export function entityParseError(filters: QueryFilter[]): string | null {
  for (const { key, value } of filters) {
    const evm = key === 'token.id' ? 'num-alias' : 'any'
    if ((key === 'account.id' || key === 'token.id') && !parseEntityId(value, evm)) {
      return `Invalid entity ID "${paddedEntityId(value)}"`
    }
  }
  return null
}

/** The node's strict timestamp rules for lists that allow `ne` (accounts/{id}, transactions). */
export function timestampRuleError(filters: QueryFilter[]): string | null {
  const count = (ops: string[]) => filters.filter((f) => f.key === 'timestamp' && ops.includes(f.op)).length
  const lower = count(['gt', 'gte'])
  const upper = count(['lt', 'lte'])
  if (lower > 1) return 'Multiple gt or gte operators not permitted for timestamp param'
  if (upper > 1) return 'Multiple lt or lte operators not permitted for timestamp param'
  if (count(['eq']) > 0 && lower + upper + count(['ne']) > 0) {
    return 'Cannot combine eq with ne, gt, gte, lt, or lte for timestamp param'
  }
  return null
}
