/**
 * `batch-cap`: bounds a JSON batch before anything is charged or sent upstream. The body must be
 * an object whose `field` is an array of 1..`limit` items.
 *
 * Priority 905 puts it before credit-meter (900) in the body phase: a batch that is too large is
 * a 400 whatever the project's balance, and no credits are reserved for it.
 *
 * ```yaml
 * plugins:
 *   - name: batch-cap
 *     config: { field: proofs, limit: 20, itemName: proof }
 * ```
 */
import type { PluginDefinition } from '../../core/proxy/plugin-api.ts'
import { GatewayError } from '../../core/proxy/plugin-api.ts'

export interface BatchCapConfig {
  field: string
  limit: number
  itemName: string
}

const batchCap: PluginDefinition<BatchCapConfig> = {
  name: 'batch-cap',
  version: '1.0.0',
  priority: 905,
  configSchema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      field: { type: 'string', minLength: 1, default: 'proofs', description: 'Top-level body member holding the batch array.' },
      limit: { type: 'integer', minimum: 1, default: 20, description: 'Most items a batch may hold; more answers 400 batch_too_large.' },
      itemName: { type: 'string', minLength: 1, default: 'item', description: 'Noun for one item in messages ("proofs must contain at least one proof").' },
    },
  },
  needs: () => ({ body: 'json' }),
  create(config) {
    const { field, limit, itemName } = config
    return {
      body(ctx) {
        const body = ctx.body?.json
        if (typeof body !== 'object' || body === null || Array.isArray(body)) {
          throw new GatewayError(400, 'invalid_batch', `request body must be a JSON object with a ${field} array`)
        }
        const items = (body as Record<string, unknown>)[field]
        if (!Array.isArray(items)) {
          const got = items === undefined ? 'missing' : items === null ? 'null' : typeof items
          throw new GatewayError(400, 'invalid_batch', `${field} must be an array (got ${got})`)
        }
        if (items.length === 0) throw new GatewayError(400, 'batch_empty', `${field} must contain at least one ${itemName}`)
        if (items.length > limit) {
          throw new GatewayError(400, 'batch_too_large', `${field} has ${items.length} items; the limit is ${limit}`)
        }
        ctx.logFields.items = items.length
      },
    }
  },
}

export default batchCap
