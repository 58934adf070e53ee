/**
 * The `rpcUpstream` field of the facilitator's EVM and Solana networks (its own file: config.ts and
 * svm/config.ts both use it, and config.ts imports svm/config.ts).
 */
import type { JsonSchema } from '../../core/proxy/plugin-api.ts'

/** A pool of chain RPCs instead of one rpcUrl (the facilitator's EVM and Solana networks). */
export const rpcUpstreamSchema: JsonSchema = {
  type: 'string',
  minLength: 1,
  description:
    'Named upstream of gateway.yaml whose targets are JSON-RPC nodes of this chain (weights, zones, health, breakers as any pool). ' +
    'Reads fail over to another target; eth_sendRawTransaction / sendTransaction go to one target once. Exclusive with rpcUrl and upstream.',
}
