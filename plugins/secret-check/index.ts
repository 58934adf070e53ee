/**
 * `secret-check`: after an API-key plugin found the project, the request must also carry the
 * project's secret in a header (`x-api-secret`, as the event settings API takes it). The check is
 * constant-time against the stored digest; the header is never forwarded nor logged.
 *
 * ```yaml
 * plugins:
 *   - { name: key-in-path-auth, config: { param: apiKey, scope: events } }
 *   - { name: secret-check, config: { header: x-api-secret } }
 * ```
 */
import { errors, GatewayError } from '../../core/proxy/plugin-api.ts'
import type { PluginDefinition } from '../../core/proxy/plugin-api.ts'
import { authFailures, headerValue } from '../_shared/auth.ts'

export interface SecretCheckConfig {
  header: string
}

const secretCheck: PluginDefinition<SecretCheckConfig> = {
  name: 'secret-check',
  version: '1.0.0',
  priority: 1200,
  configSchema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      header: {
        type: 'string',
        pattern: '^[a-z0-9-]+$',
        default: 'x-api-secret',
        description: 'Request header (lower case) that carries the project secret; never forwarded upstream.',
      },
    },
  },
  create(config, init) {
    const failures = authFailures(init.metrics)
    return {
      request(ctx) {
        ctx.secretHeaders.add(config.header)
        // Only a route without an API-key plugin gets here without a project: an operator mistake.
        if (!ctx.project) throw errors.internal(`route ${ctx.routeName} runs secret-check without an API-key plugin before it`)
        const presented = headerValue(ctx.headers[config.header])
        if (presented === '') {
          failures.labels('missing_secret').inc()
          throw new GatewayError(401, 'missing_api_secret', `the ${config.header} header is required`)
        }
        // A project without a secret matches nothing: its routes that check one are closed.
        if (!init.projects.secretMatches(ctx.project, presented)) {
          failures.labels('wrong_secret').inc()
          throw new GatewayError(403, 'invalid_api_secret', 'invalid API secret')
        }
      },
    }
  },
}

export default secretCheck
