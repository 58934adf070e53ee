/**
 * Filters, ordering and `links.next` for the stand-in mirror node, following the real node's
 * rules (REST module `utils.js`: getLimitParamValue, getPaginationLink, updateReqQuery,
 * isEmptyRange): `limit` defaults to 25 and is capped at 100; a page that comes back full carries
 * a relative next link that echoes the query as received (keys lower-cased, values raw) and adds
 * or replaces the cursor (`gt:` when ascending, `lt:` when descending); a page that is not full,
 * or whose next range would be empty, gets `next: null`.
 */
import { groupMirrorQuery, splitFromRight, timestampToNanos, type QueryFilter } from '../../plugins/mirror-validate/query.ts'
import { parseEntityId } from '../../plugins/mirror-validate/entity-id.ts'

export interface ListQuery {
  params: Map<string, string[]>
  filters: QueryFilter[]
  limit: number
  order: 'asc' | 'desc'
}

const DEFAULT_LIMIT = 25
const MAX_LIMIT = 100

/** Reads a (validated) query: the last `limit` and `order` win, as upstream. */
export function readListQuery(query: URLSearchParams, defaultOrder: 'asc' | 'desc'): ListQuery {
  const { params } = groupMirrorQuery(query)
  const filters = [...params].flatMap(([key, values]) => values.map((value) => splitFromRight(key, value)))
  const last = (key: string) => filters.filter((f) => f.key === key).at(-1)?.value
  const limit = Math.min(Number(last('limit') ?? DEFAULT_LIMIT), MAX_LIMIT)
  const order = last('order') === 'asc' || last('order') === 'desc' ? (last('order') as 'asc' | 'desc') : defaultOrder
  return { params, filters, limit, order }
}

/** Compares with a mirror operator (`eq` `ne` `gt` `gte` `lt` `lte`). */
export function compare(op: string, actual: bigint, wanted: bigint): boolean {
  switch (op) {
    case 'gt': return actual > wanted
    case 'gte': return actual >= wanted
    case 'lt': return actual < wanted
    case 'lte': return actual <= wanted
    case 'ne': return actual !== wanted
    default: return actual === wanted
  }
}

/** The entity num a filter value names, or `null` for an opaque EVM address. */
export function entityNum(value: string): bigint | null {
  const parts = parseEntityId(value)
  return parts?.num === null || parts === null ? null : BigInt(parts.num)
}

/** Every filter on `key` holds for `actual` (filters on other keys are ignored). */
export function allMatch(filters: QueryFilter[], key: string, actual: bigint, read: (value: string) => bigint | null): boolean {
  return filters.filter((f) => f.key === key).every((f) => {
    const wanted = read(f.value)
    return wanted !== null && compare(f.op, actual, wanted)
  })
}

/** Sorts by a bigint key in the requested order and cuts one page. */
export function page<T>(rows: T[], key: (row: T) => bigint, list: ListQuery): T[] {
  const sorted = [...rows].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0))
  if (list.order === 'desc') sorted.reverse()
  return sorted.slice(0, list.limit)
}

function cursorNumber(field: string, value: string): bigint | null {
  if (field === 'timestamp') return /^\d{1,10}(\.\d{1,9})?$/.test(value) ? timestampToNanos(value) : null
  return entityNum(value)
}

function isEmptyRange(field: string, values: string[]): boolean {
  let lower: bigint | null = null
  let upper: bigint | null = null
  for (const text of values) {
    const { op, value } = splitFromRight(field, text)
    const number = cursorNumber(field, value)
    if (number === null || !/^[gl]te?$/.test(op) || !/^[gl]te?:/.test(text)) continue
    if (op.startsWith('g')) {
      const bound = op === 'gt' ? number + 1n : number
      lower = lower === null || bound > lower ? bound : lower
    } else {
      const bound = op === 'lt' ? number - 1n : number
      upper = upper === null || bound < upper ? bound : upper
    }
  }
  return lower !== null && upper !== null && upper < lower
}

/**
 * The relative next link of a page, or `null`.
 * @example nextLink('/api/v1/accounts', list, 2, 'account.id', '0.0.1002') // '/api/v1/accounts?limit=2&account.id=gt:0.0.1002'
 */
export function nextLink(path: string, list: ListQuery, rowCount: number, field: string, lastValue: string | undefined): string | null {
  if (rowCount !== list.limit || lastValue === undefined) return null
  const params = new Map<string, string[]>([...list.params].map(([key, values]) => [key, [...values]]))
  const replaced = list.order === 'asc' ? /gt[e]?:/ : /lt[e]?:/
  const insert = `${list.order === 'asc' ? 'gt' : 'lt'}:${lastValue}`
  const original = params.get(field)
  if (original === undefined) params.set(field, [insert])
  else {
    const kept = original.filter((value) => !replaced.test(value))
    if (original.length === 1 && kept.length === 0) {
      params.delete(field)
      params.set(field, [insert])
    } else if (/^[gl]t[e]?:/.test(original.join(','))) {
      params.set(field, [...kept, insert])
    } else {
      params.set(field, kept)
    }
  }
  if (isEmptyRange(field, params.get(field)!)) return null
  const pairs = [...params].flatMap(([key, values]) => values.map((value) => `${key}=${value}`))
  return `${path.replace(/\/$/, '')}${pairs.length > 0 ? '?' + pairs.join('&') : ''}`
}
