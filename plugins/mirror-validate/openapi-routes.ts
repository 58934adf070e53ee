/**
 * Every operation of the mirror node's REST API (compiled from its pinned OpenAPI document into
 * openapi-operations.json, see openapi-compile.ts) with the facts the document does not hold,
 * read from the node's handlers (v0.160): which service answers it, how its handler walks the
 * query, what its path parameters are called in error texts, which keys it parses as bounds,
 * and how long an answer may be cached (its class).
 */
import { createRequire } from 'node:module'
import type { MirrorOperation, ParamSchema } from './openapi-compile.ts'
import type { MirrorRouteName } from './routes.ts'

const operations = createRequire(import.meta.url)('./openapi-operations.json') as MirrorOperation[]

/**
 * How long an answer may be kept (see the README's "Cache classes"):
 * - `immutable`: a record that never changes once it exists (a transaction, a block, a contract
 *   result, a topic message); only 200s are stored, so a not-yet-existing one is never cached;
 * - `current`: the current state of one entity or of the network; it changes with any transaction;
 * - `latest`: a list whose first page shows the newest records; it changes every block (~2 s);
 * - `none`: never cached (simulations, estimates).
 */
export type CacheClass = 'immutable' | 'current' | 'latest' | 'none'

/**
 * How the handler walks the query:
 * - `filters`: the filter builder (counts, then bad values, then unknown keys), path checked first;
 * - `in-order`: the older validator (query order, unknown keys in place), run before the path check;
 * - `ignored`: the handler never looks at the query;
 * - `lenient`: rest-java / web3 (Spring): values are bound by type, unknown keys are ignored.
 */
export type QueryWalk = 'filters' | 'in-order' | 'ignored' | 'lenient'

export interface OperationFacts {
  /** One of the eight routes with hand-written rules (rules.ts), if this is one. */
  legacy?: MirrorRouteName
  walk: QueryWalk
  cache: CacheClass
  /** Keys the handler parses into bounds: one eq, one gt/gte, one lt/lte each, no ne. */
  bounds?: readonly string[]
}

const FACTS: Record<string, OperationFacts> = {
  getAccounts: { legacy: 'accounts.list', walk: 'in-order', cache: 'current' },
  getAccount: { legacy: 'accounts.get', walk: 'filters', cache: 'current' },
  getOutstandingTokenAirdrops: { walk: 'lenient', cache: 'current' },
  getPendingTokenAirdrops: { walk: 'lenient', cache: 'current' },
  getCryptoAllowances: { walk: 'filters', cache: 'current' },
  getNftAllowances: { walk: 'lenient', cache: 'current' },
  getTokenAllowances: { walk: 'filters', cache: 'current', bounds: ['spender.id', 'token.id'] },
  getHooks: { walk: 'lenient', cache: 'current' },
  getHookStorage: { walk: 'lenient', cache: 'current' },
  getNftsByAccountId: { walk: 'filters', cache: 'current', bounds: ['token.id', 'serialnumber'] },
  getStakingRewards: { walk: 'filters', cache: 'latest' },
  getTokensByAccountId: { walk: 'filters', cache: 'current' },
  getBalances: { walk: 'in-order', cache: 'current' },
  getBlocks: { walk: 'filters', cache: 'latest' },
  getBlock: { walk: 'in-order', cache: 'immutable' },
  getContracts: { walk: 'filters', cache: 'current' },
  contractCall: { walk: 'lenient', cache: 'none' },
  getContractsResults: { walk: 'filters', cache: 'latest' },
  getContractsLogs: { walk: 'filters', cache: 'latest', bounds: ['timestamp', 'index'] },
  getContractResultByTransactionIdOrHash: { walk: 'in-order', cache: 'immutable' },
  getContractActions: { walk: 'filters', cache: 'immutable' },
  getContractOpcodes: { walk: 'lenient', cache: 'immutable' },
  getContract: { walk: 'filters', cache: 'current' },
  getContractResultsByContractId: { walk: 'filters', cache: 'latest' },
  getContractLogsByContractId: { walk: 'filters', cache: 'latest', bounds: ['timestamp', 'index'] },
  getContractResultByIdAndTimestamp: { walk: 'ignored', cache: 'immutable' },
  getContractState: { walk: 'filters', cache: 'current' },
  getNetworkExchangeRate: { walk: 'lenient', cache: 'current' },
  getNetworkFees: { walk: 'lenient', cache: 'current' },
  estimateFees: { walk: 'lenient', cache: 'none' },
  getNetworkNodes: { walk: 'lenient', cache: 'current' },
  getRegisteredNodes: { walk: 'lenient', cache: 'current' },
  getNetworkStake: { walk: 'lenient', cache: 'current' },
  getNetworkSupply: { walk: 'lenient', cache: 'current' },
  getSchedules: { walk: 'filters', cache: 'current' },
  getSchedule: { walk: 'in-order', cache: 'current' },
  getTokens: { legacy: 'tokens.list', walk: 'filters', cache: 'current' },
  getToken: { legacy: 'tokens.get', walk: 'filters', cache: 'current' },
  getTokenBalances: { walk: 'filters', cache: 'current' },
  getNfts: { walk: 'filters', cache: 'current' },
  getNft: { walk: 'in-order', cache: 'current' },
  getNftTransactions: { walk: 'filters', cache: 'latest' },
  getTopicMessageByTimestamp: { walk: 'in-order', cache: 'immutable' },
  getTopic: { legacy: 'topics.get', walk: 'lenient', cache: 'current' },
  getTopicMessages: { legacy: 'topics.messages', walk: 'filters', cache: 'latest' },
  getTopicMessageByIdAndSequenceNumber: { walk: 'in-order', cache: 'immutable' },
  getTransactions: { legacy: 'transactions.list', walk: 'filters', cache: 'latest' },
  getTransaction: { legacy: 'transactions.get', walk: 'filters', cache: 'immutable' },
}

