/**
 * Config of the `x402-paywall` plugin: what a request on the route costs, who is paid, in which
 * token on which networks, and which facilitator verifies and settles each network's payments.
 */
import type { JsonSchema } from '../../core/proxy/plugin-api.ts'
import { assetSchema, localChainProperties } from '../x402-facilitator/config.ts'
import { rpcUpstreamSchema } from '../x402-facilitator/rpc-pool-schema.ts'
import type { EvmAssetInfo } from '../x402-facilitator/evm/chains.ts'

export interface PaywallFacilitatorConfig {
  rpcUrl?: string | null
  /** Named upstream (a pool of chain RPC targets) instead of rpcUrl. */
  rpcUpstream?: string
  signerKeyEnv: string
  receiptTimeoutMs: number
  rpcTimeoutMs: number
  pollingIntervalMs: number
  upstream?: string
  /** upto with an upstream facilitator: the address that facilitator settles from. */
  facilitatorAddress?: string
}

/** A Solana asset: an SPL mint. */
export interface PaywallSvmAsset {
  address: string
  decimals: number
  tokenProgram?: string
}

export interface PaywallNetworkConfig {
  network: string
  asset?: EvmAssetInfo | PaywallSvmAsset
  price?: string
  payTo?: string
  facilitator: PaywallFacilitatorConfig
}

export interface PaywallConfig {
  /** `exact`: a fixed price per request; `upto`: per use, `price` being the most one request can cost. */
  scheme: 'exact' | 'upto'
  /** upto: atomic token units per credit the credit meter charged for the request. */
  pricePerCredit?: string
  price: string
  payTo: string
  description: string
  mimeType: string
  maxTimeoutSeconds: number
  resourceBaseUrl?: string
  networks: PaywallNetworkConfig[]
  corsOrigins: string[]
  recheckIntervalMs: number
  /** A route without auth: the request header whose value (hashed) a payment is bound to. */
  intentHeader?: string
}

const amount = (description: string): JsonSchema => ({ type: 'string', pattern: '^[1-9][0-9]{0,77}$', description })
const address = (description: string): JsonSchema => ({ type: 'string', pattern: '^0x[0-9a-fA-F]{40}$', description })
const base58 = '^[1-9A-HJ-NP-Za-km-z]{32,44}$'
const svmAssetSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['address', 'decimals'],
  description: 'An SPL token mint accepted for payment on a Solana network.',
  properties: {
    address: { type: 'string', pattern: base58, description: 'Mint address (base58).' },
    decimals: { type: 'integer', minimum: 0, maximum: 18, description: 'Mint decimals, e.g. 6 for USDC.' },
    tokenProgram: { type: 'string', pattern: base58, description: 'Owning program (Token or Token-2022); default: read from the chain.' },
  },
}

// The in-process facilitator accepts exactly the network's `asset`; no separate asset list.
const { assets: _assets, ...chainProperties } = localChainProperties

const facilitatorSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  description: 'Who verifies and settles payments on this network: in process on a chain RPC (rpcUrl or rpcUpstream, + signerKeyEnv), or a facilitator over HTTP (upstream).',
  properties: {
    ...chainProperties,
    rpcUrl: {
      type: ['string', 'null'],
      description: 'JSON-RPC URL of the chain, for the in-process facilitator. Empty (and no rpcUpstream), or signerKeyEnv unset: the network is left out of the offer.',
    },
    rpcUpstream: rpcUpstreamSchema,
    upstream: {
      type: 'string',
      minLength: 1,
      description: 'Named upstream of an x402 facilitator (its URL is the base of /verify and /settle), e.g. this gateway\'s own /x402/base/testnet/<key>. Exclusive with rpcUrl.',
    },
    facilitatorAddress: address('scheme upto with an upstream facilitator: the address it settles from (its `supported` upto kind names it); clients bind it into their permit. In process it is the signer key\'s address.'),
  },
}

const networkSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['network', 'facilitator'],
  properties: {
    network: {
      type: 'string',
      minLength: 1,
      description: 'EVM network: v1 short name (base-sepolia) or CAIP-2 (eip155:84532); or Solana: solana-testnet, solana-mainnet, solana, or CAIP-2 solana:<genesis>. Both forms are offered (v1 body, v2 header).',
    },
    asset: {
      description: "Token paid in: an EIP-3009 token on EVM, an SPL mint on Solana. Default: the network's USDC (known networks only).",
      anyOf: [assetSchema, svmAssetSchema],
    },
    price: amount('Price on this network, in atomic token units; default the top-level price.'),
    payTo: {
      description: 'Recipient on this network; default the top-level payTo. Required for Solana (a base58 owner address).',
      anyOf: [address('EVM recipient address.'), { type: 'string', pattern: base58, description: 'Solana recipient (owner of the token account paid).' }],
    },
    facilitator: facilitatorSchema,
  },
}

export const paywallConfigSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['price', 'payTo', 'networks'],
  properties: {
    scheme: {
      enum: ['exact', 'upto'],
      default: 'exact',
      description: 'exact: every request costs `price`. upto (x402 v2, Permit2): the client signs `price` as a maximum and pays what the request used: the credits the credit-meter plugin charged for it (per proof, per item) × pricePerCredit, never more than `price`; zero sends no transaction.',
    },
    pricePerCredit: amount('scheme upto: atomic token units charged per credit the credit meter charged for the request. Required with upto.'),
    price: amount('Price of one request in atomic token units (10000 = 0.01 USDC), matched exactly; with scheme upto, the most one request can cost.'),
    payTo: address('Address that receives the payments.'),
    description: { type: 'string', default: '', description: 'What is paid for; shown to clients in the 402 answer.' },
    mimeType: { type: 'string', default: 'application/json', description: 'Media type of the paid resource (402 answer).' },
    maxTimeoutSeconds: { type: 'integer', minimum: 1, default: 60, description: 'How long a client has to complete payment (402 answer).' },
    resourceBaseUrl: {
      type: 'string',
      pattern: '^https?://[^/]+$',
      description: 'Public scheme and host of the gateway, e.g. https://api.example.com; the resource URL is this plus the request path. Default: http:// and the Host header.',
    },
    networks: { type: 'array', minItems: 1, items: networkSchema, description: 'Networks a payment is accepted on, in order of preference.' },
    corsOrigins: {
      type: 'array',
      items: { type: 'string', minLength: 1 },
      default: [],
      description: 'Origins (or "*") allowed to call the route from a browser: they get Access-Control-Allow-Origin, and OPTIONS preflights are answered.',
    },
    recheckIntervalMs: {
      type: 'integer',
      minimum: 100,
      default: 5000,
      description: 'While a chain RPC is unreachable, how often a request may trigger a new check.',
    },
    intentHeader: {
      type: 'string',
      pattern: '^[a-z0-9][a-z0-9-]{0,63}$',
      description: 'A route without auth (a key purchase): the lower-case name of a request header, e.g. x-buy-intent, that every paying request must carry (16 to 256 printable characters, a random value the client keeps secret). The payment is bound to its hash, so only requests carrying the same value settle, retry or receive the answer; a copy of the payment with another value answers 409 payment_claimed_by_other_buyer. The header is a credential: never logged or forwarded.',
    },
  },
}
