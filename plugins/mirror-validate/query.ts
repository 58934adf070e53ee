/**
 * Reads a query string the way the mirror node's REST module does before validating it (facts
 * from its `middleware/requestHandler.js`, express 5 + qs 6 with `arrayLimit` 100, and
 * `utils.js::buildFilters`):
 * - keys are lower-cased and values of keys that differ only in case are merged;
 * - key order is JavaScript object order: array-index keys (`0`, `17`) first, ascending, then the
 *   others in order of first appearance; this order decides the order of error messages;
 * - keys named like `Object.prototype` members (`constructor`, `toString`) are dropped by qs;
 * - `key[]` and `key[3]` (index up to 100) are qs array syntax for `key`; any other `key[x]` makes
 *   `key` an object, which the node's filter builder cannot read (it answers 500): the gateway answers
 *   400 `Invalid parameter: key` instead; `key[x][y]` is deeper than the node's qs depth of 1, which
 *   it refuses with 400 `Input depth exceeded depth option of 1 and strictDepth is true`;
 * - `order` and `result` values are lower-cased (the mirror canonicalises exactly these two).
 */

/** A query parameter value split into operator and value, e.g. `gte:10` -> `{ op: 'gte', value: '10' }`. */
export interface QueryFilter {
  key: string
  op: string
  value: string
}

export interface ParsedMirrorQuery {
  /** Lower-cased key -> every value, in the mirror's key order. */
  params: Map<string, string[]>
  /** Set when qs itself refuses the query string (too many parameters or repeated values). */
  parseError?: string
}

/** The mirror's `query.maxRepeatedQueryParameters` and qs's `parameterLimit`. */
export const MAX_REPEATED_VALUES = 100
const MAX_PARAMETERS = 1000

const CANONICAL_LOWER_CASE = new Set(['order', 'result'])
/** qs's bracket groups after the root of a key. */
const BRACKETS = /\[([^[\]]*)\]/g
const DEPTH_EXCEEDED = 'Input depth exceeded depth option of 1 and strictDepth is true'

type KeyShape = { root: string; kind: 'plain' | 'array' | 'object' | 'too-deep' }

/** How qs (depth 1, arrayLimit 100, strictDepth) reads a raw key. */
function keyShape(rawKey: string): KeyShape {
  const open = rawKey.indexOf('[')
  // qs keeps a key whose first bracket starts it as a plain key.
  if (open <= 0) return { root: rawKey, kind: 'plain' }
  const groups = [...rawKey.slice(open).matchAll(BRACKETS)]
  if (groups.length === 0) return { root: rawKey, kind: 'plain' }
  const root = rawKey.slice(0, open)
  if (groups.length > 1) return { root, kind: 'too-deep' }
  const inner = groups[0][1]
  const isIndex = inner === '' || (/^(0|[1-9]\d*)$/.test(inner) && Number(inner) <= MAX_REPEATED_VALUES)
  return { root, kind: isIndex ? 'array' : 'object' }
}

function isArrayIndex(key: string): boolean {
  return /^(0|[1-9]\d*)$/.test(key) && Number(key) < 2 ** 32 - 1
}

function inObjectOrder<T>(map: Map<string, T>): Map<string, T> {
  const keys = [...map.keys()]
  const indexKeys = keys.filter(isArrayIndex).sort((a, b) => Number(a) - Number(b))
  const ordered = new Map<string, T>()
  for (const key of [...indexKeys, ...keys.filter((k) => !isArrayIndex(k))]) ordered.set(key, map.get(key)!)
  return ordered
}

/**
 * Groups a query by key the way qs and the mirror's parser do, without the mirror's limits:
 * lower-cased keys in the mirror's key order, prototype-named keys dropped, `order` and `result`
 * values lower-cased. Returns the groups and how many raw pairs the query had per raw key.
 */
export function groupMirrorQuery(query: URLSearchParams): {
  params: Map<string, string[]>
  rawCounts: number[]
  total: number
  /** Lower-cased keys qs turned into objects (`key[x]=`), in query order. */
  nested: string[]
  /** A key deeper than qs's depth 1 (`key[x][y]=`). */
  tooDeep: boolean
} {
  const raw = new Map<string, string[]>()
  const nested: string[] = []
  let tooDeep = false
  let total = 0
  for (const [rawKey, value] of query) {
    total++
    const { root: key, kind } = keyShape(rawKey)
    if (key === '' || Object.prototype.hasOwnProperty.call(Object.prototype, key)) continue
    if (kind === 'too-deep') tooDeep = true
    if (kind === 'object' || kind === 'too-deep') {
      if (!nested.includes(key.toLowerCase())) nested.push(key.toLowerCase())
      continue
    }
    const values = raw.get(key) ?? []
    values.push(value)
    raw.set(key, values)
  }
  const params = new Map<string, string[]>()
  for (const [key, values] of inObjectOrder(raw)) {
    const lower = key.toLowerCase()
    const canonical = CANONICAL_LOWER_CASE.has(lower) ? values.map((v) => v.toLowerCase()) : values
    params.set(lower, [...(params.get(lower) ?? []), ...canonical])
  }
  return { params: inObjectOrder(params), rawCounts: [...raw.values()].map((v) => v.length), total, nested, tooDeep }
}

