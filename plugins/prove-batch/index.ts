/**
 * `prove-batch` (handler): answers `POST /privnet/zkpaas/:apiKey/prove-batch`. The proof server
 * has no batch endpoint, so the gateway fans the batch out as single jobs, at most `concurrency`
 * at a time, each with its own timeout, and answers `{"results": [...]}` in input order:
 * `{"ok": true, "proof": "<base64>"}` or `{"ok": false, "error": {"code", "message", "status"}}`.
 * One bad element never fails the others; the answer is 200 whenever the batch itself was valid
 * (batch-cap checks count and shape first).
 *
 * Credits: credit-meter charges per element (`perItem: {path: proofs}`); this handler hands back
 * `failed × creditsPerProof` through `ctx.state['credits.refund']`.
 *
 * The upstream is `ctx.upstream` when a plugin chose one (zk-features: TEE or relay pool), else
 * `upstream` from the config. Headers plugins set for the upstream (`sponsored`) go with every job.
 */
import type { PluginDefinition, RequestContext } from '../../core/proxy/plugin-api.ts'
import { errors } from '../../core/proxy/plugin-api.ts'
import { taggedPayloadSchema } from '../binary-validator/tagged-header.ts'
import { compileItemParser, type EndpointSpec } from './items.ts'
import { proveOne, type ItemResult } from './prove-item.ts'

export interface ProveBatchConfig {
  upstream: string
  field: string
  concurrency: number
  itemTimeoutMs: number
  maxResultBytes: number
  creditsPerProof: number
  endpoints: Record<string, EndpointSpec>
}

/** Runs `work` over `items` with at most `limit` in flight; results keep the input order. */
async function mapBounded<T, R>(items: readonly T[], limit: number, work: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length)
  let next = 0
  const worker = async () => {
    while (next < items.length) {
      const index = next++
      results[index] = await work(items[index], index)
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
  return results
}

/** Headers other plugins set for the upstream (null = removed), plus a per-job request id. */
function jobHeaders(ctx: RequestContext, index: number): Record<string, string> {
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(ctx.upstreamHeaders)) if (value !== null) headers[name] = value
  headers['x-request-id'] = `${ctx.id}.${index}`
  return headers
}

const proveBatch: PluginDefinition<ProveBatchConfig> = {
  name: 'prove-batch',
  version: '1.0.0',
  priority: 0,
  configSchema: {
    type: 'object',
    additionalProperties: false,
    required: ['upstream', 'endpoints'],
    properties: {
      upstream: { type: 'string', minLength: 1, description: 'Proof-server upstream used unless a plugin chose another (TEE/relay).' },
      field: { type: 'string', minLength: 1, default: 'proofs', description: 'Body member holding the batch array.' },
      concurrency: { type: 'integer', minimum: 1, maximum: 256, default: 20, description: 'Jobs of one batch in flight at once.' },
      itemTimeoutMs: { type: 'integer', minimum: 1, default: 300000, description: 'Time one job may take; past it the element fails with upstream_timeout.' },
      maxResultBytes: { type: 'integer', minimum: 1024, default: 16777216, description: 'Largest proof accepted from the upstream per element.' },
      creditsPerProof: {
        type: 'integer',
        minimum: 0,
        default: 1,
        description: "Credits handed back per failed element; set it to the credit-meter's cost.",
      },
      endpoints: {
        type: 'object',
        minProperties: 1,
        propertyNames: { pattern: '^[a-z][a-z0-9-]*$' },
        description: 'Element `endpoint` names → proof-server path and payload check. Share the check with the single-proof route through a YAML anchor.',
        additionalProperties: {
          type: 'object',
          additionalProperties: false,
          required: ['path', 'validate'],
          properties: {
            path: { type: 'string', pattern: '^/', description: 'Proof-server path, e.g. /prove.' },
            validate: { ...taggedPayloadSchema, description: 'Payload check: the same config as binary-validator on the single-proof route.' },
          },
        },
      },
    },
  },
  needs: () => ({ body: 'json' }),
  create(config, init) {
    if (!init.upstreamNames.includes(config.upstream)) throw new Error(`unknown upstream "${config.upstream}"`)
    const parse = compileItemParser(config.field, config.endpoints)
    return {
      async handle(ctx) {
        const items = (ctx.body?.json as Record<string, unknown> | undefined)?.[config.field]
        // batch-cap checks this with its own limit first; this guards a route configured without it.
        if (!Array.isArray(items)) throw errors.internal(`route ${init.routeName} has no batch-cap before prove-batch`)
        const upstreamName = ctx.upstream ?? config.upstream
        const upstream = init.upstream(upstreamName)
        const results = await mapBounded(items, config.concurrency, async (item, index): Promise<ItemResult> => {
          const parsed = parse(item, index)
          if (!parsed.ok) return parsed
          if (ctx.aborted) throw errors.upstreamUnavailable('client closed the connection')
          return proveOne({
            upstream,
            path: parsed.path,
            payload: parsed.payload,
            headers: jobHeaders(ctx, index),
            clientSignal: ctx.signal,
            timeoutMs: config.itemTimeoutMs,
            maxResultBytes: config.maxResultBytes,
          })
        })
        const failed = results.reduce((count, result) => count + (result.ok ? 0 : 1), 0)
        if (failed > 0 && config.creditsPerProof > 0) ctx.state.set('credits.refund', failed * config.creditsPerProof)
        ctx.logFields.items = items.length
        ctx.logFields.failed = failed
        ctx.respond(200, { results })
      },
    }
  },
}

export default proveBatch
