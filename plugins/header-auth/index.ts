/**
 * `header-auth`: the API key travels in a request header (`x-api-key` by default, as the mirror
 * REST API takes it). The header is marked secret, so it is never forwarded upstream and never
 * logged. The key's project must have the route's scope and, optionally, one of its plans.
 *
 * ```yaml
 * - name: mirror
 *   path: /api/v1/*rest
 *   upstream: mirror-mainnet
 *   plugins:
 *     - { name: header-auth, config: { header: x-api-key, scope: mirror } }
 * ```
 */
import type { PluginDefinition } from '../../core/proxy/plugin-api.ts'
import { headerValue, keyAuthenticator, keyAuthSchemaProperties, type KeyAuthConfig } from '../_shared/auth.ts'

export interface HeaderAuthConfig extends KeyAuthConfig {
  header: string
}

const headerAuth: PluginDefinition<HeaderAuthConfig> = {
  name: 'header-auth',
  version: '1.0.0',
  priority: 1250,
  configSchema: {
    type: 'object',
    additionalProperties: false,
    required: ['scope'],
    properties: {
      header: {
        type: 'string',
        pattern: '^[a-z0-9-]+$',
        default: 'x-api-key',
        description: 'Request header (lower case) that carries the API key; never forwarded upstream.',
      },
      ...keyAuthSchemaProperties,
    },
  },
  create(config, init) {
    const authenticate = keyAuthenticator(config, init, `the ${config.header} header is required`)
    return {
      request(ctx) {
        ctx.secretHeaders.add(config.header)
        authenticate(ctx, headerValue(ctx.headers[config.header]).trim())
      },
    }
  },
}

export default headerAuth
