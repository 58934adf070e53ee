/**
 * Which answers a request is charged for. The rule: a project pays when its request reached the
 * service and the service did its part; it gets its credits back when the gateway or the service
 * failed, or when the gateway refused the request before it reached the service.
 */
import type { RequestContext } from '../../core/proxy/plugin-api.ts'

export interface RefundPolicy {
  /** Statuses always refunded (default 502 and 504: upstream unreachable or too slow). */
  refundStatuses: ReadonlySet<number>
  /** Refund every 5xx answered by the upstream or handler (default true). */
  refundUpstream5xx: boolean
}

/** What the policy looks at, taken from the request context. */
export interface Outcome {
  /** Status of the answer; for a gateway error, the error's own status (an error format may render it as 200). */
  status: number
  /** The gateway raised the error that ended the request (a plugin refused, the upstream was unreachable...). */
  gatewayError: boolean
  /** An upstream sent a status line. */
  upstreamAnswered: boolean
}

/**
 * The outcome of a request as it stands.
 *
 * @example
 * ```ts
 * isCharged(outcomeOf(ctx), policy)
 * ```
 */
export function outcomeOf(ctx: RequestContext): Outcome {
  return {
    status: ctx.error?.status ?? ctx.response?.status ?? 500,
    gatewayError: ctx.error !== undefined,
    upstreamAnswered: ctx.upstreamStatus !== undefined,
  }
}

/**
 * True when the answer is paid for, false when its reservation is refunded.
 *
 * @example
 * ```ts
 * const policy = { refundStatuses: new Set([502, 504]), refundUpstream5xx: true }
 * isCharged({ status: 200, gatewayError: false, upstreamAnswered: true }, policy) // true
 * isCharged({ status: 503, gatewayError: false, upstreamAnswered: true }, policy) // false
 * isCharged({ status: 400, gatewayError: true, upstreamAnswered: false }, policy) // false: never reached the service
 * ```
 */
export function isCharged(outcome: Outcome, policy: RefundPolicy): boolean {
  if (policy.refundStatuses.has(outcome.status)) return false
  // The gateway's own 5xx (internal error, ledger down) is always its fault, whatever the upstream setting.
  if (outcome.status >= 500 && (policy.refundUpstream5xx || outcome.gatewayError)) return false
  if (outcome.gatewayError && !outcome.upstreamAnswered) return false
  return true
}
