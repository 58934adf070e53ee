/**
 * The plugin of docs/plugins.md: refuses requests that lack a header (400 `missing_header`).
 * A custom plugin in the smallest useful form: a config schema, a `request` phase that throws a
 * GatewayError, and a `done` phase that adds a field to the access line.
 */
import type { PluginDefinition } from '../../../core/proxy/plugin.ts'
import { GatewayError } from '../../../core/proxy/errors.ts'

interface Config {
  header: string
  required: boolean
}

const requireHeader: PluginDefinition<Config> = {
  name: 'require-header',
  priority: 800,
  configSchema: {
    type: 'object',
    additionalProperties: false,
    required: ['header'],
    properties: {
      header: { type: 'string', pattern: '^[a-z0-9-]+$', description: 'Header every request must carry.' },
      required: { type: 'boolean', default: true, description: 'Refuse requests without it.' },
    },
  },
  create(config) {
    return {
      request(ctx) {
        if (config.required && !ctx.headers[config.header]) {
          throw new GatewayError(400, 'missing_header', `header ${config.header} is required`)
        }
      },
      done(ctx) {
        ctx.logFields.headerChecked = config.header
      },
    }
  },
}

export default requireHeader
