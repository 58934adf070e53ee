/**
 * What verify and settle of one Solana network need: the network, its RPC, the fee-payer signers,
 * the accepted mints and the compute caps.
 */
import type { SvmSigner } from './keys.ts'
import type { SvmNetwork } from './networks.ts'
import type { SvmRpc } from './rpc.ts'

export interface SvmAsset {
  /** Mint address. */
  address: string
  decimals: number
  /** The token program owning the mint (Token or Token-2022). */
  tokenProgram: string
}

export interface SvmContext {
  network: SvmNetwork
  /** `solana/testnet` */
  label: string
  rpc: SvmRpc
  signers: ReadonlyMap<string, SvmSigner>
  assets: ReadonlyMap<string, SvmAsset>
  /** Highest SetComputeUnitPrice accepted, in micro-lamports per CU (the official cap is 5,000,000). */
  maxComputeUnitPrice: bigint
  /** Highest SetComputeUnitLimit accepted. */
  maxComputeUnits: number
}
