/**
 * Fields of a request's access line that need more than a copy: bytes out, the user agent bounded,
 * the cause under a 5xx. Computed when the line is written (pipeline.ts observe).
 */
import type { ServerResponse } from 'node:http'
import type { Context } from './context.ts'
import type { GatewayError } from './errors.ts'

/** Body bytes of the answer: headers given to writeHead as an object are not visible to getHeader. */
export function bytesOut(ctx: Context, res: ServerResponse): number | undefined {
  const response = ctx.response
  if (response?.body) return response.body.length
  if (ctx.streamedBytes > 0) return ctx.streamedBytes
  const declared = response?.headers['content-length'] ?? res.getHeader('content-length')
  return Number(Array.isArray(declared) ? declared[0] : (declared ?? 0)) || undefined
}

/** Longest user agent kept on an access line; longer ones are cut (a header can be 16 KB). */
export const MAX_LOGGED_USER_AGENT = 256

export function boundedUserAgent(value: string | undefined): string | undefined {
  return value === undefined || value.length <= MAX_LOGGED_USER_AGENT ? value : value.slice(0, MAX_LOGGED_USER_AGENT) + '…'
}

/**
 * Why a 5xx happened, for the operator: the transport or library error under the gateway's own
 * (the client only ever sees the stable code and message). Bounded, like every logged field.
 */
export function causeOf(error: GatewayError | undefined): string | undefined {
  const cause = error?.cause as (Error & { code?: string }) | undefined
  if (!(cause instanceof Error)) return undefined
  const text = cause.code ? `${cause.code}: ${cause.message}` : cause.message
  return text.length > 200 ? text.slice(0, 200) + '…' : text
}
