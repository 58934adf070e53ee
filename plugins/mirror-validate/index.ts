/**
 * `mirror-validate`: checks a mirror-node REST request before any byte of it goes upstream, and
 * refuses it exactly as the real node would (same status, texts and order; see rules.ts). It also
 * contributes the `mirror` error format, so gateway-made errors on mirror routes use the node's
 * `{"_status":{"messages":[...]}}` envelope.
 *
 * A refusal is a GatewayError (400 `invalid_parameter`, or 404 `not_found` for a topic id the
 * node's router would not match), so credit-meter refunds it like any other gateway refusal.
 *
 * ```yaml
 * - name: mirror-mainnet-accounts-get
 *   path: /ledger/mainnet/api/v1/accounts/:id
 *   rewrite: /accounts/:id
 *   upstream: mirror-mainnet
 *   errorFormat: mirror
 *   plugins:
 *     - { name: mirror-validate, config: { route: accounts.get } }
 * ```
 */
import { GatewayError } from '../../core/proxy/plugin-api.ts'
import type { PluginDefinition, RequestContext } from '../../core/proxy/plugin-api.ts'
import { MIRROR_ROUTES, type MirrorRouteName } from './routes.ts'
import { checkMirrorRequest, type MirrorValidationOptions } from './rules.ts'
import { MIRROR_MESSAGES, mirrorErrorFormat } from './error-format.ts'
import { capLimit } from './limit-cap.ts'
import { checkMirrorOperation } from './operation-check.ts'
import { checkContractCall } from './contract-call.ts'
import type { CacheClass } from './openapi-routes.ts'

export interface MirrorValidateConfig {
  route: MirrorRouteName | 'auto' | 'contracts.call'
  maxLimit: number
  limitAboveMax: 'reject' | 'cap'
  strictTimestamp: boolean
  cacheSeconds: Partial<Record<CacheClass, number>>
}

/** ctx.state key response-cache reads for a class TTL (see its README). */
const CACHE_TTL_STATE = 'cache.ttlSeconds'

/** The API path's segments from the route's rewrite (`/*rest`, `/contracts/results/:id/opcodes`) and the request's params. */
function apiSegments(rewrite: string): (params: Readonly<Record<string, string>>) => string[] {
  const parts = rewrite.split('/').filter(Boolean)
  return (params) =>
    parts.flatMap((part) => {
      if (part.startsWith('*')) return params[part.slice(1)] ? params[part.slice(1)].split('/') : []
      return part.startsWith(':') ? [params[part.slice(1)] ?? ''] : [part]
    })
}

function refuse(rejection: { status: number; messages: { message: string; detail?: string }[] }): never {
  const code = rejection.status === 404 ? 'not_found' : 'invalid_parameter'
  const message = rejection.messages.map((m) => (m.detail ? `${m.message}: ${m.detail}` : m.message)).join('; ')
  throw new GatewayError(rejection.status, code, message, { detail: { [MIRROR_MESSAGES]: rejection.messages } })
}

const NODE_MAX_LIMIT = 100

