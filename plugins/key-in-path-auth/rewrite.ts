/**
 * Whether a route's `rewrite` template substitutes a given param. The core substitutes whole
 * segments only (`/:name` and `/*name`), so that is what is looked for.
 *
 * @example
 * ```ts
 * rewriteUsesParam('/keys/:apiKey/prove', 'apiKey') // true
 * rewriteUsesParam('/prove-tx', 'apiKey')           // false
 * ```
 */
export function rewriteUsesParam(rewrite: string, param: string): boolean {
  return rewrite.split('/').some((segment) => (segment.startsWith(':') || segment.startsWith('*')) && segment.slice(1) === param)
}