export interface ResolvedOperation extends MirrorOperation, OperationFacts {
  /** Path segments; `{name}` segments are parameters. */
  segments: readonly string[]
  /** Query parameter name (lower-cased) -> its schema. */
  query: ReadonlyMap<string, ParamSchema>
}

function resolveAll(): ResolvedOperation[] {
  return operations.map((operation) => {
    const facts = FACTS[operation.operationId]
    if (!facts) throw new Error(`mirror operation ${operation.operationId} has no handler facts in openapi-routes.ts`)
    const query = new Map(operation.params.filter((p) => p.in === 'query').map((p) => [p.name.toLowerCase(), p.schema]))
    return { ...operation, ...facts, segments: operation.path.split('/').slice(1), query }
  })
}

/** All operations of the pinned API, with their handler facts. */
export const MIRROR_OPERATIONS: readonly ResolvedOperation[] = resolveAll()

/** Operation ids that have handler facts (the test checks they match the document one to one). */
export const FACT_IDS: readonly string[] = Object.keys(FACTS)

export interface OperationMatch {
  operation: ResolvedOperation
  /** Decoded path parameters by their OpenAPI name. */
  params: Record<string, string>
}

const byLength = new Map<string, ResolvedOperation[]>()
for (const operation of MIRROR_OPERATIONS) {
  const key = `${operation.method} ${operation.segments.length}`
  byLength.set(key, [...(byLength.get(key) ?? []), operation])
}

/**
 * The operation serving a path below `/api/v1` (already split into decoded segments), or `null`
 * (the node's 404). Static segments win over parameters, as in the node's router tables.
 * @example matchOperation('get', ['blocks', '12']) // { operation: getBlock, params: { hashOrNumber: '12' } }
 */
export function matchOperation(method: 'get' | 'post', segments: readonly string[]): OperationMatch | null {
  let best: ResolvedOperation | undefined
  let bestStatics = -1
  for (const operation of byLength.get(`${method} ${segments.length}`) ?? []) {
    let statics = 0
    let fits = true
    for (let i = 0; i < segments.length && fits; i++) {
      const part = operation.segments[i]
      if (part.charCodeAt(0) === 123) fits = segments[i] !== ''
      else if (part === segments[i]) statics += 1 << (segments.length - i)
      else fits = false
    }
    if (fits && statics > bestStatics) {
      best = operation
      bestStatics = statics
    }
  }
  if (!best) return null
  const params: Record<string, string> = {}
  best.segments.forEach((part, i) => {
    if (part.charCodeAt(0) === 123) params[part.slice(1, -1)] = segments[i]
  })
  return { operation: best, params }
}
