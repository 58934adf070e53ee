/**
 * Builds the facilitator of one configured Solana network, or undefined (501) when it has no RPC
 * URL; a missing key variable gives the plain 501 too (the log names the variable).
 */
import type { PluginInit } from '../../../core/proxy/plugin-api.ts'
import { settlementRecordsFrom } from '../evm/records.ts'
import { UnconfiguredFacilitator, type Facilitator } from '../facilitator.ts'
import { poolFetch, poolPlaceholderUrl, rpcPoolOf } from '../rpc-pool.ts'
import type { SvmNetworkConfig } from './config.ts'
import { SvmFacilitator } from './facilitator.ts'
import { readSvmSignerKey } from './keys.ts'
import { svmNetworkForPath } from './networks.ts'

export async function buildSvmNetwork(
  pathNetwork: string, settings: SvmNetworkConfig, recheckIntervalMs: number, collection: string, init: PluginInit,
): Promise<Facilitator | undefined> {
  const label = `solana/${pathNetwork}`
  const network = svmNetworkForPath(pathNetwork)!
  const rpcUrl = settings.rpcUrl?.trim()
  if (rpcUrl && settings.rpcUpstream) throw new Error(`${label}: set either rpcUrl or rpcUpstream, not both`)
  // rpcUpstream: a pool of cluster RPCs (gateway.yaml upstream with targets); rpcUrl: one, as before.
  const pool = settings.rpcUpstream ? rpcPoolOf(label, settings.rpcUpstream, init) : undefined
  if (!rpcUrl && !pool) return undefined
  if (rpcUrl && !/^https?:\/\//.test(rpcUrl)) throw new Error(`${label}: rpcUrl must be an http(s) URL`)
  const key = readSvmSignerKey(settings.signerKeyEnv)
  if (!key.ok) {
    init.log.warn({ network: label }, `x402 network not configured: ${key.missing}`)
    return new UnconfiguredFacilitator(label)
  }
  return SvmFacilitator.open(label, network, [key.signer], {
    rpcUrl: pool ? poolPlaceholderUrl(pool) : rpcUrl!, ...(pool ? { rpcFetch: poolFetch(pool) } : {}), assets: settings.assets, rpcTimeoutMs: settings.rpcTimeoutMs, confirmTimeoutMs: settings.confirmTimeoutMs,
    pollingIntervalMs: settings.pollingIntervalMs, maxComputeUnitPrice: settings.maxComputeUnitPrice,
    maxComputeUnits: settings.maxComputeUnits, recheckIntervalMs,
  }, settlementRecordsFrom(init.store.documents(collection), 'x402-facilitator'), init.log)
}
