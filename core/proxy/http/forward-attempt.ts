/**
 * One attempt of a forwarded request at one target of the upstream pool. The forwarder
 * (forward.ts) owns the exchange with the client; an attempt relays undici's events to it only once
 * it has won: its answer head came first and is not one to discard for a retry (502/503/504/429 on
 * a safe request). A discarded answer is drained (keeping the connection), and each attempt records
 * its outcome on its target (health, latency, 429 back-off).
 *
 * The attempt that loses a hedge race is abandoned, not cancelled: it runs to its end and its
 * answer is drained. Cancelling it would close its HTTP/1.1 connection (a new handshake for the
 * next request), free its slot while the target is in fact still busy with it, and lose its
 * latency: the slow target would look as fast as the others and keep its full share of traffic.
 * An abandoned answer larger than ABANDONED_MAX_BYTES is cut (draining it would cost more).
 */
import type { Dispatcher } from 'undici'
import { errors } from '../errors.ts'
import type { Target } from '../upstream/target.ts'
import { retryAfterMs } from '../upstream/target.ts'

const WAITING = 0
const WON = 1
const DISCARDING = 2
const CANCELLED = 3
const ABANDONED = 4
const ABANDONED_MAX_BYTES = 64 * 1024

/** The forwarder as the attempts see it. */
export interface AttemptOwner {
  settled: boolean
  /** The upstream's recent head latency (hedge percentile), fed by every attempt that got a head. */
  readonly upstream: { readonly latency?: { add(ms: number): void } }
  winner: Attempt | undefined
  /** The head of `attempt` came: true when its answer is to be discarded and the request sent again. */
  discardHead(attempt: Attempt, status: number): boolean
  won(attempt: Attempt, controller: Dispatcher.DispatchController, status: number, headers: Record<string, string | string[] | undefined>): void
  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void
  onResponseEnd(): void
  onResponseError(controller: Dispatcher.DispatchController, error: Error): void
  /** The attempt ended without winning: a failure before the head (`error`), or a discarded answer. */
  attemptFailed(attempt: Attempt, error: unknown): void
}

export class Attempt implements Dispatcher.DispatchHandler {
  controller: Dispatcher.DispatchController | undefined
  state = WAITING
  #open = true
  #drained = 0
  readonly started = performance.now()

  constructor(readonly owner: AttemptOwner, readonly target: Target) {
    target.started()
  }

  /** Stops this attempt (a hedge that lost, the client gone, the request over). */
  cancel(reason: Error): void {
    if (this.state === CANCELLED || this.state === WON) return
    this.state = CANCELLED
    this.controller?.abort(reason)
  }

  /** Another attempt won: this one finishes unseen (see the file comment). */
  abandon(): void {
    if (this.state === WAITING) this.state = ABANDONED
  }

  #end(): void {
    if (!this.#open) return
    this.#open = false
    this.target.ended()
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller
    // Not yet sent: an abandoned attempt need not be (and its abort is no failure of the target).
    if (this.state === ABANDONED) this.state = CANCELLED
    if (this.state === CANCELLED || this.owner.settled) controller.abort(errors.upstreamUnavailable('attempt cancelled'))
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[] | undefined>): void {
    if (this.state === CANCELLED) return
    const ms = performance.now() - this.started
    this.target.answered(statusCode, ms)
    this.owner.upstream.latency?.add(ms)
    if (statusCode === 429) {
      const now = Date.now()
      this.target.throttle(retryAfterMs(headers['retry-after'], now), now)
    }
    if (this.state === ABANDONED) return
    if (this.owner.winner !== undefined || this.owner.settled) return this.cancel(errors.upstreamUnavailable('another attempt answered first'))
    if (this.owner.discardHead(this, statusCode)) {
      this.state = DISCARDING
      return
    }
    this.state = WON
    this.owner.won(this, controller, statusCode, headers)
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.state === WON) this.owner.onResponseData(controller, chunk)
    else if (this.state === ABANDONED && (this.#drained += chunk.length) > ABANDONED_MAX_BYTES) this.cancel(errors.upstreamUnavailable('abandoned answer too large'))
  }

  onResponseEnd(): void {
    this.#end()
    if (this.state === WON) this.owner.onResponseEnd()
    else if (this.state === DISCARDING) this.owner.attemptFailed(this, undefined)
  }

  onResponseError(controller: Dispatcher.DispatchController, error: Error): void {
    this.#end()
    if (this.state === WON) {
      this.target.failed(Date.now())
      return this.owner.onResponseError(controller, error)
    }
    if (this.state === DISCARDING) return this.owner.attemptFailed(this, undefined)
    if (this.state === CANCELLED) return
    // An abandoned attempt that fails (a timeout, a reset) still tells on its target.
    if (this.state === ABANDONED) return this.target.failed(Date.now())
    // A failure before the head: the target's fault unless the exchange itself was stopped.
    if (!this.owner.settled) this.target.failed(Date.now())
    this.owner.attemptFailed(this, error)
  }
}
