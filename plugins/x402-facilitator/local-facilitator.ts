/**
 * The in-process facilitator of one EVM chain: verify and settle run in this process against the
 * chain's RPC (evm/verify.ts, evm/settle.ts), signing with the key named by `signerKeyEnv`.
 *
 * Start-up check (evm/context.ts `checkEvmChainContext`): the RPC must report the expected chain id
 * and each configured asset's name(), version() and decimals() must match the config. A mismatch
 * fails the config (a wrong EIP-712 name makes every payment fail). An RPC that does not answer at
 * start does not: the network answers 503 `network_unavailable` and the check runs again on a later
 * request (at most once per `recheckIntervalMs`), after which it serves normally.
 */
import type { Logger } from 'pino'
import type { EvmAssetInfo } from './evm/chains.ts'
import { supportedKinds } from './evm/chains.ts'
import { checkEvmChainContext, createEvmChainContext, type EvmChainContext } from './evm/context.ts'
import { upstreamFaultReasons } from './evm/errors.ts'
import type { SettlementRecords } from './evm/records.ts'
import { safeMessage } from './evm/reverts.ts'
import { settleExact } from './evm/settle.ts'
import type { SettleResponse, VerifyResponse } from './evm/types.ts'
import { verifyExact } from './evm/verify.ts'
import { verdictStatus, type Facilitator, type FacilitatorAnswer } from './facilitator.ts'
import { networkUnavailable, paymentRequestFailed } from './failures.ts'

export interface LocalChainSettings {
  /** The chain RPC; with `rpcFetch`, only a label (the pool picks the target). */
  rpcUrl: string
  /** A pool's fetch (rpc-pool.ts) for an `rpcUpstream`: reads fail over, sends go once. */
  rpcFetch?: typeof fetch
  /** Accepted assets; default the network's USDC (evm/chains.ts). */
  assets?: EvmAssetInfo[]
  receiptTimeoutMs: number
  rpcTimeoutMs: number
  pollingIntervalMs: number
  recheckIntervalMs: number
}

export interface LocalFacilitatorDeps {
  records: SettlementRecords
  log: Logger
}

type Readiness =
  | { state: 'ready' }
  | { state: 'unreachable'; problem: string }
  | { state: 'misconfigured'; problem: string }

/** Problems of checkEvmChainContext that mean "the RPC did not answer", not "the config is wrong". */
const transientProblem = /is unreachable|could not read code/

export class LocalFacilitator implements Facilitator {
  readonly label: string
  readonly chain: EvmChainContext
  readonly #settings: LocalChainSettings
  readonly #deps: LocalFacilitatorDeps
  #readiness: Readiness = { state: 'unreachable', problem: 'not checked yet' }
  #checkedAt = 0
  #checking?: Promise<void>

  private constructor(label: string, chain: EvmChainContext, settings: LocalChainSettings, deps: LocalFacilitatorDeps) {
    this.label = label
    this.chain = chain
    this.#settings = settings
    this.#deps = deps
  }

  /**
   * Builds the facilitator and runs the start-up check. Throws when the chain disagrees with the
   * config (wrong chain id, asset name/version/decimals, no contract): that fails the config.
   *
   * @example
   * ```ts
   * const base = await LocalFacilitator.open('base/testnet', 84532, key, settings, { records, log })
   * const { status, body } = await base.verify(requestBody)
   * ```
   */
  static async open(
    label: string, network: string | number, signerPrivateKey: `0x${string}`, settings: LocalChainSettings, deps: LocalFacilitatorDeps,
  ): Promise<LocalFacilitator> {
    const chain = createEvmChainContext({
      network, rpcUrl: settings.rpcUrl, signerPrivateKey, assets: settings.assets,
      pollingIntervalMs: settings.pollingIntervalMs, rpcTimeoutMs: settings.rpcTimeoutMs, rpcFetch: settings.rpcFetch,
    })
    const facilitator = new LocalFacilitator(label, chain, settings, deps)
    await facilitator.#check()
    const readiness = facilitator.#readiness
    if (readiness.state === 'misconfigured') throw new Error(`${label}: ${readiness.problem}`)
    if (readiness.state === 'unreachable') {
      deps.log.warn({ network: label, problem: readiness.problem }, 'x402 network unavailable at start; it is checked again on use')
    } else {
      deps.log.info({ network: label, chainId: chain.chainId, signer: chain.signerAddress }, 'x402 network ready')
    }
    return facilitator
  }

