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
 *
 * An attempt speaks undici's own handler interface (onConnect, onHeaders, onData, onComplete,
 * onError), the one its HTTP/1.1 client calls, and is itself the controller the forwarder pauses,
 * resumes and aborts. A handler of the newer interface (onRequestStart, onResponseStart...) is
 * wrapped by undici in two more objects per request and gets its head and trailers as objects
 * built from the raw header list; the forwarder builds its own from that list in one pass
 * (forward-headers.ts), so the wrapping was pure cost.
 */
import type { Dispatcher } from 'undici'
import { errors } from '../errors.ts'
import type { Target } from '../upstream/target.ts'
import { retryAfterMs } from '../upstream/target.ts'
import { rawHeaderValue } from './forward-headers.ts'

const WAITING = 0
const WON = 1
const DISCARDING = 2
const CANCELLED = 3
const ABANDONED = 4
const ABANDONED_MAX_BYTES = 64 * 1024

/** What the forwarder can do to the attempt that won: the flow of its answer body, and stopping it. */
export interface AttemptControl {
  abort(reason: Error): void
  pause(): void
  resume(): void
}

/** The forwarder as the attempts see it. */
export interface AttemptOwner {
  settled: boolean
  /** The upstream's recent head latency (hedge percentile), fed by every attempt that got a head. */
  readonly upstream: { readonly latency?: { add(ms: number): void } }
  winner: Attempt | undefined
  /** The head of `attempt` came: true when its answer is to be discarded and the request sent again. */
  discardHead(attempt: Attempt, status: number): boolean
  /** `rawHeaders`: undici's list, names and values as Buffers, alternating. */
  won(attempt: Attempt, status: number, rawHeaders: Buffer[]): void
  onResponseData(control: AttemptControl, chunk: Buffer): void
  onResponseEnd(): void
  onResponseError(error: Error): void
  /** The attempt ended without winning: a failure before the head (`error`), or a discarded answer. */
  attemptFailed(attempt: Attempt, error: unknown): void
}

export class Attempt implements Dispatcher.DispatchHandler, AttemptControl {
  state = WAITING
  #open = true
  #drained = 0
  /** undici's abort for this request, given once it is sent on a connection. */
  #abort: ((reason: Error) => void) | undefined = undefined
  /** undici's resume of the connection's parser, given with the head. */
  #resume: (() => void) | undefined = undefined
  #paused = false
  #aborted = false
  readonly started = performance.now()

  constructor(readonly owner: AttemptOwner, readonly target: Target) {
    target.started()
  }

  abort(reason: Error): void {
    if (this.#aborted || this.#abort === undefined) return
    this.#aborted = true
    this.#abort(reason)
  }

  pause(): void {
    this.#paused = true
  }

  resume(): void {
    if (!this.#paused) return
    this.#paused = false
    this.#resume?.()
  }

  /** Stops this attempt (a hedge that lost, the client gone, the request over). */
  cancel(reason: Error): void {
    if (this.state === CANCELLED || this.state === WON) return
    this.state = CANCELLED
    // Not yet on a connection: onConnect aborts it.
    this.abort(reason)
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

  onConnect(abort: (reason: Error) => void): void {
    this.#abort = abort
    // Not yet sent: an abandoned attempt need not be (and its abort is no failure of the target).
    if (this.state === ABANDONED) this.state = CANCELLED
    if (this.state === CANCELLED || this.owner.settled) this.abort(errors.upstreamUnavailable('attempt cancelled'))
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    this.#resume = resume
    this.#head(statusCode, rawHeaders)
    return !this.#paused
  }

  #head(statusCode: number, rawHeaders: Buffer[]): void {
    if (this.state === CANCELLED) return
    const ms = performance.now() - this.started
    this.target.answered(statusCode, ms)
    this.owner.upstream.latency?.add(ms)
    if (statusCode === 429) {
      const now = Date.now()
      this.target.throttle(retryAfterMs(rawHeaderValue(rawHeaders, 'retry-after'), now), now)
    }
    if (this.state === ABANDONED) return
    if (this.owner.winner !== undefined || this.owner.settled) return this.cancel(errors.upstreamUnavailable('another attempt answered first'))
    if (this.owner.discardHead(this, statusCode)) {
      this.state = DISCARDING
      return
    }
    this.state = WON
    this.owner.won(this, statusCode, rawHeaders)
  }

  onData(chunk: Buffer): boolean {
    if (this.state === WON) this.owner.onResponseData(this, chunk)
    else if (this.state === ABANDONED && (this.#drained += chunk.length) > ABANDONED_MAX_BYTES) this.cancel(errors.upstreamUnavailable('abandoned answer too large'))
    return !this.#paused
  }

  onComplete(): void {
    this.#end()
    if (this.state === WON) this.owner.onResponseEnd()
    else if (this.state === DISCARDING) this.owner.attemptFailed(this, undefined)
  }

  onError(error: Error): void {
    this.#end()
    if (this.state === WON) {
      this.target.failed(Date.now())
      return this.owner.onResponseError(error)
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
