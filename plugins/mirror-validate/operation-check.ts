/**
 * One entry point for any path of the mirror's REST API below `/api/v1`: finds its operation in
 * the pinned OpenAPI table and checks the request with the eight routes' hand-written rules
 * (rules.ts) or the generic handler-corrected ones (openapi-rules.ts). A path no operation
 * serves is the node's 404 `Not found`.
 */
import { checkMirrorRequest, limitCheck, type MirrorRejection, type MirrorValidationOptions } from './rules.ts'
import { matchOperation, type ResolvedOperation } from './openapi-routes.ts'
import { validateOperation } from './openapi-rules.ts'

export interface OperationCheck {
  /** The operation the path names; absent for a path the node does not serve. */
  operation?: ResolvedOperation
  rejection: MirrorRejection | null
}

const NOT_FOUND: MirrorRejection = { status: 404, messages: [{ message: 'Not found' }] }

/**
 * @example checkMirrorOperation('GET', ['blocks', 'x'], new URLSearchParams())
 * // { operation: getBlock, rejection: { status: 400, messages: [{ message: 'Invalid parameter: hashOrNumber' }] } }
 */
export function checkMirrorOperation(
  method: string,
  segments: readonly string[],
  query: URLSearchParams,
  options: MirrorValidationOptions = {},
): OperationCheck {
  const verb = method === 'POST' ? 'post' : 'get'
  const match = matchOperation(verb, segments)
  if (!match) return { rejection: NOT_FOUND }
  const { operation } = match
  if (operation.legacy) return { operation, rejection: checkMirrorRequest(operation.legacy, match.params, query, options) }
  return { operation, rejection: validateOperation(match, query, limitCheck(options)) }
}
