/**
 * `rate-limit`: a token bucket per project, per API key or per client IP. Every answer carries the
 * IETF draft headers `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (seconds until the
 * bucket is full) and `RateLimit-Policy`; a refused request gets 429 `rate_limited` with
 * `Retry-After`.
 *
 * Buckets live in the store, not in the route table, so a config reload keeps them. They are
 * named after the route unless `bucket` names a bucket several routes share.
 *
 * ```yaml
 * plugins:
 *   - { name: rate-limit, config: { by: project, capacity: 50, refillPerSecond: 10 } }
 * ```
 */
import { GatewayError } from '../../core/errors.ts'
import type { PluginDefinition, RequestContext } from '../../core/plugin.ts'
import { sharedCounter } from '../_shared/metrics.ts'

export interface RateLimitConfig {
  by: 'project' | 'key' | 'ip'
  capacity: number
  refillPerSecond: number
  bucket?: string
}

/** Who a request is counted against. Without an auth plugin before it, `project` and `key` fall back to the client IP. */
function identity(ctx: RequestContext, by: RateLimitConfig['by']): string {
  if (by === 'project' && ctx.project) return `project:${ctx.project.id}`
  // The digest, not the key: bucket names may be listed in debugging, the clear key never is.
  if (by === 'key' && ctx.apiKey) return `key:${ctx.apiKey.hash}`
  return `ip:${ctx.clientIp}`
}

const rateLimit: PluginDefinition<RateLimitConfig> = {
  name: 'rate-limit',
  version: '1.0.0',
  priority: 910,
  configSchema: {
    type: 'object',
    additionalProperties: false,
    required: ['capacity', 'refillPerSecond'],
    properties: {
      by: {
        enum: ['project', 'key', 'ip'],
        default: 'project',
        description: 'What a bucket belongs to: the project, the API key, or the client IP. Requests with no project (no auth plugin) count per IP.',
      },
      capacity: { type: 'integer', minimum: 1, description: 'Bucket size: the burst a client may send at once.' },
      refillPerSecond: { type: 'number', exclusiveMinimum: 0, description: 'Tokens added per second: the sustained rate.' },
      bucket: {
        type: 'string',
        pattern: '^[A-Za-z0-9_.:-]+$',
        description: 'Bucket name; routes naming the same bucket share their tokens. Default: the route name.',
      },
    },
  },
  create(config, init) {
    const limited = sharedCounter(init.metrics, 'tollgate_rate_limited_total', 'Requests refused with 429 by rate-limit, by route.', ['route']).labels(init.routeName)
    const prefix = `rate:${config.bucket ?? `route:${init.routeName}`}:`
    const policy = `${config.capacity};w=${Math.max(1, Math.ceil(config.capacity / config.refillPerSecond))}`
    return {
      async request(ctx) {
        const decision = await init.store.takeToken(prefix + identity(ctx, config.by), config.capacity, config.refillPerSecond)
        ctx.responseHeaders['ratelimit-limit'] = String(decision.limit)
        ctx.responseHeaders['ratelimit-remaining'] = String(decision.remaining)
        ctx.responseHeaders['ratelimit-reset'] = String(decision.resetSeconds)
        ctx.responseHeaders['ratelimit-policy'] = policy
        if (decision.allowed) return
        limited.inc()
        const retryAfter = String(decision.retryAfterSeconds)
        throw new GatewayError(429, 'rate_limited', `rate limit of ${config.capacity} requests exceeded; retry after ${retryAfter} s`, {
          headers: { 'retry-after': retryAfter },
        })
      },
    }
  },
}

export default rateLimit
