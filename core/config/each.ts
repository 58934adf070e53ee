/**
 * Route templates: a route with `each` stands for one route per combination of its variables'
 * values, every `{name}` in its strings (name, path, rewrite, upstream, plugin configs...) replaced
 * by the value. It keeps families of routes that differ only by a word (a network, a region) to
 * one block of gateway.yaml; the expanded routes are ordinary routes from then on.
 *
 * @example
 * ```yaml
 * - name: mirror-{network}
 *   each: { network: [mainnet, testnet] }
 *   path: /ledger/{network}/api/v1/*rest
 *   upstream: mirror-{network}
 * ```
 */

/** One route after expansion, with the index of the route block it came from (for error positions). */
export interface ExpandedRoute {
  route: Record<string, unknown>
  index: number
}

/** Every combination of the variables' values, in config order (the first variable varies slowest). */
function combinations(each: Record<string, string[]>): Record<string, string>[] {
  let out: Record<string, string>[] = [{}]
  for (const [name, values] of Object.entries(each)) {
    out = out.flatMap((partial) => values.map((value) => ({ ...partial, [name]: value })))
  }
  return out
}

/** Replaces `{name}` of the given variables in every string of a JSON-like value; other braces stay. */
function substitute(value: unknown, vars: Record<string, string>, pattern: RegExp): unknown {
  if (typeof value === 'string') return value.replace(pattern, (whole, name: string) => vars[name] ?? whole)
  if (Array.isArray(value)) return value.map((item) => substitute(item, vars, pattern))
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, substitute(item, vars, pattern)]))
  }
  return value
}

/** Variables of `each` that the route name does not use: expanded routes would share a name. */
export function unusedInName(route: { name: string; each?: Record<string, string[]> }): string[] {
  return Object.keys(route.each ?? {}).filter((name) => !route.name.includes(`{${name}}`))
}

/**
 * Expands route templates (routes with `each`); other routes pass through. Order is kept: a
 * template's routes take its place in the table.
 * @example expandRoutes([{ name: 'm-{n}', each: { n: ['a', 'b'] }, path: '/{n}' }])
 * // [{ route: { name: 'm-a', path: '/a' }, index: 0 }, { route: { name: 'm-b', path: '/b' }, index: 0 }]
 */
export function expandRoutes(routes: readonly Record<string, unknown>[]): ExpandedRoute[] {
  const out: ExpandedRoute[] = []
  routes.forEach((route, index) => {
    const each = route.each as Record<string, string[]> | undefined
    if (!each) {
      out.push({ route, index })
      return
    }
    const { each: _each, ...template } = route
    const names = Object.keys(each).map((name) => name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    const pattern = new RegExp(`\\{(${names.join('|')})\\}`, 'g')
    for (const vars of combinations(each)) out.push({ route: substitute(template, vars, pattern) as Record<string, unknown>, index })
  })
  return out
}
