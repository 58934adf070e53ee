/**
 * The `mirror` error format: every GatewayError on a mirror route is rendered in the mirror node's
 * own envelope, `{"_status":{"messages":[{"message":"..."}]}}`, so a client parses gateway refusals
 * (401, 402, 403, 429, 502, 504...) exactly like the node's own 400 and 404 answers.
 */
import type { GatewayError } from '../../core/proxy/plugin-api.ts'
import type { ErrorFormatter } from '../../core/proxy/plugin-api.ts'
import { mirrorErrorBody, type MirrorMessage } from './rules.ts'

/** Key of `GatewayError.detail` holding the node's messages (set by mirror-validate). */
export const MIRROR_MESSAGES = 'mirrorMessages'

function isMirrorMessage(value: unknown): value is MirrorMessage {
  return typeof value === 'object' && value !== null && typeof (value as MirrorMessage).message === 'string'
}

/** The messages an error carries: the node's own when mirror-validate raised it, else the error's message. */
export function mirrorMessagesOf(error: GatewayError): MirrorMessage[] {
  const detailed = error.detail?.[MIRROR_MESSAGES]
  if (Array.isArray(detailed) && detailed.length > 0 && detailed.every(isMirrorMessage)) return detailed
  // An unknown path under the mount reads as the node's own 404, so drop-in clients see no difference.
  if (error.code === 'route_not_found') return [{ message: 'Not found' }]
  return [{ message: error.message }]
}

/**
 * Renders a GatewayError as the mirror node would answer it.
 * @example
 * mirrorErrorFormat(new GatewayError(401, 'missing_api_key', 'the x-api-key header is required'), undefined)
 * // { status: 401, headers: {...}, body: '{"_status":{"messages":[{"message":"the x-api-key header is required"}]}}' }
 */
export const mirrorErrorFormat: ErrorFormatter = (error) => ({
  status: error.status,
  headers: { 'content-type': 'application/json; charset=utf-8', ...error.headers },
  body: JSON.stringify(mirrorErrorBody(mirrorMessagesOf(error))),
})
