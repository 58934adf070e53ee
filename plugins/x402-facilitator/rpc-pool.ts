/**
 * A chain RPC served by a pool (`rpcUpstream`: a named upstream of gateway.yaml with several
 * targets): a `fetch` for viem's transport and the Solana client that sends each JSON-RPC body
 * through the pool (core/proxy/upstream/), so the facilitator's chain reads get the proxy's passive
 * health, ejection, failover and per-target metrics (`tollgate_upstream_target_*`).
 *
 * Only reads are retried on another target: a body whose every call is in {@link READ_METHODS}.
 * A write (eth_sendRawTransaction, sendTransaction) or any method not listed goes to one target,
 * once: a send that failed ambiguously may still have reached the chain, and settle already turns
 * that into `settlement_pending` with the hash rather than a second broadcast.
 *
 * No viem or @solana/kit here: this module is loaded with the plugin's chain code, in create().
 */
import { Readable } from 'node:stream'
import type { PluginInit, UpstreamHandle } from '../../core/proxy/plugin-api.ts'

/** JSON-RPC methods that change nothing on the chain (EVM and Solana): safe to send to another target. */
export const READ_METHODS: ReadonlySet<string> = new Set([
  // EVM
  'eth_chainId', 'net_version', 'web3_clientVersion', 'eth_syncing', 'eth_blockNumber', 'eth_call', 'eth_estimateGas',
  'eth_getBalance', 'eth_getCode', 'eth_getStorageAt', 'eth_getTransactionCount', 'eth_getTransactionReceipt',
  'eth_getTransactionByHash', 'eth_getBlockByNumber', 'eth_getBlockByHash', 'eth_gasPrice', 'eth_maxPriorityFeePerGas',
  'eth_feeHistory', 'eth_getLogs',
  // Fills a transaction's fields (nonce, gas, fees) without signing or sending it; viem's prepare asks it first.
  'eth_fillTransaction',
  // Solana
  'getLatestBlockhash', 'isBlockhashValid', 'simulateTransaction', 'getSignatureStatuses', 'getAccountInfo',
  'getMultipleAccounts', 'getBalance', 'getSlot', 'getHealth', 'getVersion', 'getGenesisHash', 'getEpochInfo',
  'getMinimumBalanceForRentExemption', 'getFeeForMessage', 'getTokenAccountBalance',
])

/** True when every call of a JSON-RPC body (one call or a batch) is a read. Anything unparsable is not. */
export function readOnlyBody(body: string): boolean {
  let parsed: unknown
  try {
    parsed = JSON.parse(body)
  } catch {
    return false
  }
  const calls = Array.isArray(parsed) ? parsed : [parsed]
  if (calls.length === 0) return false
  return calls.every((call) => typeof (call as { method?: unknown } | null)?.method === 'string' && READ_METHODS.has((call as { method: string }).method))
}

/**
 * The named upstream an `rpcUpstream` refers to. Throws (failing the config) when it does not exist
 * or a target URL carries a query string: pools send only the URL's path, so a key in the query
 * would be dropped silently.
 */
export function rpcPoolOf(label: string, name: string, init: PluginInit): UpstreamHandle {
  if (!init.upstreamNames.includes(name)) throw new Error(`${label}: unknown rpcUpstream "${name}"`)
  const upstream = init.upstream(name)
  for (const target of upstream.config.targets) {
    if (!/^https?:\/\//.test(target.url)) throw new Error(`${label}: rpcUpstream "${name}" target ${target.name} must be an http(s) URL`)
    if (new URL(target.url).search !== '') {
      throw new Error(`${label}: rpcUpstream "${name}" target ${target.name} has a query string, which pools do not send; put the key in the path`)
    }
  }
  return upstream
}

/** What viem and the Solana client are given as the URL of a pooled RPC; never fetched (the pool picks the target). */
export function poolPlaceholderUrl(upstream: UpstreamHandle): string {
  return `http://rpc-upstream.invalid/${encodeURIComponent(upstream.name)}`
}

/**
 * A `fetch` that POSTs the body through the pool: retried on another target for reads only. The
 * URL it is called with is ignored. The answer's body streams, so a caller's deadline and size cap
 * (evm/bounded-fetch.ts) still apply to it.
 *
 * @example
 * ```ts
 * const transport = http(poolPlaceholderUrl(pool), { fetchFn: boundedFetch(10_000, undefined, poolFetch(pool)) })
 * ```
 */
export function poolFetch(upstream: UpstreamHandle): typeof fetch {
  return async (_input, init) => {
    const body = typeof init?.body === 'string' ? init.body : init?.body ? Buffer.from(init.body as ArrayBuffer).toString('utf8') : ''
    const response = await upstream.pool.request({
      path: upstream.basePath || '/',
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body,
      signal: init?.signal ?? undefined,
      retrySafe: readOnlyBody(body),
    })
    const headers = new Headers()
    for (const [name, value] of Object.entries(response.headers)) {
      if (value === undefined) continue
      for (const item of Array.isArray(value) ? value : [value]) headers.append(name, item)
    }
    // A Response with a body cannot have these statuses; no chain RPC should answer them anyway.
    if (response.statusCode === 204 || response.statusCode === 205 || response.statusCode === 304) {
      await response.body.dump()
      return new Response(null, { status: response.statusCode, headers })
    }
    return new Response(Readable.toWeb(response.body) as ReadableStream, { status: response.statusCode, headers })
  }
}
