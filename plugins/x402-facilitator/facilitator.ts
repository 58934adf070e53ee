/**
 * What serves one chain/network: the in-process facilitator on a chain RPC (local-facilitator.ts),
 * another facilitator over HTTP (remote-facilitator.ts), or nothing (unconfigured). The HTTP
 * handler and the paywall plugin both talk to this interface.
 *
 * Status rule of verify / settle answers: a verdict about the payment is 200 (`isValid: false`,
 * `success: false`, with the reason); a body that fails the schema is 400 in the same shape; a
 * failure of the chain or of the upstream facilitator is thrown as 502 "x402 Payment request failed".
 */
import { malformedRequestReasons } from './evm/errors.ts'
import type { SettleResponse, VerifyResponse } from './evm/types.ts'
import { networkNotConfigured } from './failures.ts'

export interface FacilitatorAnswer<T> {
  /** 200 for a verdict, 400 for a malformed request. */
  status: number
  body: T
}

export interface Facilitator {
  /** `base/testnet`, or the network string for the paywall; used in messages. */
  readonly label: string
  /** Throws 503 while the network cannot be used (the paywall checks before taking a payment). */
  ready(): Promise<void>
  verify(body: unknown, signal?: AbortSignal): Promise<FacilitatorAnswer<VerifyResponse>>
  /** Never aborted by the client: a settlement that started must finish and be recorded. */
  settle(body: unknown): Promise<FacilitatorAnswer<SettleResponse>>
  supported(signal?: AbortSignal): Promise<FacilitatorAnswer<unknown>>
  /** Whether the chain (or the upstream facilitator) answers right now. */
  health(signal?: AbortSignal): Promise<{ ok: boolean; message?: string }>
  /** Lets go of connections of its own (called when the config that built it is replaced). */
  close?(): Promise<void>
}

/**
 * The HTTP status of a verdict.
 *
 * @example
 * ```ts
 * verdictStatus('invalid_payload')                // 400
 * verdictStatus('invalid_exact_evm_signature')    // 200
 * ```
 */
export function verdictStatus(reason: string | null | undefined): number {
  return reason && malformedRequestReasons.has(reason) ? 400 : 200
}

/** A network with nothing behind it (e.g. its signer key variable is unset): every call answers 501. */
export class UnconfiguredFacilitator implements Facilitator {
  readonly label: string
  constructor(label: string) {
    this.label = label
  }
  #fail(): never {
    throw networkNotConfigured(this.label)
  }
  async ready(): Promise<void> {
    this.#fail()
  }
  async verify(): Promise<never> {
    this.#fail()
  }
  async settle(): Promise<never> {
    this.#fail()
  }
  async supported(): Promise<never> {
    this.#fail()
  }
  async health(): Promise<never> {
    this.#fail()
  }
}
