/**
 * `key-in-path-auth`: the API key is a path segment (`/privnet/zkpaas/:apiKey/prove-tx`, the x402
 * and event-settings paths). The key's project must have the route's scope and, optionally, one of
 * its plans.
 *
 * The param is marked secret before anything else, so even a refused request logs `***` in its
 * place and never forwards it. At load, a route that would still put the key upstream (its
 * `rewrite` uses the param) or that has no such param is refused.
 *
 * ```yaml
 * - name: zkpaas-prove-tx
 *   methods: [POST]
 *   path: /privnet/zkpaas/:apiKey/prove-tx
 *   rewrite: /prove-tx
 *   upstream: proof-server
 *   plugins:
 *     - { name: key-in-path-auth, config: { param: apiKey, scope: zkpaas, plans: [enterprise] } }
 * ```
 */
import type { PluginDefinition } from '../../core/proxy/plugin-api.ts'
import { keyAuthenticator, keyAuthSchemaProperties, type KeyAuthConfig } from '../_shared/auth.ts'
import { rewriteUsesParam } from './rewrite.ts'

export interface KeyInPathAuthConfig extends KeyAuthConfig {
  param: string
}

const keyInPathAuth: PluginDefinition<KeyInPathAuthConfig> = {
  name: 'key-in-path-auth',
  version: '1.0.0',
  priority: 1250,
  configSchema: {
    type: 'object',
    additionalProperties: false,
    required: ['scope'],
    properties: {
      param: {
        type: 'string',
        pattern: '^[A-Za-z0-9_]+$',
        default: 'apiKey',
        description: 'Path param that carries the API key; it must be a param of the route path and absent from its rewrite.',
      },
      ...keyAuthSchemaProperties,
    },
  },
  create(config, init) {
    if (!init.routeParams.includes(config.param)) {
      const known = init.routeParams.length ? init.routeParams.map((p) => `:${p}`).join(', ') : 'none'
      throw new Error(`param "${config.param}" is not a param of the route path ${init.route.path} (its params: ${known})`)
    }
    if (init.route.rewrite !== undefined && rewriteUsesParam(init.route.rewrite, config.param)) {
      throw new Error(`the route's rewrite ${init.route.rewrite} would send the API key (:${config.param}) upstream; remove it from the rewrite`)
    }
    // Declared at load, so the key is redacted even if a plugin that runs before this one refuses.
    init.secretParam(config.param)
    const authenticate = keyAuthenticator(config, init, `the API key is missing from the path (:${config.param})`)
    return {
      request(ctx) {
        authenticate(ctx, ctx.params[config.param] ?? '')
      },
    }
  },
}

export default keyInPathAuth
