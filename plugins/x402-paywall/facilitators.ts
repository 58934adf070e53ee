/**
 * The facilitator behind each network of a paywall: the built-in one in process (the same code as
 * the x402-facilitator handler, settlements in the same store collection), or a facilitator over
 * HTTP (a named upstream). A network whose in-process facilitator lacks an RPC URL or a signer key
 * is left out of the offer, with a warning, rather than failing the whole config.
 */
import { privateKeyToAccount } from 'viem/accounts'
import type { PluginInit } from '../../core/proxy/plugin-api.ts'
import { chainIdOfNetwork } from '../x402-facilitator/evm/chains.ts'
import { settlementRecordsFrom } from '../x402-facilitator/evm/records.ts'
import type { Facilitator } from '../x402-facilitator/facilitator.ts'
import { LocalFacilitator } from '../x402-facilitator/local-facilitator.ts'
import { SETTLEMENTS_COLLECTION } from '../x402-facilitator/networks.ts'
import { RemoteFacilitator } from '../x402-facilitator/remote-facilitator.ts'
import { poolFetch, poolPlaceholderUrl, rpcPoolOf } from '../x402-facilitator/rpc-pool.ts'
import { readSignerKey } from '../x402-facilitator/signer-key.ts'
import type { PaywallConfig, PaywallNetworkConfig } from './config.ts'
import { networkOffer } from './evm-offer.ts'
import type { NetworkOffer } from './offers.ts'
import { openSvmPaidNetwork, svmNetworkNamed } from './svm-networks.ts'

export interface PaidNetwork {
  offer: NetworkOffer
  facilitator: Facilitator
}

async function open(config: PaywallConfig, entry: PaywallNetworkConfig, init: PluginInit): Promise<PaidNetwork | undefined> {
  const svm = svmNetworkNamed(entry.network)
  if (svm) return openSvmPaidNetwork(config, entry, svm, init)
  const settings = entry.facilitator
  const rpcUrl = settings.rpcUrl?.trim()
  const label = entry.network
  const upto = config.scheme === 'upto'
  const sources = [rpcUrl && 'rpcUrl', settings.rpcUpstream && 'rpcUpstream', settings.upstream && 'upstream'].filter(Boolean)
  if (sources.length > 1) throw new Error(`network ${label}: set only one of facilitator.rpcUrl, facilitator.rpcUpstream or facilitator.upstream, not ${sources.join(' and ')}`)
  if (settings.upstream) {
    if (!init.upstreamNames.includes(settings.upstream)) throw new Error(`network ${label}: unknown upstream "${settings.upstream}"`)
    const offer = networkOffer(config, entry, upto ? settings.facilitatorAddress : undefined)
    return { offer, facilitator: new RemoteFacilitator(label, init.upstream(settings.upstream), init.log) }
  }
  // rpcUpstream: a pool of chain RPCs (reads fail over, sends go once; x402-facilitator/rpc-pool.ts).
  const pool = settings.rpcUpstream ? rpcPoolOf(`network ${label}`, settings.rpcUpstream, init) : undefined
  if (!rpcUrl && !pool) {
    init.log.warn({ network: label }, 'x402 paywall network left out: facilitator.rpcUrl is empty')
    return undefined
  }
  const key = readSignerKey(settings.signerKeyEnv)
  if (!key.ok) {
    init.log.warn({ network: label }, `x402 paywall network left out: ${key.missing}`)
    return undefined
  }
  // upto offers name the address that settles: in process, the signer key's.
  const offer = networkOffer(config, entry, upto ? privateKeyToAccount(key.key).address : undefined)
  const facilitator = await LocalFacilitator.open(label, offer.chainId, key.key, {
    rpcUrl: pool ? poolPlaceholderUrl(pool) : rpcUrl!,
    ...(pool ? { rpcFetch: poolFetch(pool) } : {}),
    assets: [offer.asset],
    receiptTimeoutMs: settings.receiptTimeoutMs,
    rpcTimeoutMs: settings.rpcTimeoutMs,
    pollingIntervalMs: settings.pollingIntervalMs,
    recheckIntervalMs: config.recheckIntervalMs,
  }, {
    records: settlementRecordsFrom(init.store.documents(SETTLEMENTS_COLLECTION), 'x402-paywall'),
    log: init.log,
  })
  return { offer, facilitator }
}

/**
 * The networks this paywall can take payments on, in config order.
 *
 * @example
 * ```ts
 * const networks = await openPaidNetworks(config, init) // [{ offer, facilitator }, ...]
 * ```
 */
export async function openPaidNetworks(config: PaywallConfig, init: PluginInit): Promise<PaidNetwork[]> {
  if (config.scheme === 'upto' && config.pricePerCredit === undefined) throw new Error('scheme upto needs pricePerCredit')
  const seen = new Set<string>()
  for (const entry of config.networks) {
    const caip2 = svmNetworkNamed(entry.network)?.caip2 ?? `eip155:${chainIdOfNetwork(entry.network) ?? entry.network}`
    if (seen.has(caip2)) throw new Error(`network ${entry.network} is listed twice`)
    seen.add(caip2)
  }
  const opened = await Promise.all(config.networks.map((entry) => open(config, entry, init)))
  return opened.filter((network): network is PaidNetwork => network !== undefined)
}
