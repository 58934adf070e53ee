/**
 * The facilitator's signing key comes from an environment variable whose NAME is in gateway.yaml
 * (`signerKeyEnv`), never from the file itself, so the config can be committed and shown. The key's
 * value never appears in an error or a log line: only the variable's name and the key's address do.
 */
import type { Hex } from 'viem'

const privateKeyPattern = /^(0x)?[0-9a-fA-F]{64}$/

export type SignerKeyLookup = { ok: true; key: Hex } | { ok: false; missing: string }

/**
 * Reads the key named by `envName`. An unset or empty variable is reported (the network is then
 * unavailable, not the whole config); a set but malformed one throws, since that is an operator
 * mistake to fix before serving.
 *
 * @example
 * ```ts
 * const lookup = readSignerKey('X402_FACILITATOR_KEY')
 * if (!lookup.ok) log.warn(lookup.missing)
 * ```
 */
export function readSignerKey(envName: string, env: NodeJS.ProcessEnv = process.env): SignerKeyLookup {
  const value = env[envName]?.trim()
  if (!value) return { ok: false, missing: `environment variable ${envName} (signerKeyEnv) is not set` }
  if (!privateKeyPattern.test(value)) {
    throw new Error(`environment variable ${envName} (signerKeyEnv) must hold a 32-byte hex private key`)
  }
  return { ok: true, key: (value.startsWith('0x') ? value : `0x${value}`) as Hex }
}
