/**
 * An example custom plugin, loaded from a path in gateway.yaml:
 *
 * ```yaml
 * customPlugins:
 *   - path: ./examples/plugins/response-stamp/index.ts
 * routes:
 *   - name: demo
 *     path: /demo
 *     upstream: demo
 *     plugins:
 *       - name: response-stamp
 *         config: { header: x-stamp, value: hello }
 * ```
 *
 * It stamps every answer with a header and tells the upstream which route served it — the two
 * things most custom plugins start from. It uses only the public contract of core/proxy/plugin.ts.
 */
import type { PluginDefinition } from '../../../core/proxy/plugin.ts'

interface StampConfig {
  header: string
  value: string
  upstreamHeader: string
}

const responseStamp: PluginDefinition<StampConfig> = {
  name: 'response-stamp',
  version: '1.0.0',
  priority: 700,
  configSchema: {
    type: 'object',
    additionalProperties: false,
    required: ['value'],
    properties: {
      header: { type: 'string', pattern: '^[a-z0-9-]+$', default: 'x-stamp', description: 'Response header to add.' },
      value: { type: 'string', minLength: 1, description: 'Value of the response header.' },
      upstreamHeader: { type: 'string', pattern: '^[a-z0-9-]+$', default: 'x-route', description: 'Request header carrying the route name upstream.' },
    },
  },
  create(config, init) {
    return {
      request(ctx) {
        ctx.upstreamHeaders[config.upstreamHeader] = init.routeName
      },
      response(ctx) {
        ctx.responseHeaders[config.header] = config.value
      },
    }
  },
}

export default responseStamp
