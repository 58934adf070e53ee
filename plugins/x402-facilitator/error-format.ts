/**
 * The `x402` error format: gateway errors on the x402 routes (auth, credits, rate limit, unknown
 * segments, empty body, chain or upstream failure...) as `{"error": "<message>", "code": "<code>"}`,
 * so the spec's texts ("Unauthorized access to x402 facilitator service", "x402 request body is
 * required", "x402 Payment request failed") are the `error` string itself, as x402 facilitators
 * report failures (`{error}`), with the gateway's stable code beside it. The HTTP status is the
 * error's own; headers such as Allow and Retry-After are kept.
 */
import type { ErrorFormatter } from '../../core/proxy/plugin-api.ts'

export const x402ErrorFormat: ErrorFormatter = (error) => ({
  status: error.status,
  headers: { 'content-type': 'application/json; charset=utf-8', ...error.headers },
  body: JSON.stringify({ error: error.message, code: error.code }),
})
