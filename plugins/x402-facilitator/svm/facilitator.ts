/**
 * The in-process facilitator of one Solana network (`solana/mainnet`, `solana/testnet`): verify and
 * settle run here against the cluster's JSON-RPC, the fee payer signing with the key named by
 * `signerKeyEnv`.
 *
 * Start-up check: each accepted mint must exist, be owned by the Token or Token-2022 program (the
 * configured one, when given) and have the configured decimals; a mismatch fails the config. An
 * RPC that does not answer does not: the network answers 503 until a later check (at most once per
 * `recheckIntervalMs`) succeeds.
 */
import type { Logger } from 'pino'
import type { SettlementRecords } from '../evm/records.ts'
import type { SettleResponse, VerifyResponse } from '../evm/types.ts'
import type { Facilitator, FacilitatorAnswer } from '../facilitator.ts'
import { networkUnavailable, paymentRequestFailed } from '../failures.ts'
import { TOKEN_2022_PROGRAM, TOKEN_PROGRAM } from './ata.ts'
import type { SvmAsset, SvmContext } from './context.ts'
import type { SvmSigner } from './keys.ts'
import { svmSupportedKinds, type SvmNetwork } from './networks.ts'
import { SvmRpc, SvmRpcFault } from './rpc.ts'
import { settleSvm } from './settle.ts'
import { checkSvmPayment } from './verify.ts'

export interface SvmAssetConfig {
  address: string
  decimals: number
  tokenProgram?: string
}

export interface SvmNetworkSettings {
  /** The cluster RPC; with `rpcFetch`, only a label (the pool picks the target). */
  rpcUrl: string
  /** A pool's fetch (rpc-pool.ts) for an `rpcUpstream`: reads fail over, sendTransaction goes once. */
  rpcFetch?: typeof fetch
  assets?: SvmAssetConfig[]
  rpcTimeoutMs: number
  confirmTimeoutMs: number
  pollingIntervalMs: number
  maxComputeUnitPrice: number
  maxComputeUnits: number
  recheckIntervalMs: number
}

type Readiness = { state: 'ready' } | { state: 'unreachable'; problem: string } | { state: 'misconfigured'; problem: string }

export class SvmFacilitator implements Facilitator {
  readonly label: string
  readonly context: SvmContext
  readonly #configured: SvmAssetConfig[]
  readonly #assets = new Map<string, SvmAsset>()
  readonly #settings: SvmNetworkSettings
  readonly #records: SettlementRecords
  readonly #log: Logger
  #readiness: Readiness = { state: 'unreachable', problem: 'not checked yet' }
  #checkedAt = 0
  #checking?: Promise<void>
  #closing?: Promise<void>

  private constructor(label: string, network: SvmNetwork, signers: SvmSigner[], settings: SvmNetworkSettings, records: SettlementRecords, log: Logger) {
    this.label = label
    this.#settings = settings
    this.#records = records
    this.#log = log
    this.#configured = settings.assets ?? [{ address: network.defaultUsdc, decimals: 6, tokenProgram: TOKEN_PROGRAM }]
    this.context = {
      network, label, rpc: new SvmRpc(settings.rpcUrl, settings.rpcTimeoutMs, settings.rpcFetch),
      signers: new Map(signers.map((s) => [s.address, s])), assets: this.#assets,
      maxComputeUnitPrice: BigInt(settings.maxComputeUnitPrice), maxComputeUnits: settings.maxComputeUnits,
    }
  }

  /**
   * Builds the facilitator and runs the start-up check; throws when a mint disagrees with the config.
   *
   * @example
   * ```ts
   * const testnet = await SvmFacilitator.open('solana/testnet', network, [signer], settings, records, log)
   * ```
   */
  static async open(
    label: string, network: SvmNetwork, signers: SvmSigner[], settings: SvmNetworkSettings, records: SettlementRecords, log: Logger,
  ): Promise<SvmFacilitator> {
    const facilitator = new SvmFacilitator(label, network, signers, settings, records, log)
    await facilitator.#check()
    const readiness = facilitator.#readiness
    if (readiness.state === 'misconfigured') throw new Error(`${label}: ${readiness.problem}`)
    if (readiness.state === 'unreachable') log.warn({ network: label, problem: readiness.problem }, 'x402 network unavailable at start; it is checked again on use')
    else log.info({ network: label, signers: [...facilitator.context.signers.keys()] }, 'x402 network ready')
    return facilitator
  }

