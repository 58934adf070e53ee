/**
 * The gateway errors of the x402 routes (facilitator and paywall), with the gateway spec's texts
 * where it gives one ("Errors" 3). Verdicts about a payment are not errors: they are 200 answers
 * with `isValid: false` / `success: false` (see facilitator.ts).
 */
import { GatewayError } from '../../core/proxy/plugin-api.ts'

/** The spec's text for any failure of the chain or of an upstream facilitator. */
export const paymentRequestFailedMessage = 'x402 Payment request failed'

/** 502: the chain RPC or the upstream facilitator failed; the cause is logged, never sent. */
export function paymentRequestFailed(): GatewayError {
  return new GatewayError(502, 'payment_request_failed', paymentRequestFailedMessage)
}

/** 400: POST verify / settle without a body (spec text). */
export function bodyRequired(): GatewayError {
  return new GatewayError(400, 'body_required', 'x402 request body is required')
}

/** 501: nothing serves this chain/network on this gateway (not in the config, or no signer key). */
export function networkNotConfigured(label: string): GatewayError {
  return new GatewayError(501, 'network_not_configured', `${label} is not configured on this gateway`)
}

/** 503: configured, but its chain cannot be used right now (RPC down at start, asset check failed). */
export function networkUnavailable(label: string, why: string, retryAfterSeconds?: number): GatewayError {
  return new GatewayError(503, 'network_unavailable', `${label} is unavailable: ${why}`, {
    headers: retryAfterSeconds === undefined ? {} : { 'retry-after': String(retryAfterSeconds) },
  })
}
