/**
 * One element of a `/prove-batch` body: `{"endpoint": "<name>", "payload": "<base64>"}`, where
 * `<name>` is a key of the handler's `endpoints` config (`prove`, `check`, `prove-tx`) and the
 * payload is the exact bytes a single request to that endpoint would carry, in standard base64.
 * Each payload is checked with the binary-validator's tag logic and the endpoint's configured tags.
 *
 * A bad element becomes that element's error; it never fails the batch.
 */
import { compileTaggedCheck, type TaggedPayloadSpec } from '../binary-validator/tagged-header.ts'

export interface EndpointSpec {
  /** Proof-server path the payload is posted to, e.g. `/prove`. */
  path: string
  /** What the payload must look like: the binary-validator config of the single-proof route. */
  validate: TaggedPayloadSpec
}

/** An element's failure, as answered in `results[i].error`. */
export interface ItemError {
  code: string
  message: string
  /** HTTP status the same failure would have as a single request. */
  status?: number
}

export type ParsedItem = { ok: true; endpoint: string; path: string; payload: Buffer } | { ok: false; error: ItemError }

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/
const MEMBERS = new Set(['endpoint', 'payload'])

/**
 * Builds the parser of one element for a batch field (`proofs`) and the configured endpoints.
 *
 * @example
 * ```ts
 * const parse = compileItemParser('proofs', { check: { path: '/check', validate: { tags: ['(proof-preimage-versioned,option(wrapped-ir))'] } } })
 * parse({ endpoint: 'check', payload: 'bWlkbmlnaHQ6' }, 0) // { ok: false, error: { code: 'invalid_tagged_header', ... } }
 * ```
 */
export function compileItemParser(field: string, endpoints: Record<string, EndpointSpec>): (item: unknown, index: number) => ParsedItem {
  const names = Object.keys(endpoints)
  const checks = new Map(names.map((name) => [name, { path: endpoints[name].path, check: compileTaggedCheck(endpoints[name].validate) }]))
  const choices = names.length === 1 ? names[0] : `${names.slice(0, -1).join(', ')} or ${names[names.length - 1]}`
  const invalid = (message: string): ParsedItem => ({ ok: false, error: { code: 'invalid_item', message, status: 400 } })

  return (item, index) => {
    const at = `${field}[${index}]`
    if (typeof item !== 'object' || item === null || Array.isArray(item)) return invalid(`${at} must be an object with endpoint and payload`)
    for (const key of Object.keys(item)) if (!MEMBERS.has(key)) return invalid(`${at} has an unknown member ${JSON.stringify(key)}`)
    const { endpoint, payload } = item as { endpoint?: unknown; payload?: unknown }
    const target = typeof endpoint === 'string' && Object.hasOwn(endpoints, endpoint) ? checks.get(endpoint) : undefined
    if (!target) return invalid(`${at}.endpoint must be one of ${choices}`)
    if (typeof payload !== 'string' || payload.length === 0 || payload.length % 4 !== 0 || !BASE64.test(payload)) {
      return invalid(`${at}.payload must be a non-empty standard base64 string`)
    }
    const bytes = Buffer.from(payload, 'base64')
    const problem = target.check(bytes)
    if (problem) return { ok: false, error: { code: problem.code, message: problem.message, status: 400 } }
    return { ok: true, endpoint: endpoint as string, path: target.path, payload: bytes }
  }
}