  async #probe(): Promise<Readiness> {
    try {
      await this.chain.publicClient.getChainId()
    } catch (error) {
      return { state: 'unreachable', problem: `its chain RPC does not answer (${safeMessage(error)})` }
    }
    const problems = await checkEvmChainContext(this.chain)
    if (problems.length === 0) return { state: 'ready' }
    if (problems.some((p) => transientProblem.test(p))) return { state: 'unreachable', problem: 'its chain RPC does not answer' }
    return { state: 'misconfigured', problem: problems.join('; ') }
  }

  #check(): Promise<void> {
    this.#checking ??= this.#probe().then((readiness) => {
      if (readiness.state === 'misconfigured' && this.#readiness.state !== 'misconfigured') {
        this.#deps.log.error({ network: this.label, problem: readiness.problem }, 'x402 network refused: the chain disagrees with the config')
      } else if (readiness.state === 'ready' && this.#readiness.state !== 'ready' && this.#checkedAt !== 0) {
        this.#deps.log.info({ network: this.label, chainId: this.chain.chainId }, 'x402 network ready')
      }
      this.#readiness = readiness
      this.#checkedAt = Date.now()
    }).finally(() => {
      this.#checking = undefined
    })
    return this.#checking
  }

  #current(): Readiness {
    return this.#readiness
  }

  async ready(): Promise<void> {
    if (this.#readiness.state === 'ready') return
    const due = Date.now() - this.#checkedAt >= this.#settings.recheckIntervalMs
    if (this.#readiness.state === 'unreachable' && (due || this.#checking)) await this.#check()
    // Read again: the check above may have changed it.
    const readiness = this.#current()
    if (readiness.state === 'ready') return
    if (readiness.state === 'misconfigured') throw networkUnavailable(this.label, 'its configured asset does not match the chain')
    throw networkUnavailable(this.label, 'its chain RPC does not answer', Math.ceil(this.#settings.recheckIntervalMs / 1000))
  }

  /** Chain faults become 502; the cause goes to the log only (it may name hosts). */
  #answer<T extends VerifyResponse | SettleResponse>(reason: string | null, message: string | undefined, body: T): FacilitatorAnswer<T> {
    if (reason && upstreamFaultReasons.has(reason)) {
      this.#deps.log.warn({ network: this.label, reason, cause: message }, 'x402 chain access failed')
      throw paymentRequestFailed()
    }
    return { status: verdictStatus(reason), body }
  }

  async verify(body: unknown): Promise<FacilitatorAnswer<VerifyResponse>> {
    await this.ready()
    const result = await verifyExact(this.chain, body)
    return this.#answer(result.invalidReason, result.invalidMessage, result)
  }

  async settle(body: unknown): Promise<FacilitatorAnswer<SettleResponse>> {
    await this.ready()
    const { pending: _pending, ...result } = await settleExact(this.chain, body, {
      receiptTimeoutMs: this.#settings.receiptTimeoutMs, records: this.#deps.records, log: this.#deps.log,
    })
    return this.#answer(result.errorReason, result.errorMessage, result)
  }

  async supported(): Promise<FacilitatorAnswer<unknown>> {
    return { status: 200, body: supportedKinds([{ network: this.chain.chainId, signers: [this.chain.signerAddress] }]) }
  }

  async health(): Promise<{ ok: boolean; message?: string }> {
    try {
      await this.ready()
      await this.chain.publicClient.getBlockNumber({ cacheTime: 0 })
      return { ok: true }
    } catch (error) {
      const message = (error as { status?: number }).status === 503 ? (error as Error).message : `${this.label} is unavailable: its chain RPC does not answer`
      return { ok: false, message }
    }
  }
}
