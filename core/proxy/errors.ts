/**
 * The one error type of the request path, and the catalogue of stable codes the core raises.
 *
 * A plugin rejects a request by throwing a {@link GatewayError}; the route's error format renders it.
 * Codes are stable API: clients match on them, so they never change once published.
 *
 * @example
 * ```ts
 * throw new GatewayError(402, 'credits_exhausted', 'project demo has no credits left this period')
 * ```
 */
export class GatewayError extends Error {
  readonly status: number
  readonly code: string
  /** Extra headers the answer must carry (`Allow`, `Retry-After`, ...). */
  readonly headers: Record<string, string>
  /** Structured detail a custom error format may use (JSON-RPC id, x402 payer...). */
  readonly detail: Record<string, unknown> | undefined

  constructor(
    status: number,
    code: string,
    message: string,
    options: { headers?: Record<string, string>; detail?: Record<string, unknown>; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    this.name = 'GatewayError'
    this.status = status
    this.code = code
    this.headers = options.headers ?? {}
    this.detail = options.detail
  }
}

/** Builds a factory for one catalogued error, fastify-style. */
function define(status: number, code: string) {
  return (message: string, options?: ConstructorParameters<typeof GatewayError>[3]) =>
    new GatewayError(status, code, message, options)
}

/** Errors the core itself raises. Plugins define their own codes next to their code. */
export const errors = {
  notFound: define(404, 'route_not_found'),
  methodNotAllowed: define(405, 'method_not_allowed'),
  badPath: define(400, 'invalid_path'),
  invalidJson: define(400, 'invalid_json'),
  bodyTooLarge: define(413, 'body_too_large'),
  unsupportedMediaType: define(415, 'unsupported_media_type'),
  headersTooLarge: define(431, 'headers_too_large'),
  requestTimeout: define(408, 'request_timeout'),
  malformedRequest: define(400, 'bad_request'),
  upstreamUnavailable: define(502, 'upstream_unavailable'),
  upstreamTimeout: define(504, 'upstream_timeout'),
  responseTooLarge: define(502, 'upstream_response_too_large'),
  /** Every target of the upstream is backing off after its 429: answered by the gateway, never sent, not charged. */
  upstreamThrottled: define(429, 'upstream_throttled'),
  shuttingDown: define(503, 'shutting_down'),
  /** The store (PostgreSQL, Redis) cannot be reached: a metered request is refused, never served unmetered. */
  storeUnavailable: define(503, 'store_unavailable'),
  internal: define(500, 'internal_error'),
} as const

/**
 * Turns anything thrown on the request path into a GatewayError. An unknown throw is our own
 * fault: it becomes a 500 with a fixed message, so no internal detail leaks to the client.
 */
export function toGatewayError(thrown: unknown): GatewayError {
  if (thrown instanceof GatewayError) return thrown
  return errors.internal('internal gateway error', { cause: thrown })
}
