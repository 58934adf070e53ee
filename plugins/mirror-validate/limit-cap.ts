/**
 * Caps `limit` values in a query that already passed validation, for `limitAboveMax: cap` with a
 * maximum below the node's own (the node would otherwise return up to its own 100 rows).
 */

/**
 * The query string with every `limit` above `max` replaced by `max`, or `undefined` when none is.
 * Keys match case-insensitively (the node lower-cases them); an `op:` prefix is kept.
 * @example capLimit(new URLSearchParams('limit=80&order=asc'), 50) // 'limit=50&order=asc'
 */
export function capLimit(query: URLSearchParams, max: number): string | undefined {
  let changed = false
  const out = new URLSearchParams()
  for (const [key, value] of query) {
    const colon = value.lastIndexOf(':')
    const number = value.slice(colon + 1)
    if (key.toLowerCase() === 'limit' && /^\d+$/.test(number) && BigInt(number) > BigInt(max)) {
      out.append(key, value.slice(0, colon + 1) + String(max))
      changed = true
    } else out.append(key, value)
  }
  return changed ? out.toString() : undefined
}