const mirrorValidate: PluginDefinition<MirrorValidateConfig> = {
  name: 'mirror-validate',
  version: '1.0.0',
  priority: 800,
  configSchema: {
    type: 'object',
    additionalProperties: false,
    required: ['route'],
    properties: {
      route: {
        enum: ['auto', 'contracts.call', ...Object.keys(MIRROR_ROUTES)],
        description:
          'Which mirror-node REST route this gateway route serves (its parameter rules and message texts). ' +
          '`auto`: any route of the API, found from the path in the route\'s final `*param` (e.g. `/ledger/mainnet/api/v1/*rest`); ' +
          'a path the API does not have is the node\'s 404. `contracts.call`: the JSON body of POST /contracts/call.',
      },
      cacheSeconds: {
        type: 'object',
        additionalProperties: false,
        default: { immutable: 3600, none: 0 },
        description:
          'With `auto`: seconds response-cache keeps an answer, per route class, when the upstream declares no max-age ' +
          '(or always, with the cache\'s followUpstream: false); still capped by its maxTtlSeconds. A class left out keeps the upstream\'s own max-age (the node sends 1-600 s).',
        properties: {
          immutable: { type: 'number', minimum: 0, description: 'Records that never change once they exist: a transaction, a block, a contract result, a topic message.' },
          current: { type: 'number', minimum: 0, description: 'The current state of one entity or of the network (an account, a token, the supply).' },
          latest: { type: 'number', minimum: 0, description: 'Lists whose first page shows the newest records (transactions, blocks, messages).' },
          none: { type: 'number', minimum: 0, description: 'Simulations and estimates; 0 keeps them out of the cache.' },
        },
      },
      maxLimit: {
        type: 'integer',
        minimum: 1,
        maximum: 9007199254740991,
        default: NODE_MAX_LIMIT,
        description: 'Largest accepted `limit` (the spec range is 1-100).',
      },
      limitAboveMax: {
        enum: ['reject', 'cap'],
        default: 'reject',
        description: '`reject`: a `limit` above maxLimit is 400 `Invalid parameter: limit`; `cap`: it is accepted and sent upstream as maxLimit, as the real node caps (list routes and single-entity routes that list, e.g. /accounts/{id}).',
      },
      strictTimestamp: {
        type: 'boolean',
        default: true,
        description:
          "The node's `query.strictTimestampParam` (true as the node ships). true: on /accounts/{id} and /transactions, repeated gt/gte or lt/lte on `timestamp`, or eq with a range, is 400 as the node answers. " +
          'false: accepted, as a node configured with strictTimestampParam: false does (those two handlers call parseTimestampFilters without their own strict override).',
      },
    },
  },
  errorFormats: { mirror: mirrorErrorFormat },
  needs: (config) => (config.route === 'contracts.call' ? { body: 'json', contentTypes: ['application/json'] } : {}),
  create(config, init) {
    const { route } = config
    const options: MirrorValidationOptions = { maxLimit: config.maxLimit, limitAboveMax: config.limitAboveMax, strictTimestamp: config.strictTimestamp }
    // The node caps at 100 itself; below that, the gateway must cap what it sends.
    const capUpstream = config.limitAboveMax === 'cap' && config.maxLimit < NODE_MAX_LIMIT
    const capQuery = (ctx: RequestContext) => {
      if (!capUpstream) return
      const capped = capLimit(ctx.query, config.maxLimit)
      if (capped !== undefined) ctx.upstreamQuery = capped
    }
    if (route === 'contracts.call') {
      return {
        body(ctx: RequestContext) {
          const rejection = checkContractCall(ctx.body?.json)
          if (rejection) refuse(rejection)
        },
      }
    }
    if (route === 'auto') {
      if (!init.route.rewrite) throw new Error('route auto needs the route\'s `rewrite`: the path below the mirror\'s /api/v1 (e.g. /*rest)')
      const segmentsOf = apiSegments(init.route.rewrite)
      return {
        request(ctx: RequestContext) {
          const segments = segmentsOf(ctx.params)
          const { operation, rejection } = checkMirrorOperation(ctx.method, segments, ctx.query, options)
          if (rejection) refuse(rejection)
          const ttl = config.cacheSeconds[operation!.cache]
          if (ttl !== undefined) ctx.state.set(CACHE_TTL_STATE, ttl)
          capQuery(ctx)
        },
      }
    }
    const params = new Set(init.routeParams)
    const wanted = MIRROR_ROUTES[route].pathParamNames
    if (wanted.length > 0 && params.size === 0) {
      throw new Error(`route ${route} needs a path parameter for its id (e.g. :${wanted[0]}), and the route path ${init.route.path} has none`)
    }
    return {
      request(ctx: RequestContext) {
        const rejection = checkMirrorRequest(route, ctx.params, ctx.query, options)
        if (rejection) refuse(rejection)
        capQuery(ctx)
      },
    }
  },
}

export default mirrorValidate
