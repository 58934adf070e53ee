/**
 * The eight mirror-node REST routes the gateway proxies, with what the real node does per route:
 * its path below `/api/v1`, the `cache-control` it sends on success (`response.headers.path` in
 * the REST module's application.yml; `/topics/{id}` is served by rest-java with its own table),
 * and, for lists, the default order and the field `links.next` pages on.
 */

export type MirrorRouteName =
  | 'accounts.list'
  | 'accounts.get'
  | 'transactions.list'
  | 'transactions.get'
  | 'tokens.list'
  | 'tokens.get'
  | 'topics.get'
  | 'topics.messages'

export interface MirrorRouteInfo {
  /** Path below `/api/v1`, with the path parameter as `:name` (the gateway's own pattern style). */
  path: string
  /** Path parameter names a gateway route may use for this route's id; the first is the spec's. */
  pathParamNames: readonly string[]
  /** `cache-control` of a successful answer from the real node. */
  cacheControl: string
  /** Lists only: default `order`, and the query field the next-page cursor is written to. */
  list?: { defaultOrder: 'asc' | 'desc'; cursor: string }
}

/** Per-route facts. @example MIRROR_ROUTES['tokens.get'].cacheControl // 'public, max-age=5' */
export const MIRROR_ROUTES: Readonly<Record<MirrorRouteName, MirrorRouteInfo>> = {
  'accounts.list': {
    path: '/accounts',
    pathParamNames: [],
    cacheControl: 'public, max-age=10',
    list: { defaultOrder: 'asc', cursor: 'account.id' },
  },
  'accounts.get': {
    path: '/accounts/:id',
    pathParamNames: ['id', 'idOrAliasOrEvmAddress', 'accountId'],
    cacheControl: 'public, max-age=2',
    // The embedded transaction list pages like /transactions.
    list: { defaultOrder: 'desc', cursor: 'timestamp' },
  },
  'transactions.list': {
    path: '/transactions',
    pathParamNames: [],
    cacheControl: 'public, max-age=2',
    list: { defaultOrder: 'desc', cursor: 'timestamp' },
  },
  'transactions.get': {
    path: '/transactions/:transactionId',
    pathParamNames: ['transactionId', 'transactionIdOrHash', 'id'],
    cacheControl: 'public, max-age=600',
  },
  'tokens.list': {
    path: '/tokens',
    pathParamNames: [],
    cacheControl: 'public, max-age=10',
    list: { defaultOrder: 'asc', cursor: 'token.id' },
  },
  'tokens.get': {
    path: '/tokens/:tokenId',
    pathParamNames: ['tokenId', 'id'],
    cacheControl: 'public, max-age=5',
  },
  'topics.get': {
    path: '/topics/:topicId',
    pathParamNames: ['topicId', 'id'],
    cacheControl: 'public, max-age=5',
  },
  'topics.messages': {
    path: '/topics/:topicId/messages',
    pathParamNames: ['topicId', 'id'],
    // No per-path entry upstream: the REST module's default.
    cacheControl: 'public, max-age=1',
    list: { defaultOrder: 'asc', cursor: 'timestamp' },
  },
}

const SINGLE_ITEM_ROUTES = new Map<string, MirrorRouteName>([
  ['accounts', 'accounts.get'],
  ['transactions', 'transactions.get'],
  ['tokens', 'tokens.get'],
  ['topics', 'topics.get'],
])

/**
 * Matches a path below `/api/v1` (no query) to one of the eight routes and its decoded id.
 * @example matchMirrorPath('/accounts/0.0.1001') // { route: 'accounts.get', id: '0.0.1001' }
 */
export function matchMirrorPath(path: string): { route: MirrorRouteName; id?: string } | null {
  const segments = path.replace(/\/+$/, '').split('/').slice(1)
  let id: string | undefined
  try {
    id = segments[1] === undefined ? undefined : decodeURIComponent(segments[1])
  } catch {
    return null
  }
  const [resource] = segments
  if (segments.length === 1) {
    if (resource === 'accounts') return { route: 'accounts.list' }
    if (resource === 'transactions') return { route: 'transactions.list' }
    if (resource === 'tokens') return { route: 'tokens.list' }
    return null
  }
  if (segments.length === 2 && id !== '') {
    const route = SINGLE_ITEM_ROUTES.get(resource)
    return route ? { route, id } : null
  }
  if (segments.length === 3 && resource === 'topics' && segments[2] === 'messages' && id !== '') {
    return { route: 'topics.messages', id }
  }
  return null
}
