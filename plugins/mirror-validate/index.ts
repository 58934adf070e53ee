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
import { GatewayError } from '../../core/errors.ts'
import type { PluginDefinition, RequestContext } from '../../core/plugin.ts'
import { MIRROR_ROUTES, type MirrorRouteName } from './routes.ts'
import { checkMirrorRequest, type MirrorValidationOptions } from './rules.ts'
import { MIRROR_MESSAGES, mirrorErrorFormat } from './error-format.ts'
import { capLimit } from './limit-cap.ts'

export interface MirrorValidateConfig {
  route: MirrorRouteName
  maxLimit: number
  limitAboveMax: 'reject' | 'cap'
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
        enum: Object.keys(MIRROR_ROUTES),
        description: 'Which mirror-node REST route this gateway route serves (its parameter rules and message texts).',
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
        description: '`reject`: a `limit` above maxLimit is 400 `Invalid parameter: limit`; `cap`: it is accepted and sent upstream as maxLimit, as the real node caps.',
      },
    },
  },
  errorFormats: { mirror: mirrorErrorFormat },
  create(config, init) {
    const { route } = config
    const params = new Set(init.routeParams)
    const wanted = MIRROR_ROUTES[route].pathParamNames
    if (wanted.length > 0 && params.size === 0) {
      throw new Error(`route ${route} needs a path parameter for its id (e.g. :${wanted[0]}), and the route path ${init.route.path} has none`)
    }
    const options: MirrorValidationOptions = { maxLimit: config.maxLimit, limitAboveMax: config.limitAboveMax }
    // The node caps at 100 itself; below that, the gateway must cap what it sends.
    const capUpstream = config.limitAboveMax === 'cap' && config.maxLimit < NODE_MAX_LIMIT
    return {
      request(ctx: RequestContext) {
        const rejection = checkMirrorRequest(route, ctx.params, ctx.query, options)
        if (rejection) {
          const code = rejection.status === 404 ? 'not_found' : 'invalid_parameter'
          const message = rejection.messages.map((m) => (m.detail ? `${m.message}: ${m.detail}` : m.message)).join('; ')
          throw new GatewayError(rejection.status, code, message, { detail: { [MIRROR_MESSAGES]: rejection.messages } })
        }
        if (capUpstream) {
          const capped = capLimit(ctx.query, config.maxLimit)
          if (capped !== undefined) ctx.upstreamQuery = capped
        }
      },
    }
  },
}

export default mirrorValidate
