/**
 * Reads a facilitator request: the `chain`, `network` and `endpoint` path segments (404 naming the
 * segment when unknown), the method the endpoint takes (405 with Allow), and for verify / settle
 * the JSON body (the route asks the core for the raw body, so GET and POST share one route and
 * the messages below are ours: the spec's "x402 request body is required" for an empty body).
 */
import { errors, GatewayError } from '../../core/proxy/plugin-api.ts'
import { isJsonMediaType, mediaType, parseJson } from '../../core/proxy/plugin-api.ts'
import type { RequestContext } from '../../core/proxy/plugin-api.ts'
import { bodyRequired } from './failures.ts'

export const PATH_CHAINS = ['ethereum', 'polygon', 'base', 'solana'] as const
export const PATH_NETWORKS = ['mainnet', 'testnet'] as const
export const ENDPOINTS = ['supported', 'verify', 'settle', 'health'] as const

export type Endpoint = (typeof ENDPOINTS)[number]

export interface FacilitatorTarget {
  chain: (typeof PATH_CHAINS)[number]
  network: (typeof PATH_NETWORKS)[number]
  endpoint: Endpoint
  /** `base/testnet` */
  label: string
}

const METHOD: Record<Endpoint, 'GET' | 'POST'> = { supported: 'GET', health: 'GET', verify: 'POST', settle: 'POST' }

function list(values: readonly string[]): string {
  return values.length === 2 ? `${values[0]} or ${values[1]}` : `${values.slice(0, -1).join(', ')} or ${values.at(-1)}`
}

function pick<T extends string>(segment: string, value: string | undefined, allowed: readonly T[]): T {
  if (value !== undefined && (allowed as readonly string[]).includes(value)) return value as T
  // The segment is quoted back truncated: it is the client's own input, but need not be echoed whole.
  const shown = JSON.stringify((value ?? '').slice(0, 64))
  throw new GatewayError(404, `unknown_${segment}`, `unknown ${segment} ${shown}; expected ${list(allowed)}`)
}

/**
 * The path segments and method of a facilitator request, checked.
 *
 * @example
 * ```ts
 * readTarget(ctx) // { chain: 'base', network: 'testnet', endpoint: 'verify', label: 'base/testnet' }
 * ```
 */
export function readTarget(ctx: RequestContext): FacilitatorTarget {
  const chain = pick('chain', ctx.params.chain, PATH_CHAINS)
  const network = pick('network', ctx.params.network, PATH_NETWORKS)
  const endpoint = pick('endpoint', ctx.params.endpoint, ENDPOINTS)
  const method = METHOD[endpoint]
  if (ctx.method !== method && !(method === 'GET' && ctx.method === 'HEAD')) {
    throw errors.methodNotAllowed(`${endpoint} takes ${method}, not ${ctx.method}`, { headers: { allow: method === 'GET' ? 'GET, HEAD' : 'POST' } })
  }
  return { chain, network, endpoint, label: `${chain}/${network}` }
}

/**
 * The JSON body of verify / settle: 400 `body_required` when empty, 415 when not JSON, 400
 * `invalid_json` when it does not parse.
 *
 * @example
 * ```ts
 * const body = readJsonBody(ctx) // { x402Version: 2, paymentPayload: {...}, paymentRequirements: {...} }
 * ```
 */
export function readJsonBody(ctx: RequestContext): unknown {
  const raw = ctx.body?.raw
  if (!raw || raw.toString('utf8').trim() === '') throw bodyRequired()
  const type = mediaType(ctx.headers['content-type'])
  if (!isJsonMediaType(type)) throw errors.unsupportedMediaType(`content-type must be application/json, got ${type || 'none'}`)
  return parseJson(raw)
}
