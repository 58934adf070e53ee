/**
 * Config schema of the Solana networks of the `x402-facilitator` handler (`networks.solana`).
 *
 * ```yaml
 * networks:
 *   solana:
 *     testnet:
 *       rpcUrl: ${SOLANA_RPC_URL:-http://127.0.0.1:18899}
 *       signerKeyEnv: X402_SOLANA_FACILITATOR_KEY
 *       assets: [{ address: 4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU, decimals: 6 }]
 * ```
 */
import type { JsonSchema } from '../../../core/proxy/plugin-api.ts'
import { rpcUpstreamSchema } from '../rpc-pool-schema.ts'

export interface SvmNetworkConfig {
  rpcUrl?: string | null
  /** Named upstream (a pool of cluster RPC targets); exclusive with rpcUrl. */
  rpcUpstream?: string
  signerKeyEnv: string
  assets?: { address: string; decimals: number; tokenProgram?: string }[]
  rpcTimeoutMs: number
  confirmTimeoutMs: number
  pollingIntervalMs: number
  maxComputeUnitPrice: number
  maxComputeUnits: number
}

const base58 = '^[1-9A-HJ-NP-Za-km-z]{32,44}$'

const svmNetworkSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  description: 'A Solana network served in process on a cluster RPC.',
  properties: {
    rpcUrl: { type: ['string', 'null'], description: 'Solana JSON-RPC URL (never shown to clients). Empty or null (and no rpcUpstream): the network answers 501.' },
    rpcUpstream: rpcUpstreamSchema,
    signerKeyEnv: {
      type: 'string', pattern: '^[A-Za-z_][A-Za-z0-9_]*$', default: 'X402_SOLANA_FACILITATOR_KEY',
      description: 'NAME of the environment variable holding the fee payer secret key (base58 of 64 bytes, or a JSON array of 64 numbers). Unset: 501.',
    },
    assets: {
      type: 'array', minItems: 1,
      description: "Accepted SPL mints. Default: the network's USDC. Each is checked against the chain at start; a mismatch fails the config.",
      items: {
        type: 'object', additionalProperties: false, required: ['address', 'decimals'],
        description: 'An accepted SPL token mint.',
        properties: {
          address: { type: 'string', pattern: base58, description: 'Mint address (base58).' },
          decimals: { type: 'integer', minimum: 0, maximum: 18, description: 'Mint decimals, e.g. 6 for USDC.' },
          tokenProgram: { type: 'string', pattern: base58, description: 'Owning program (Token or Token-2022); default: read from the chain.' },
        },
      },
    },
    rpcTimeoutMs: { type: 'integer', minimum: 100, default: 10000, description: 'Timeout of each RPC call.' },
    confirmTimeoutMs: {
      type: 'integer', minimum: 500, default: 20000,
      description: 'Longest wait for confirmation; past it settle answers settlement_pending with the signature.',
    },
    pollingIntervalMs: { type: 'integer', minimum: 10, default: 400, description: 'How often a sent transaction\'s status is polled.' },
    maxComputeUnitPrice: {
      type: 'integer', minimum: 0, default: 5000000,
      description: 'Highest SetComputeUnitPrice accepted, in micro-lamports per compute unit (the fee payer pays it).',
    },
    maxComputeUnits: { type: 'integer', minimum: 1, maximum: 1400000, default: 200000, description: 'Highest SetComputeUnitLimit accepted.' },
  },
}

export const svmNetworksSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  default: {},
  description: 'Solana networks; one not listed (or without rpcUrl / key) answers 501 network_not_configured.',
  properties: { mainnet: svmNetworkSchema, testnet: svmNetworkSchema },
}
