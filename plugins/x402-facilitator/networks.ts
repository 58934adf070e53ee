/**
 * Builds what serves each `chain/network` of the facilitator path from the handler config:
 * in-process on a chain RPC, an upstream facilitator, or nothing (501).
 */
import type { PluginInit } from '../../core/proxy/plugin-api.ts'
import { evmNetworkForPath } from './evm/chains.ts'
import { settlementRecordsFrom } from './evm/records.ts'
import type { FacilitatorConfig, NetworkConfig } from './config.ts'
import { UnconfiguredFacilitator, type Facilitator } from './facilitator.ts'
import { LocalFacilitator } from './local-facilitator.ts'
import { RemoteFacilitator } from './remote-facilitator.ts'
import { poolFetch, poolPlaceholderUrl, rpcPoolOf } from './rpc-pool.ts'
import { readSignerKey } from './signer-key.ts'
import { buildSvmNetwork } from './svm/build.ts'
import type { SvmNetworkConfig } from './svm/config.ts'

/** The collection settlement records live in; the paywall shares it. */
export const SETTLEMENTS_COLLECTION = 'x402-settlements'

async function build(label: string, chainId: number, settings: NetworkConfig, config: FacilitatorConfig, init: PluginInit): Promise<Facilitator | undefined> {
  const rpcUrl = settings.rpcUrl?.trim()
  const sources = [rpcUrl && 'rpcUrl', settings.rpcUpstream && 'rpcUpstream', settings.upstream && 'upstream'].filter(Boolean)
  if (sources.length > 1) throw new Error(`${label}: set only one of rpcUrl, rpcUpstream (in-process) or upstream, not ${sources.join(' and ')}`)
  if (settings.upstream) {
    if (!init.upstreamNames.includes(settings.upstream)) throw new Error(`${label}: unknown upstream "${settings.upstream}"`)
    return new RemoteFacilitator(label, init.upstream(settings.upstream), init.log, chainId)
  }
  // rpcUpstream: a pool of chain RPCs (gateway.yaml upstream with targets); rpcUrl: one, as before.
  const pool = settings.rpcUpstream ? rpcPoolOf(label, settings.rpcUpstream, init) : undefined
  if (!rpcUrl && !pool) return undefined
  if (rpcUrl && !/^https?:\/\//.test(rpcUrl)) throw new Error(`${label}: rpcUrl must be an http(s) URL`)
  const key = readSignerKey(settings.signerKeyEnv)
  if (!key.ok) {
    // The client gets the plain 501; only the log names the variable.
    init.log.warn({ network: label }, `x402 network not configured: ${key.missing}`)
    return new UnconfiguredFacilitator(label)
  }
  return LocalFacilitator.open(label, chainId, key.key, {
    rpcUrl: pool ? poolPlaceholderUrl(pool) : rpcUrl!,
    ...(pool ? { rpcFetch: poolFetch(pool) } : {}),
    assets: settings.assets,
    receiptTimeoutMs: settings.receiptTimeoutMs,
    rpcTimeoutMs: settings.rpcTimeoutMs,
    pollingIntervalMs: settings.pollingIntervalMs,
    recheckIntervalMs: config.recheckIntervalMs,
  }, {
    records: settlementRecordsFrom(init.store.documents(SETTLEMENTS_COLLECTION), 'x402-facilitator'),
    log: init.log,
  })
}

/**
 * One entry per configured `chain/network` (e.g. `base/testnet`); absent ones answer 501.
 * Throws (failing the config) on a contradiction or when a chain disagrees with its assets.
 *
 * @example
 * ```ts
 * const served = await buildNetworks(config, init)
 * served.get('base/testnet')?.verify(body)
 * ```
 */
export async function buildNetworks(config: FacilitatorConfig, init: PluginInit): Promise<Map<string, Facilitator>> {
  const pending: Promise<[string, Facilitator | undefined]>[] = []
  for (const [chain, networks] of Object.entries(config.networks)) {
    for (const [pathNetwork, settings] of Object.entries(networks ?? {})) {
      if (!settings) continue
      if (chain === 'solana') {
        const label = `solana/${pathNetwork}`
        pending.push(buildSvmNetwork(pathNetwork, settings as SvmNetworkConfig, config.recheckIntervalMs, SETTLEMENTS_COLLECTION, init).then((served) => [label, served]))
        continue
      }
      const known = evmNetworkForPath(chain, pathNetwork)!
      const label = `${chain}/${pathNetwork}`
      pending.push(build(label, known.chainId, settings, config, init).then((served) => [label, served]))
    }
  }
  const served = new Map<string, Facilitator>()
  for (const [label, facilitator] of await Promise.all(pending)) if (facilitator) served.set(label, facilitator)
  return served
}
