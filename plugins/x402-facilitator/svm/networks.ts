/**
 * The Solana networks of the gateway spec, the identifiers each is known by, and the `supported`
 * answer.
 *
 * | path            | spec id          | official @x402/svm v1 name | CAIP-2 (v2)                                  |
 * |-----------------|------------------|----------------------------|----------------------------------------------|
 * | solana/mainnet  | `solana-mainnet` | `solana`                   | `solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp`    |
 * | solana/testnet  | `solana-testnet` | `solana-testnet`           | `solana:4uhcVJyU9pJkvQyS88uRDiswHXSCkY3z`    |
 *
 * All of a network's identifiers are accepted in verify / settle. Devnet (`solana-devnet`,
 * `solana:EtWTRABZ…`) is a different cluster and is not served under `solana/testnet`.
 */
import type { SupportedKind, SupportedResponse } from '../evm/types.ts'

export interface SvmNetwork {
  pathNetwork: 'mainnet' | 'testnet'
  /** CAIP-2 id: `solana:` + the first 32 characters of the genesis hash. */
  caip2: string
  /** The gateway spec's protocol identifier. */
  specId: string
  /** The official SDK's v1 name. */
  v1Name: string
  /** Every string verify / settle accept for this network. */
  names: ReadonlySet<string>
  /** The cluster's USDC mint (classic Token program, 6 decimals). */
  defaultUsdc: string
}

function network(pathNetwork: SvmNetwork['pathNetwork'], caip2: string, specId: string, v1Name: string, usdc: string): SvmNetwork {
  return { pathNetwork, caip2, specId, v1Name, names: new Set([caip2, specId, v1Name]), defaultUsdc: usdc }
}

export const svmNetworks: readonly SvmNetwork[] = [
  network('mainnet', 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp', 'solana-mainnet', 'solana', 'EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v'),
  network('testnet', 'solana:4uhcVJyU9pJkvQyS88uRDiswHXSCkY3z', 'solana-testnet', 'solana-testnet', '4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU'),
]

/** The network behind the path segment (`mainnet` / `testnet`). */
export function svmNetworkForPath(pathNetwork: string): SvmNetwork | undefined {
  return svmNetworks.find((n) => n.pathNetwork === pathNetwork)
}

/**
 * The `supported` answer of one Solana network: v1 kinds under the official name and the spec id,
 * a v2 kind under CAIP-2, each with `extra.feePayer` (one of the signers, chosen at random), and
 * the signers under `solana:*`.
 *
 * @example
 * ```ts
 * svmSupportedKinds(svmNetworkForPath('testnet')!, ['Fee…'])
 * // { kinds: [{x402Version:1,scheme:'exact',network:'solana-testnet',extra:{feePayer:'Fee…'}}, …], … }
 * ```
 */
export function svmSupportedKinds(network: SvmNetwork, signers: readonly string[]): SupportedResponse {
  const feePayer = () => ({ feePayer: signers[Math.floor(Math.random() * signers.length)]! })
  const kinds: SupportedKind[] = [...new Set([network.v1Name, network.specId])].map((name) => ({ x402Version: 1, scheme: 'exact', network: name, extra: feePayer() }))
  kinds.push({ x402Version: 2, scheme: 'exact', network: network.caip2, extra: feePayer() })
  return { kinds, extensions: [], signers: { 'solana:*': [...signers] } }
}
