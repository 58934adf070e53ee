/**
 * The EVM networks the gateway spec lists, their names in both x402 versions, and the `supported`
 * answer built from what is configured.
 *
 * Network strings: v1 uses short names (`base-sepolia`), v2 uses CAIP-2 (`eip155:84532`); the spec
 * says both forms occur, so {@link resolveEvmNetwork} accepts either. Short names and default USDC
 * deployments are from the x402 reference (v1 name map; DEFAULT_STABLECOINS; Circle's tables for
 * Ethereum and Sepolia, which the reference does not list).
 */
import type { SupportedKind, SupportedResponse } from './types.ts'

export interface EvmAssetInfo {
  address: `0x${string}`
  /** EIP-712 domain name, which is not uniform across USDC deployments. */
  name: string
  version: string
  decimals: number
}

export interface EvmNetwork {
  chainId: number
  /** `eip155:<chainId>` */
  caip2: string
  /** v1 short name. */
  v1Name: string
  /** URL segments of the facilitator path `/x402/{chain}/{network}/...`. */
  pathChain: 'ethereum' | 'polygon' | 'base'
  pathNetwork: 'mainnet' | 'testnet'
  testnet: boolean
  defaultUsdc: EvmAssetInfo
}

function network(
  chainId: number, v1Name: string, pathChain: EvmNetwork['pathChain'], pathNetwork: EvmNetwork['pathNetwork'],
  usdc: `0x${string}`, usdcName: string,
): EvmNetwork {
  return {
    chainId, caip2: `eip155:${chainId}`, v1Name, pathChain, pathNetwork, testnet: pathNetwork === 'testnet',
    defaultUsdc: { address: usdc, name: usdcName, version: '2', decimals: 6 },
  }
}

/** The six EVM networks of the gateway spec. */
export const evmNetworks: readonly EvmNetwork[] = [
  network(1, 'ethereum', 'ethereum', 'mainnet', '0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48', 'USD Coin'),
  network(11155111, 'sepolia', 'ethereum', 'testnet', '0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238', 'USDC'),
  network(137, 'polygon', 'polygon', 'mainnet', '0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359', 'USD Coin'),
  network(80002, 'polygon-amoy', 'polygon', 'testnet', '0x41E94Eb019C0762f9Bfcf9Fb1E58725BfB0e7582', 'USDC'),
  network(8453, 'base', 'base', 'mainnet', '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913', 'USD Coin'),
  network(84532, 'base-sepolia', 'base', 'testnet', '0x036CbD53842c5426634e7929541eC2318f3dCF7e', 'USDC'),
]

const byChainId = new Map(evmNetworks.map((n) => [n.chainId, n]))
const byV1Name = new Map(evmNetworks.map((n) => [n.v1Name, n]))

/**
 * Finds a spec network by CAIP-2 id, v1 short name or chain id; undefined when it is not one of the six.
 *
 * @example
 * ```ts
 * resolveEvmNetwork('base-sepolia')?.chainId   // 84532
 * resolveEvmNetwork('eip155:84532')?.v1Name     // 'base-sepolia'
 * ```
 */
export function resolveEvmNetwork(network: string | number): EvmNetwork | undefined {
  if (typeof network === 'number') return byChainId.get(network)
  const chainId = parseCaip2ChainId(network)
  return chainId === undefined ? byV1Name.get(network) : byChainId.get(chainId)
}

/** The chain id of `eip155:<id>`, or undefined for anything else. */
export function parseCaip2ChainId(network: string): number | undefined {
  const match = /^eip155:([1-9][0-9]{0,15})$/.exec(network)
  return match ? Number(match[1]) : undefined
}

/**
 * The chain id a network string names: CAIP-2 for any chain, short names for the six spec networks.
 * Lets a facilitator serve an EVM chain outside the spec's list under its CAIP-2 id.
 */
export function chainIdOfNetwork(network: string): number | undefined {
  return parseCaip2ChainId(network) ?? byV1Name.get(network)?.chainId
}

/** The spec network behind facilitator path segments such as `base` + `testnet`. */
export function evmNetworkForPath(chain: string, pathNetwork: string): EvmNetwork | undefined {
  return evmNetworks.find((n) => n.pathChain === chain && n.pathNetwork === pathNetwork)
}

export interface ConfiguredEvmNetwork {
  /** CAIP-2 id, v1 short name or chain id. */
  network: string | number
  /** Facilitator signer address(es) settling on this network. */
  signers: readonly string[]
}

/**
 * The `supported` answer for the configured EVM networks: a v1 kind under the short name (when the
 * network has one) and a v2 kind under `eip155:<id>` for `exact` (EIP-3009 and Permit2 payloads),
 * a v2 `upto` kind (Permit2) naming the facilitator address clients must bind, plus the signers
 * under `eip155:*`.
 *
 * @example
 * ```ts
 * supportedKinds([{ network: 'eip155:11155111', signers: ['0xFacilitator…'] }])
 * // { kinds: [{x402Version:1,scheme:'exact',network:'sepolia',extra:{assetTransferMethods:['eip3009','permit2']}},
 * //           {x402Version:2,scheme:'exact',network:'eip155:11155111',extra:{…}},
 * //           {x402Version:2,scheme:'upto',network:'eip155:11155111',extra:{facilitatorAddress:'0xFacilitator…',…}}],
 * //   extensions: [], signers: {'eip155:*': ['0xFacilitator…']} }
 * ```
 */
export function supportedKinds(configured: readonly ConfiguredEvmNetwork[]): SupportedResponse {
  const kinds: SupportedKind[] = []
  const signers = new Set<string>()
  const seen = new Set<string>()
  const add = (kind: SupportedKind) => {
    const key = `${kind.x402Version}|${kind.scheme}|${kind.network}`
    if (!seen.has(key)) {
      seen.add(key)
      kinds.push(kind)
    }
  }
  for (const entry of configured) {
    const known = resolveEvmNetwork(entry.network)
    const chainId = known?.chainId ?? (typeof entry.network === 'number' ? entry.network : chainIdOfNetwork(entry.network))
    if (chainId === undefined) throw new Error(`not an EVM network: ${String(entry.network)}`)
    // exact accepts EIP-3009 and Permit2 payloads under both versions; upto (Permit2 only, v2)
    // needs the client to bind the settling facilitator, so its kind names our signer.
    const methods = { assetTransferMethods: ['eip3009', 'permit2'] }
    if (known) add({ x402Version: 1, scheme: 'exact', network: known.v1Name, extra: methods })
    add({ x402Version: 2, scheme: 'exact', network: `eip155:${chainId}`, extra: methods })
    const [facilitatorAddress] = entry.signers
    if (facilitatorAddress) {
      add({ x402Version: 2, scheme: 'upto', network: `eip155:${chainId}`, extra: { facilitatorAddress, assetTransferMethods: ['permit2'] } })
    }
    for (const signer of entry.signers) signers.add(signer)
  }
  return { kinds, extensions: [], signers: signers.size > 0 ? { 'eip155:*': [...signers] } : {} }
}