  async #probe(): Promise<Readiness> {
    const problems: string[] = []
    try {
      for (const asset of this.#configured) {
        const account = await this.context.rpc.account(asset.address)
        if (!account) {
          problems.push(`mint ${asset.address} does not exist`)
          continue
        }
        if (account.owner !== TOKEN_PROGRAM && account.owner !== TOKEN_2022_PROGRAM) problems.push(`${asset.address} is not a token mint (owner ${account.owner})`)
        else if (asset.tokenProgram && asset.tokenProgram !== account.owner) problems.push(`mint ${asset.address} belongs to ${account.owner}, not ${asset.tokenProgram}`)
        else if (account.data.length < 82 || account.data[45] !== 1) problems.push(`${asset.address} is not an initialized mint`)
        else if (account.data[44] !== asset.decimals) problems.push(`mint ${asset.address} has ${account.data[44]} decimals, not ${asset.decimals}`)
        else this.#assets.set(asset.address, { address: asset.address, decimals: asset.decimals, tokenProgram: account.owner })
      }
    } catch (error) {
      if (error instanceof SvmRpcFault) return { state: 'unreachable', problem: 'its RPC does not answer' }
      return { state: 'unreachable', problem: (error as Error).message }
    }
    return problems.length ? { state: 'misconfigured', problem: problems.join('; ') } : { state: 'ready' }
  }

  #check(): Promise<void> {
    this.#checking ??= this.#probe().then((readiness) => {
      if (readiness.state === 'ready' && this.#readiness.state !== 'ready' && this.#checkedAt !== 0) this.#log.info({ network: this.label }, 'x402 network ready')
      this.#readiness = readiness
      this.#checkedAt = Date.now()
    }).finally(() => {
      this.#checking = undefined
    })
    return this.#checking
  }

  async ready(): Promise<void> {
    if (this.#readiness.state === 'ready') return
    const due = Date.now() - this.#checkedAt >= this.#settings.recheckIntervalMs
    if (this.#readiness.state === 'unreachable' && (due || this.#checking)) await this.#check()
    const readiness = this.#readiness as Readiness
    if (readiness.state === 'ready') return
    if (readiness.state === 'misconfigured') throw networkUnavailable(this.label, 'its configured asset does not match the chain')
    throw networkUnavailable(this.label, 'its RPC does not answer', Math.ceil(this.#settings.recheckIntervalMs / 1000))
  }

  /** RPC faults are 502; the cause goes to the log only (it may name hosts). */
  #fault(error: unknown): never {
    this.#log.warn({ network: this.label, cause: (error as Error).message }, 'x402 chain access failed')
    throw paymentRequestFailed()
  }

  async verify(body: unknown): Promise<FacilitatorAnswer<VerifyResponse>> {
    await this.ready()
    try {
      const outcome = await checkSvmPayment(this.context, body)
      return { status: outcome.malformed ? 400 : 200, body: outcome.response }
    } catch (error) {
      return this.#fault(error)
    }
  }

  async settle(body: unknown): Promise<FacilitatorAnswer<SettleResponse>> {
    await this.ready()
    try {
      const { malformed, ...result } = await settleSvm(this.context, body, {
        records: this.#records, confirmTimeoutMs: this.#settings.confirmTimeoutMs, pollingIntervalMs: this.#settings.pollingIntervalMs, log: this.#log,
      })
      return { status: malformed ? 400 : 200, body: result }
    } catch (error) {
      return this.#fault(error)
    }
  }

  async supported(): Promise<FacilitatorAnswer<unknown>> {
    return { status: 200, body: svmSupportedKinds(this.context.network, [...this.context.signers.keys()]) }
  }

  /** Closes the RPC connections, once: a reload builds a new facilitator beside this one. */
  close(): Promise<void> {
    this.#closing ??= this.context.rpc.close()
    return this.#closing
  }

  async health(): Promise<{ ok: boolean; message?: string }> {
    try {
      await this.ready()
      await this.context.rpc.health()
      return { ok: true }
    } catch (error) {
      const message = (error as { status?: number }).status === 503 ? (error as Error).message : `${this.label} is unavailable: its RPC does not answer`
      return { ok: false, message }
    }
  }
}
