/**
 * Start-up check of a configured asset against the chain: a wrong EIP-712 name or version makes
 * every client's signature fail to recover (the Monad "USD Coin" vs "USDC" incident in the
 * reference repo), so the facilitator refuses to serve an asset whose metadata disagrees.
 */
import { getAddress, type PublicClient } from 'viem'
import { eip3009Abi } from './abi.ts'
import type { EvmAssetInfo } from './chains.ts'

export interface AssetCheckResult {
  ok: boolean
  /** One line per disagreement, naming the field, the configured and the on-chain value. */
  problems: string[]
  /** What the chain answered (undefined where the call failed). */
  onChain: { name?: string; version?: string; decimals?: number; hasCode: boolean }
}

async function attempt<T>(read: () => Promise<T>): Promise<T | undefined> {
  try {
    return await read()
  } catch {
    return undefined
  }
}

/**
 * Reads `name()`, `version()` and `decimals()` of the asset and compares them with the config.
 *
 * @example
 * ```ts
 * const check = await checkAssetMetadata(publicClient, { address, name: 'USDC', version: '2', decimals: 6 })
 * if (!check.ok) throw new Error(`asset ${address}: ${check.problems.join('; ')}`)
 * ```
 */
export async function checkAssetMetadata(client: PublicClient, asset: EvmAssetInfo): Promise<AssetCheckResult> {
  const address = getAddress(asset.address)
  // viem answers `undefined` for an address without code; a failed read becomes `null`.
  const code = await client.getCode({ address }).catch(() => null)
  const hasCode = typeof code === 'string' && code !== '0x'
  if (!hasCode) {
    return {
      ok: false,
      problems: [code === null ? `could not read code at ${address}` : `no contract deployed at ${address}`],
      onChain: { hasCode },
    }
  }
  const [name, version, decimals] = await Promise.all([
    attempt(() => client.readContract({ address, abi: eip3009Abi, functionName: 'name' })),
    attempt(() => client.readContract({ address, abi: eip3009Abi, functionName: 'version' })),
    attempt(() => client.readContract({ address, abi: eip3009Abi, functionName: 'decimals' })),
  ])
  const problems: string[] = []
  const compare = (field: string, configured: string | number, actual: string | number | undefined) => {
    if (actual === undefined) problems.push(`${field}() could not be read`)
    else if (actual !== configured) problems.push(`${field} is ${JSON.stringify(actual)} on chain, configured ${JSON.stringify(configured)}`)
  }
  compare('name', asset.name, name)
  compare('version', asset.version, version)
  compare('decimals', asset.decimals, decimals)
  return { ok: problems.length === 0, problems, onChain: { name, version, decimals, hasCode } }
}
