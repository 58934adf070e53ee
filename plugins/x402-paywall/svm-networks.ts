/**
 * Solana networks of a paywall: the offer (an SPL mint, the payee's address, `extra.feePayer` of
 * the in-process facilitator) and its facilitator (x402-facilitator/svm, settlements in the same
 * store collection). Only the in-process facilitator is supported: the offer must name its fee
 * payer, which an upstream facilitator would have to be asked for.
 */
import type { PluginInit } from '../../core/proxy/plugin-api.ts'
import { settlementRecordsFrom } from '../x402-facilitator/evm/records.ts'
import type { Facilitator } from '../x402-facilitator/facilitator.ts'
import { SETTLEMENTS_COLLECTION } from '../x402-facilitator/networks.ts'
import { poolFetch, poolPlaceholderUrl, rpcPoolOf } from '../x402-facilitator/rpc-pool.ts'
import { SvmFacilitator } from '../x402-facilitator/svm/facilitator.ts'
import { readSvmSignerKey } from '../x402-facilitator/svm/keys.ts'
import { svmNetworks, type SvmNetwork } from '../x402-facilitator/svm/networks.ts'
import { decodeTransaction, messageHash } from '../x402-facilitator/svm/wire.ts'
import type { PaywallConfig, PaywallNetworkConfig, PaywallSvmAsset } from './config.ts'
import type { NetworkOffer } from './offers.ts'

/** The Solana network `name` denotes (any of its identifiers), or undefined. */
export function svmNetworkNamed(name: string): SvmNetwork | undefined {
  return svmNetworks.find((n) => n.names.has(name))
}

/** The offer of a Solana network whose fee payer is `feePayer`. */
export function svmNetworkOffer(config: PaywallConfig, entry: PaywallNetworkConfig, network: SvmNetwork, feePayer: string): NetworkOffer {
  const asset = (entry.asset ?? { address: network.defaultUsdc, decimals: 6 }) as PaywallSvmAsset
  if (!entry.payTo || entry.payTo.startsWith('0x')) throw new Error(`network ${entry.network}: set payTo to a Solana address`)
  if (asset.address.startsWith('0x')) throw new Error(`network ${entry.network}: asset must be an SPL mint`)
  const price = entry.price ?? config.price
  const common = { scheme: 'exact', asset: asset.address, payTo: entry.payTo, maxTimeoutSeconds: config.maxTimeoutSeconds, extra: { feePayer } }
  const offer: NetworkOffer = {
    chainId: 0, caip2: network.caip2, v1Network: network.v1Name,
    asset: { address: asset.address as `0x${string}`, name: 'SPL', version: '', decimals: asset.decimals },
    v2: { ...common, network: network.caip2, amount: price },
    v1: { ...common, network: network.v1Name, maxAmountRequired: price, description: config.description, mimeType: config.mimeType, outputSchema: null },
  }
  // payment-header.ts asks the offer, so that it need not import this module (and @solana/kit) itself.
  offer.paymentKey = (payload) => svmPaymentKey(offer, payload)
  return offer
}

/** Opens the in-process facilitator of a Solana paywall network; undefined (left out) without RPC or key. */
export async function openSvmPaidNetwork(
  config: PaywallConfig, entry: PaywallNetworkConfig, network: SvmNetwork, init: PluginInit,
): Promise<{ offer: NetworkOffer; facilitator: Facilitator } | undefined> {
  const settings = entry.facilitator
  if (settings.upstream) throw new Error(`network ${entry.network}: Solana networks need the in-process facilitator (rpcUrl), not an upstream`)
  const rpcUrl = settings.rpcUrl?.trim()
  if (rpcUrl && settings.rpcUpstream) throw new Error(`network ${entry.network}: set either facilitator.rpcUrl or facilitator.rpcUpstream, not both`)
  // rpcUpstream: a pool of cluster RPCs (reads fail over, sendTransaction goes once; x402-facilitator/rpc-pool.ts).
  const pool = settings.rpcUpstream ? rpcPoolOf(`network ${entry.network}`, settings.rpcUpstream, init) : undefined
  if (!rpcUrl && !pool) {
    init.log.warn({ network: entry.network }, 'x402 paywall network left out: facilitator.rpcUrl is empty')
    return undefined
  }
  const key = readSvmSignerKey(settings.signerKeyEnv)
  if (!key.ok) {
    init.log.warn({ network: entry.network }, `x402 paywall network left out: ${key.missing}`)
    return undefined
  }
  const asset = (entry.asset ?? { address: network.defaultUsdc, decimals: 6 }) as PaywallSvmAsset
  const offer = svmNetworkOffer(config, entry, network, key.signer.address)
  const facilitator = await SvmFacilitator.open(entry.network, network, [key.signer], {
    rpcUrl: pool ? poolPlaceholderUrl(pool) : rpcUrl!, ...(pool ? { rpcFetch: poolFetch(pool) } : {}), assets: [asset], rpcTimeoutMs: settings.rpcTimeoutMs, confirmTimeoutMs: settings.receiptTimeoutMs,
    pollingIntervalMs: settings.pollingIntervalMs, maxComputeUnitPrice: 5_000_000, maxComputeUnits: 200_000,
    recheckIntervalMs: config.recheckIntervalMs,
  }, settlementRecordsFrom(init.store.documents(SETTLEMENTS_COLLECTION), 'x402-paywall'), init.log)
  return { offer, facilitator }
}

/** A Solana payment's identity (its message hash), for the paywall's redemption records. */
export function svmPaymentKey(offer: NetworkOffer, payload: Record<string, any>): string | undefined {
  const transaction = payload.payload?.transaction
  if (typeof transaction !== 'string' || transaction.length > 2000) return undefined
  try {
    return `${offer.caip2}:${messageHash(decodeTransaction(new Uint8Array(Buffer.from(transaction, 'base64'))))}`
  } catch {
    return undefined
  }
}
