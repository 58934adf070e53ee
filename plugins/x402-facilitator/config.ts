/**
 * Config of the `x402-facilitator` handler: how each chain/network of the path is served.
 *
 * ```yaml
 * handler:
 *   name: x402-facilitator
 *   config:
 *     networks:
 *       base:
 *         testnet:
 *           rpcUrl: ${EVM_RPC_URL:-http://127.0.0.1:18545}
 *           signerKeyEnv: X402_FACILITATOR_KEY
 *           assets: [{ address: "0x036CbD53842c5426634e7929541eC2318f3dCF7e", name: USDC, version: "2", decimals: 6 }]
 *         mainnet: { upstream: cdp-facilitator }
 * ```
 */
import type { JsonSchema } from '../../core/proxy/plugin-api.ts'
import type { EvmAssetInfo } from './evm/chains.ts'
import { rpcUpstreamSchema } from './rpc-pool-schema.ts'
import { svmNetworksSchema, type SvmNetworkConfig } from './svm/config.ts'

export interface NetworkConfig {
  rpcUrl?: string | null
  /** Named upstream (a pool of chain RPC targets); exclusive with rpcUrl and upstream. */
  rpcUpstream?: string
  signerKeyEnv: string
  assets?: EvmAssetInfo[]
  receiptTimeoutMs: number
  rpcTimeoutMs: number
  pollingIntervalMs: number
  upstream?: string
}

export type EvmPathChain = 'ethereum' | 'polygon' | 'base'
export type PathNetwork = 'mainnet' | 'testnet'

export interface FacilitatorConfig {
  networks: Partial<Record<EvmPathChain, Partial<Record<PathNetwork, NetworkConfig>>>> & {
    solana?: Partial<Record<PathNetwork, SvmNetworkConfig>>
  }
  recheckIntervalMs: number
}

/** One accepted token; shared with the paywall's schema. */
export const assetSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['address', 'name', 'version', 'decimals'],
  description: 'An EIP-3009 token accepted for payment. name and version are its EIP-712 domain and are checked against the chain at start.',
  properties: {
    address: { type: 'string', pattern: '^0x[0-9a-fA-F]{40}$', description: 'Token contract address.' },
    name: { type: 'string', minLength: 1, description: 'EIP-712 domain name, e.g. "USDC" (Base Sepolia) or "USD Coin" (Base mainnet).' },
    version: { type: 'string', minLength: 1, description: 'EIP-712 domain version, e.g. "2".' },
    decimals: { type: 'integer', minimum: 0, maximum: 36, description: 'Token decimals, e.g. 6 for USDC.' },
  },
}

/** Settings of an in-process facilitator on one chain; shared with the paywall's schema. */
export const localChainProperties: Record<string, JsonSchema> = {
  rpcUrl: {
    type: ['string', 'null'],
    description: 'JSON-RPC URL of the chain (never shown to clients). Empty or null: the network is not configured and answers 501.',
  },
  signerKeyEnv: {
    type: 'string',
    pattern: '^[A-Za-z_][A-Za-z0-9_]*$',
    default: 'X402_FACILITATOR_KEY',
    description: 'NAME of the environment variable holding the facilitator private key (never the key itself). Unset: the network answers 501.',
  },
  assets: {
    type: 'array',
    minItems: 1,
    items: assetSchema,
    description: "Accepted tokens. Default: the network's USDC. Each is checked against the chain at start; a mismatch fails the config.",
  },
  receiptTimeoutMs: {
    type: 'integer',
    minimum: 1000,
    default: 20000,
    description: 'Longest wait for a settlement receipt; past it settle answers settlement_pending with the transaction hash.',
  },
  rpcTimeoutMs: { type: 'integer', minimum: 100, default: 10000, description: 'Deadline of each chain RPC call, from sending it to the last byte of the answer (a chain RPC that stalls after its head is cut off too).' },
  pollingIntervalMs: { type: 'integer', minimum: 10, default: 1000, description: 'How often a settlement receipt is polled.' },
}

const networkSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  description: 'How one chain/network is served: in process on a chain RPC (rpcUrl or rpcUpstream, + signerKeyEnv), or by another facilitator (upstream).',
  properties: {
    ...localChainProperties,
    rpcUpstream: rpcUpstreamSchema,
    upstream: {
      type: 'string',
      minLength: 1,
      description: 'Named upstream of another x402 facilitator (its URL is the base of /verify, /settle, /supported). Exclusive with rpcUrl.',
    },
  },
}

const pathNetworks = (chain: string): JsonSchema => ({
  type: 'object',
  additionalProperties: false,
  default: {},
  description: `Networks of ${chain}; one not listed answers 501 network_not_configured.`,
  properties: { mainnet: networkSchema, testnet: networkSchema },
})

export const facilitatorConfigSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    networks: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description: 'Served networks by path segments: ethereum, polygon, base, solana × mainnet, testnet.',
      properties: { ethereum: pathNetworks('ethereum'), polygon: pathNetworks('polygon'), base: pathNetworks('base'), solana: svmNetworksSchema },
    },
    recheckIntervalMs: {
      type: 'integer',
      minimum: 100,
      default: 5000,
      description: 'While a chain RPC is unreachable, how often a request may trigger a new check (others answer 503 at once).',
    },
  },
}