/**
 * Groups a query the mirror's way and applies qs's limits (1000 pairs, 100 values per raw key).
 * @example parseMirrorQuery(new URLSearchParams('Limit=5&order=DESC')).params // Map { 'limit' => ['5'], 'order' => ['desc'] }
 */
export function parseMirrorQuery(query: URLSearchParams): ParsedMirrorQuery {
  const { params, rawCounts, total, nested, tooDeep } = groupMirrorQuery(query)
  if (total > MAX_PARAMETERS) {
    return { params: new Map(), parseError: `Parameter limit exceeded. Only ${MAX_PARAMETERS} parameters allowed.` }
  }
  if (rawCounts.some((count) => count > MAX_REPEATED_VALUES)) {
    return { params: new Map(), parseError: `Array limit exceeded. Only ${MAX_REPEATED_VALUES} elements allowed in an array.` }
  }
  if (tooDeep) return { params: new Map(), parseError: DEPTH_EXCEEDED }
  // The node's filter builder throws on the first object value (a 500 there); a client mistake is a 400 here.
  if (nested.length > 0) return { params: new Map(), parseError: `Invalid parameter: ${nested[0]}` }
  return { params }
}

/** `op:value` read from the right, as most mirror handlers do: `gt:lt:5` is `lt` `5`. */
export function splitFromRight(key: string, text: string): QueryFilter {
  const pieces = text.split(':')
  const value = pieces.pop()!
  return { key, op: pieces.pop() ?? 'eq', value }
}

/** `op:value` as the older validator reads it: more than one colon makes the value invalid (`null`). */
export function splitStrict(key: string, text: string): QueryFilter | null {
  const pieces = text.split(':')
  if (pieces.length === 1) return { key, op: 'eq', value: pieces[0] }
  if (pieces.length === 2) return { key, op: pieces[0], value: pieces[1] }
  return null
}

const OPERATORS = new Set(['eq', 'ne', 'gt', 'gte', 'lt', 'lte'])
const MAX_LONG = 2n ** 63n - 1n

/** One of the six operators, case-sensitive as upstream. */
export function isOperator(op: string): boolean {
  return OPERATORS.has(op)
}

/** 1..2^63-1 (or 0.. with `allowZero`), at most 19 digits, no sign. */
export function isPositiveLong(value: string, allowZero = false): boolean {
  if (!/^\d{1,19}$/.test(value)) return false
  const number = BigInt(value)
  return number >= (allowZero ? 0n : 1n) && number <= MAX_LONG
}

/** `seconds` or `seconds.nanos`: up to 10 and 9 digits. */
export function isTimestamp(value: string): boolean {
  return /^\d{1,10}(\.\d{1,9})?$/.test(value)
}

/** Seconds.nanos text to integer nanoseconds (`'5.1'` -> 5100000000n). */
export function timestampToNanos(value: string): bigint {
  const [seconds, nanos = ''] = value.split('.')
  return BigInt(seconds) * 1_000_000_000n + BigInt((nanos + '000000000').slice(0, 9))
}

/** `true`/`false` in any case, with the `eq` operator only. */
export function isBooleanFilter(op: string, value: string): boolean {
  return op === 'eq' && /^(true|false)$/i.test(value)
}

/** ED25519 (64 hex), ECDSA (66 hex) or DER-encoded ED25519 (88 hex), optional `0x`. */
export function isPublicKey(value: string): boolean {
  return /^(0x)?([0-9a-fA-F]{64}|[0-9a-fA-F]{66}|[0-9a-fA-F]{88})$/.test(value)
}

/** `base64`, `utf-8` or `utf8`, any case. */
export function isEncoding(value: string): boolean {
  const lower = value.toLowerCase()
  return lower === 'base64' || /^utf-?8$/.test(lower)
}

/** 0..2^31-1, at most 10 digits. */
export function isNonNegativeInt32(value: string): boolean {
  return /^\d{1,10}$/.test(value) && Number(value) <= 2 ** 31 - 1
}

/** Case-insensitive membership. */
export function isOneOf(value: string, allowed: readonly string[]): boolean {
  return allowed.includes(value.toLowerCase())
}
