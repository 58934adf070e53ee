/**
 * Method + path router, compiled once per config into a segment trie.
 *
 * Patterns: static segments, `:name` (one segment) and a final `*name` (the rest, possibly empty).
 * Static segments win over params, params over the catch-all. Paths are normalised before matching:
 * duplicate and trailing slashes are dropped, each segment is percent-decoded once, and `..`,
 * encoded slashes inside a segment and NUL are refused with 400 (they are how path traversal and
 * route-confusion attacks start).
 *
 * @example
 * ```ts
 * const router = new Router([{ methods: ['POST'], path: '/privnet/zkpaas/:apiKey/prove-tx', value: route }])
 * router.match('POST', '/privnet/zkpaas/abc/prove-tx') // { value: route, params: { apiKey: 'abc' } }
 * ```
 */
import { errors } from './errors.ts'

export interface RouteDefinition<T> {
  methods: readonly string[]
  path: string
  value: T
}

export interface RouteMatch<T> {
  value: T
  params: Record<string, string>
}

interface TrieNode<T> {
  statics: Map<string, TrieNode<T>>
  param?: { name: string; node: TrieNode<T> }
  rest?: { name: string; byMethod: Map<string, T> }
  byMethod: Map<string, T>
}

/** Key under which a 405 error carries the routes defined for its path (not serialisable). */
export const ROUTES_AT_PATH = Symbol('routes-at-path')

const newNode = <T>(): TrieNode<T> => ({ statics: new Map(), byMethod: new Map() })

/** Whether a node's routes can take the request: any method, or `method` when one is asked for. */
function fits<T>(byMethod: Map<string, T>, method: string | undefined): boolean {
  return method === undefined ? byMethod.size > 0 : byMethod.has(method)
}

/** Splits and decodes a request path; throws 400 for traversal, encoded slashes, NUL or bad escapes. */
export function normalisePath(rawPath: string): string[] {
  if (rawPath.charCodeAt(0) !== 47) throw errors.badPath('path must start with /')
  const segments: string[] = []
  for (const raw of rawPath.split('/')) {
    if (raw === '') continue
    let segment = raw
    if (raw.includes('%')) {
      try {
        segment = decodeURIComponent(raw)
      } catch {
        throw errors.badPath('path has an invalid percent-encoding')
      }
      if (segment.includes('/') || segment.includes('\\')) throw errors.badPath('path segment contains an encoded slash')
    }
    if (segment.includes('\0')) throw errors.badPath('path contains a NUL byte')
    if (segment === '..') throw errors.badPath('path contains ".."')
    if (segment === '.') continue
    segments.push(segment)
  }
  return segments
}

export class Router<T> {
  readonly #root: TrieNode<T> = newNode()

  constructor(routes: readonly RouteDefinition<T>[]) {
    for (const route of routes) this.#add(route)
  }

  #add(route: RouteDefinition<T>): void {
    let node = this.#root
    const parts = route.path.split('/').filter(Boolean)
    for (const [i, part] of parts.entries()) {
      if (part.startsWith('*')) {
        if (i !== parts.length - 1) throw new Error(`${route.path}: *${part.slice(1)} must be the last segment`)
        node.rest ??= { name: part.slice(1), byMethod: new Map() }
        if (node.rest.name !== part.slice(1)) throw new Error(`${route.path}: conflicting catch-all names`)
        return this.#setMethods(node.rest.byMethod, route)
      }
      if (part.startsWith(':')) {
        const name = part.slice(1)
        node.param ??= { name, node: newNode() }
        if (node.param.name !== name) throw new Error(`${route.path}: :${name} conflicts with :${node.param.name} at the same position`)
        node = node.param.node
      } else {
        let next = node.statics.get(part)
        if (!next) node.statics.set(part, (next = newNode()))
        node = next
      }
    }
    this.#setMethods(node.byMethod, route)
  }

  #setMethods(byMethod: Map<string, T>, route: RouteDefinition<T>): void {
    for (const method of route.methods) {
      if (byMethod.has(method)) throw new Error(`${method} ${route.path} is defined twice`)
      byMethod.set(method, route.value)
      if (method === 'GET' && !route.methods.includes('HEAD') && !byMethod.has('HEAD')) byMethod.set('HEAD', route.value)
    }
  }

  /**
   * The route of `method` and raw `pathname`, or undefined when none matches (404 or 405): for route
   * tables that share a path space with others, such as the admin API's modules, each of which
   * passes what is not its own to the next.
   *
   * @example
   * ```ts
   * const match = router.matchOrPass(req.method ?? 'GET', url.pathname)
   * if (match === undefined) return undefined // another module's route, or the caller's 404
   * ```
   */
  matchOrPass(method: string, pathname: string): RouteMatch<T> | undefined {
    try {
      return this.match(method, normalisePath(pathname))
    } catch (error) {
      const status = (error as { status?: unknown }).status
      if (status === 404 || status === 405) return undefined
      throw error
    }
  }

  /** Matches a normalised path. Throws 404 (no path) or 405 with `Allow` (path, other method). */
  match(method: string, segments: readonly string[]): RouteMatch<T> {
    let params: Record<string, string> = {}
    const byMethod = this.#walk(this.#root, segments, 0, params)
    if (!byMethod) throw errors.notFound('no route for this path')
    let value = byMethod.get(method)
    if (value === undefined) {
      // A less specific pattern may take this method (a catch-all beside a POST-only static path).
      const withMethod: Record<string, string> = {}
      const other = this.#walk(this.#root, segments, 0, withMethod, method)
      if (other) {
        value = other.get(method)
        params = withMethod
      }
    }
    if (value === undefined) {
      const allow = [...byMethod.keys()].join(', ')
      const error = errors.methodNotAllowed(`method ${method} is not allowed here; allowed: ${allow}`, { headers: { allow } })
      // The routes of this path travel with the error, so it can be rendered in their error format.
      Object.defineProperty(error, ROUTES_AT_PATH, { value: [...byMethod.values()] })
      throw error
    }
    return { value, params }
  }

  /** The most specific route table for the path; with `method`, the most specific one that has it. */
  #walk(node: TrieNode<T>, segments: readonly string[], i: number, params: Record<string, string>, method?: string): Map<string, T> | undefined {
    if (i === segments.length) {
      if (fits(node.byMethod, method)) return node.byMethod
      if (node.rest && fits(node.rest.byMethod, method)) {
        params[node.rest.name] = ''
        return node.rest.byMethod
      }
      return undefined
    }
    const segment = segments[i]
    const viaStatic = node.statics.get(segment)
    if (viaStatic) {
      const found = this.#walk(viaStatic, segments, i + 1, params, method)
      if (found) return found
    }
    if (node.param) {
      const found = this.#walk(node.param.node, segments, i + 1, params, method)
      if (found) {
        params[node.param.name] = segment
        return found
      }
    }
    if (node.rest && fits(node.rest.byMethod, method)) {
      params[node.rest.name] = segments.slice(i).join('/')
      return node.rest.byMethod
    }
    return undefined
  }
}
