/**
 * One served EVM chain: RPC clients, the facilitator's signing account and the accepted assets.
 * verify.ts and settle.ts take this object; the HTTP plugin builds one per configured chain.
 */
import {
  createPublicClient, createWalletClient, defineChain, getAddress, http,
  type Address, type Hex, type LocalAccount, type PublicClient, type WalletClient, type Chain, type Transport,
} from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { checkAssetMetadata } from './assets.ts'
import { boundedFetch } from './bounded-fetch.ts'
import { chainIdOfNetwork, resolveEvmNetwork, type EvmAssetInfo, type EvmNetwork } from './chains.ts'

export interface EvmChainContext {
  chainId: number
  /** `eip155:<chainId>` */
  caip2: string
  /** The spec network entry, when the chain is one of the six. */
  network: EvmNetwork | undefined
  publicClient: PublicClient
  walletClient: WalletClient<Transport, Chain, LocalAccount>
  /** Address that signs and pays gas for settlements. */
  signerAddress: Address
  /** Assets accepted on this chain, addresses checksummed. */
  assets: readonly EvmAssetInfo[]
  /** Current Unix time in seconds; replaceable for clock-skew tests. */
  now(): number
  /** How often receipts are polled while settling. */
  pollingIntervalMs: number
  /**
   * Lower-cased addresses of assets already seen with code. Code cannot go away (SELFDESTRUCT only
   * clears code created in the same transaction since Cancun), so verify reads it once per asset.
   */
  assetsWithCode: Set<string>
}

export interface EvmChainOptions {
  /** CAIP-2 id, v1 short name or chain id. */
  network: string | number
  rpcUrl: string
  /** The facilitator's key. Never logged; only its address is ever shown. */
  signerPrivateKey: Hex
  /** Accepted assets; default: the network's USDC from chains.ts. */
  assets?: readonly EvmAssetInfo[]
  /** Receipt polling interval; default 1000 ms (use ~50 ms against a local chain). */
  pollingIntervalMs?: number
  /** Per-RPC-call timeout, head and body; default 10 s. */
  rpcTimeoutMs?: number
  /** Does the HTTP exchange instead of the global fetch: a pool's (rpc-pool.ts), for `rpcUpstream`. */
  rpcFetch?: typeof fetch
  /** viem transport retries; default 0 (a revert must not cost retries; settle has its own bounds). */
  rpcRetryCount?: number
  now?: () => number
}

/**
 * Builds the context for one chain. Does no I/O; call {@link checkEvmChainContext} at start.
 *
 * @example
 * ```ts
 * const ctx = createEvmChainContext({ network: 'eip155:84532', rpcUrl, signerPrivateKey: key })
 * const problems = await checkEvmChainContext(ctx)
 * if (problems.length) throw new Error(problems.join('\n'))
 * ```
 */
export function createEvmChainContext(options: EvmChainOptions): EvmChainContext {
  const network = resolveEvmNetwork(options.network)
  const chainId = network?.chainId
    ?? (typeof options.network === 'number' ? options.network : chainIdOfNetwork(options.network))
  if (chainId === undefined) throw new Error(`unknown EVM network ${JSON.stringify(options.network)}`)
  const assets = (options.assets ?? (network ? [network.defaultUsdc] : [])).map((a) => ({ ...a, address: getAddress(a.address) }))
  if (assets.length === 0) throw new Error(`no assets configured for eip155:${chainId}`)
  const pollingIntervalMs = options.pollingIntervalMs ?? 1000
  const chain = defineChain({
    id: chainId, name: network?.v1Name ?? `eip155:${chainId}`,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [options.rpcUrl] } },
  })
  const timeout = options.rpcTimeoutMs ?? 10_000
  // batch: the reads of one verify (started in the same tick) travel as one JSON-RPC batch.
  // viem's timeout stops at the head; the bounded fetch holds the body to the same deadline.
  const transport = http(options.rpcUrl, { retryCount: options.rpcRetryCount ?? 0, timeout, batch: true, fetchFn: boundedFetch(timeout, undefined, options.rpcFetch) })
  const account = privateKeyToAccount(options.signerPrivateKey)
  return {
    chainId,
    caip2: `eip155:${chainId}`,
    network,
    publicClient: createPublicClient({ chain, transport, pollingInterval: pollingIntervalMs }) as PublicClient,
    walletClient: createWalletClient({ account, chain, transport, pollingInterval: pollingIntervalMs }),
    signerAddress: account.address,
    assets,
    now: options.now ?? (() => Math.floor(Date.now() / 1000)),
    pollingIntervalMs,
    assetsWithCode: new Set(),
  }
}

/**
 * Start-up checks: the RPC answers with the configured chain id and every asset's name, version
 * and decimals match the chain. Returns one line per problem (empty when all is well).
 */
export async function checkEvmChainContext(ctx: EvmChainContext): Promise<string[]> {
  const problems: string[] = []
  try {
    const actual = await ctx.publicClient.getChainId()
    if (actual !== ctx.chainId) return [`RPC for ${ctx.caip2} reports chain id ${actual}`]
  } catch (error) {
    return [`RPC for ${ctx.caip2} is unreachable: ${(error as Error).name}`]
  }
  for (const asset of ctx.assets) {
    const check = await checkAssetMetadata(ctx.publicClient, asset)
    for (const problem of check.problems) problems.push(`${ctx.caip2} asset ${asset.address}: ${problem}`)
  }
  return problems
}
