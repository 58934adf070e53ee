/**
 * What the API-key plugins (`key-in-path-auth`, `header-auth`) and `secret-check` share: the
 * refusals with their stable codes, the auth-failure metric, and the key → project check.
 *
 * One rule runs through all of it: a refused credential never tells the client why. Unknown,
 * disabled and expired keys get the same 401 and the same message, so an answer never reveals
 * whether a key exists or which project owns it. The reason goes to the metric (bounded label)
 * and nowhere else; the key itself goes nowhere at all.
 */
import type { Counter } from 'prom-client'
import { GatewayError } from '../../core/proxy/plugin-api.ts'
import type { JsonSchema, PluginInit, RequestContext } from '../../core/proxy/plugin-api.ts'
import { SCOPES, type Scope } from '../../core/proxy/plugin-api.ts'
import { sharedCounter } from './metrics.ts'

/** Every label value of `tollgate_auth_failures_total{reason}`. */
export const AUTH_FAILURE_REASONS = [
  'missing_key',
  'unknown_key',
  'disabled_key',
  'expired_key',
  'wrong_scope',
  'wrong_plan',
  'missing_secret',
  'wrong_secret',
] as const
export type AuthFailureReason = (typeof AUTH_FAILURE_REASONS)[number]

/** Config fields common to the two API-key plugins. */
export interface KeyAuthConfig {
  scope: Scope
  plans?: string[]
  scopeMessage?: string
}

/** The exact text the x402 facilitator answers when a project is not enabled for it (gateway spec, Errors). */
export const X402_SCOPE_MESSAGE = 'Unauthorized access to x402 facilitator service'

const DEFAULT_SCOPE_MESSAGES: Record<Scope, string> = {
  zkpaas: 'the API key must be scoped to a ZK-PaaS project',
  rpc: 'the API key must be scoped to an RPC project',
  x402: X402_SCOPE_MESSAGE,
  mirror: 'the API key must be scoped to a mirror project',
  events: 'the API key must be scoped to an event settings project',
}

/** Same message for unknown, disabled and expired keys: nothing tells whether a key exists. */
export const INVALID_KEY_MESSAGE = 'invalid API key'

/** JSON Schema properties for {@link KeyAuthConfig}, spread into each API-key plugin's schema. */
export const keyAuthSchemaProperties: Record<string, JsonSchema> = {
  scope: {
    enum: [...SCOPES],
    description: "Scope the key's project must have (zkpaas, rpc, x402, mirror, events); otherwise 403 forbidden.",
  },
  plans: {
    type: 'array',
    items: { type: 'string', minLength: 1 },
    minItems: 1,
    uniqueItems: true,
    description: "Plans allowed on this route (e.g. [enterprise]); another plan gets 403 forbidden. Default: any plan.",
  },
  scopeMessage: {
    type: 'string',
    minLength: 1,
    description:
      'Message of the 403 when the scope is missing. Default: a message naming the scope; for x402, exactly "Unauthorized access to x402 facilitator service".',
  },
}

/**
 * The `tollgate_auth_failures_total{reason}` counter, with every reason present at 0 so dashboards
 * and alerts see the series before the first failure.
 *
 * @example
 * ```ts
 * authFailures(init.metrics).labels('missing_secret').inc()
 * ```
 */
export function authFailures(registry: PluginInit['metrics']): Counter<'reason'> {
  const fresh = registry.getSingleMetric('tollgate_auth_failures_total') === undefined
  const counter = sharedCounter(registry, 'tollgate_auth_failures_total', 'Requests refused by an auth plugin, by reason.', ['reason'])
  if (fresh) for (const reason of AUTH_FAILURE_REASONS) counter.labels(reason).inc(0)
  return counter
}

/** One header value as a string ('' when absent); a repeated header is refused as a whole. */
export function headerValue(value: string | string[] | undefined): string {
  if (value === undefined) return ''
  return Array.isArray(value) ? value.join(', ') : value
}

/**
 * Builds the check shared by the API-key plugins: presented key → project, scope, plan. On success
 * it sets `ctx.project`, `ctx.apiKey` and the log fields; otherwise it counts the reason and throws.
 * Projects are read from `init.projects`, which the core rebuilds on every config load and refreshes
 * in place when run-time settings change, so a reload or an admin API change applies to keys,
 * scopes and plans on the next request.
 *
 * @example
 * ```ts
 * const authenticate = keyAuthenticator(config, init, 'the x-api-key header is required')
 * // in request(ctx):
 * authenticate(ctx, headerValue(ctx.headers['x-api-key']))
 * ```
 */
export function keyAuthenticator(config: KeyAuthConfig, init: PluginInit, missingMessage: string): (ctx: RequestContext, presented: string) => void {
  const failures = authFailures(init.metrics)
  const scopeMessage = config.scopeMessage ?? DEFAULT_SCOPE_MESSAGES[config.scope]
  const plans = config.plans?.length ? new Set(config.plans) : undefined
  const planMessage = plans ? `this service is available only on the ${[...plans].join(' or ')} plan` : ''
  return (ctx, presented) => {
    if (presented === '') {
      failures.labels('missing_key').inc()
      throw new GatewayError(401, 'missing_api_key', missingMessage)
    }
    const found = init.projects.lookupKey(presented)
    if (!found.ok) {
      failures.labels(found.reason).inc()
      // Counted on the dashboard under the key's project (disabled, expired) or no project (unknown).
      ctx.refused = found.reason === 'unknown_key' ? { reason: found.reason } : { project: found.project, key: found.key, reason: found.reason }
      throw new GatewayError(401, 'invalid_api_key', INVALID_KEY_MESSAGE)
    }
    const { project, key } = found
    if (!project.scopes.has(config.scope)) {
      failures.labels('wrong_scope').inc()
      ctx.refused = { project, key, reason: 'wrong_scope' }
      throw new GatewayError(403, 'forbidden', scopeMessage)
    }
    if (plans && !plans.has(project.plan)) {
      failures.labels('wrong_plan').inc()
      ctx.refused = { project, key, reason: 'wrong_plan' }
      throw new GatewayError(403, 'forbidden', planMessage)
    }
    ctx.project = project
    ctx.apiKey = key
    ctx.logFields.project = project.id
    ctx.logFields.keyLabel = key.label
  }
}
