/**
 * Counts the items of a batch request: the length of the array at a dot path of the JSON body.
 * Anything else (no body, no such field, not an array, an empty array) counts as one item, so a
 * request always costs at least its base cost; rejecting a malformed batch is a validator's job.
 *
 * @example
 * ```ts
 * countItems({ proofs: [a, b, c] }, 'proofs')        // 3
 * countItems({ batch: { calls: [a] } }, 'batch.calls') // 1
 * countItems(undefined, 'proofs')                      // 1
 * ```
 */
export function countItems(json: unknown, path: string): number {
  let value: unknown = json
  for (const key of path.split('.')) {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return 1
    value = (value as Record<string, unknown>)[key]
  }
  return Array.isArray(value) && value.length > 0 ? value.length : 1
}
