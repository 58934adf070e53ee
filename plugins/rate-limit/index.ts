/**
 * `rate-limit`: a token bucket per project, per API key or per client IP. Every answer carries the
 * IETF draft headers `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (seconds until the
 * bucket is full) and `RateLimit-Policy`; a refused request gets 429 `rate_limited` with
 * `Retry-After`.
 *
 * Buckets live in the store, not in the route table, so a config reload keeps them. They are
 * named after the route unless `bucket` names a bucket several routes share. When the store cannot
 * decide (the shared engine's Redis is unreachable), `onStoreError` says what happens: `deny`
 * answers 503 `store_unavailable`, `allow` lets the request through unlimited.
 *
 * ```yaml
 * plugins:
 *   - { name: rate-limit, config: { by: project, capacity: 50, refillPerSecond: 10 } }
 * ```
 */
import { errors, GatewayError } from '../../core/proxy/plugin-api.ts'
import type { RateDecision } from '../../core/store/types.ts'
import type { PluginDefinition, RequestContext } from '../../core/proxy/plugin-api.ts'
import { sharedCounter } from '../_shared/metrics.ts'

export interface RateLimitConfig {
  by: 'project' | 'key' | 'ip'
  capacity: number
  refillPerSecond: number
  bucket?: string
  onStoreError: 'deny' | 'allow'
}

/** Who a request is counted against. Without an auth plugin before it, `project` and `key` fall back to the client IP. */
function identity(ctx: RequestContext, by: RateLimitConfig['by']): string {
  if (by === 'project' && ctx.project) return `project:${ctx.project.id}`
  // The digest, not the key: bucket names may be listed in debugging, the clear key never is.
  if (by === 'key' && ctx.apiKey) return `key:${ctx.apiKey.hash}`
  return `ip:${ctx.clientIp}`
}

/** Decimal text of the small counts headers carry most (remaining, reset), built once. */
const SMALL_INTS = Array.from({ length: 1024 }, (_, i) => String(i))
function intText(n: number): string {
  return n >= 0 && n < SMALL_INTS.length && Number.isInteger(n) ? SMALL_INTS[n]! : String(n)
}

/** Most bucket names remembered per project-keyed route (projects come from config, so few). */
const MAX_CACHED_BUCKET_NAMES = 10_000

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
      onStoreError: {
        enum: ['deny', 'allow'],
        default: 'deny',
        description:
          'When the store cannot decide (shared engine: Redis unreachable): deny answers 503 store_unavailable with Retry-After: 1; allow lets the request through without a limit (and without RateLimit headers).',
      },
    },
  },
  create(config, init) {
    const limited = sharedCounter(init.metrics, 'tollgate_rate_limited_total', 'Requests refused with 429 by rate-limit, by route.', ['route']).labels(init.routeName)
    const storeErrors = sharedCounter(
      init.metrics,
      'tollgate_rate_limit_store_errors_total',
      'Rate-limit decisions the store could not make (then onStoreError applies), by route.',
      ['route'],
    ).labels(init.routeName)
    const prefix = `rate:${config.bucket ?? `route:${init.routeName}`}:`
    // Header values that depend on the config only are built once per route instance.
    const policy = `${config.capacity};w=${Math.max(1, Math.ceil(config.capacity / config.refillPerSecond))}`
    const limitText = String(config.capacity)
    const projectBuckets = new Map<string, string>()
    const bucketOf = (ctx: RequestContext): string => {
      if (config.by !== 'project' || !ctx.project) return prefix + identity(ctx, config.by)
      let name = projectBuckets.get(ctx.project.id)
      if (name === undefined) {
        name = prefix + identity(ctx, config.by)
        if (projectBuckets.size < MAX_CACHED_BUCKET_NAMES) projectBuckets.set(ctx.project.id, name)
      }
      return name
    }
    /** Sets the RateLimit headers of a decision; a refusal throws 429. */
    const apply = (ctx: RequestContext, decision: RateDecision): void => {
      const headers = ctx.responseHeaders
      headers['ratelimit-limit'] = decision.limit === config.capacity ? limitText : String(decision.limit)
      headers['ratelimit-remaining'] = intText(decision.remaining)
      headers['ratelimit-reset'] = intText(decision.resetSeconds)
      headers['ratelimit-policy'] = policy
      if (decision.allowed) return
      limited.inc()
      const retryAfter = String(decision.retryAfterSeconds)
      throw new GatewayError(429, 'rate_limited', `rate limit of ${config.capacity} requests exceeded; retry after ${retryAfter} s`, {
        headers: { 'retry-after': retryAfter },
      })
    }
    /** Engines that ask a server: the decision arrives later, and the store may be unreachable. */
    const decideRemotely = async (ctx: RequestContext): Promise<void> => {
      let decision: RateDecision
      try {
        decision = await init.store.takeToken(bucketOf(ctx), config.capacity, config.refillPerSecond)
      } catch (error) {
        if (!(error instanceof GatewayError) || error.code !== 'store_unavailable') throw error
        storeErrors.inc()
        if (config.onStoreError === 'allow') {
          ctx.logFields.rateLimit = 'store_unavailable_allowed'
          return
        }
        throw errors.storeUnavailable('the rate limit cannot be checked right now; retry shortly', { headers: { 'retry-after': '1' }, cause: error })
      }
      apply(ctx, decision)
    }
    // The embedded engine decides in process: then no promise and no await per request.
    const immediate = init.store.immediate
    // A shared engine decides from tokens it leased most of the time: then no promise either.
    const quick = init.store.quick
    return {
      request(ctx) {
        if (immediate !== undefined) return apply(ctx, immediate.takeToken(bucketOf(ctx), config.capacity, config.refillPerSecond))
        if (quick !== undefined) {
          const decision = quick.tryTakeToken(bucketOf(ctx), config.capacity, config.refillPerSecond)
          if (decision !== undefined) return apply(ctx, decision)
        }
        return decideRemotely(ctx)
      },
    }
  },
}

export default rateLimit
