/**
 * An EVM network's offer (viem's address checksums): imported by facilitators.ts, which the paywall
 * loads in `create`, so that a gateway without a paywall route never loads viem.
 */
import { getAddress } from 'viem'
import { chainIdOfNetwork, resolveEvmNetwork, type EvmAssetInfo } from '../x402-facilitator/evm/chains.ts'
import type { PaywallConfig, PaywallNetworkConfig } from './config.ts'
import type { NetworkOffer } from './offers.ts'

/**
 * Builds a network's terms from the config; throws (failing the config) on an unknown network without an asset.
 * With scheme upto the v2 requirement is `upto` over Permit2 naming `facilitatorAddress` (the
 * client binds it into the permit), and v1, which has no upto, offers nothing.
 */
export function networkOffer(config: PaywallConfig, entry: PaywallNetworkConfig, facilitatorAddress?: string): NetworkOffer {
  const chainId = chainIdOfNetwork(entry.network)
  if (chainId === undefined) throw new Error(`network "${entry.network}" is neither a known short name nor eip155:<chain id>`)
  const known = resolveEvmNetwork(chainId)
  // Solana entries never reach here (svm-networks.ts); EVM entries carry an EIP-3009 asset.
  const asset = (entry.asset as EvmAssetInfo | undefined) ?? known?.defaultUsdc
  if (!asset) throw new Error(`network "${entry.network}" has no default asset; set asset`)
  const upto = config.scheme === 'upto'
  if (upto && !facilitatorAddress) throw new Error(`network "${entry.network}": scheme upto needs the facilitator's address (facilitator.facilitatorAddress for an upstream)`)
  const common = {
    scheme: upto ? 'upto' : 'exact',
    asset: getAddress(asset.address),
    payTo: getAddress(entry.payTo ?? config.payTo),
    maxTimeoutSeconds: config.maxTimeoutSeconds,
    extra: upto
      ? { name: asset.name, version: asset.version, assetTransferMethod: 'permit2', facilitatorAddress: getAddress(facilitatorAddress!) }
      : { name: asset.name, version: asset.version } as Record<string, string>,
  }
  const price = entry.price ?? config.price
  const caip2 = `eip155:${chainId}`
  const v1Network = known?.v1Name ?? caip2
  return {
    chainId, caip2, v1Network, asset: { ...asset, address: common.asset },
    v2: { ...common, network: caip2, amount: price },
    v1: upto ? undefined : { ...common, network: v1Network, maxAmountRequired: price, description: config.description, mimeType: config.mimeType, outputSchema: null },
  }
}
