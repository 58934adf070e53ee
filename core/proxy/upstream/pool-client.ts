/**
 * The upstream client of handler plugins (JSON-RPC, x402 facilitator chain RPCs and remote
 * facilitators, prove). Each call picks a target; a call the plugin marks `retrySafe` (read-only
 * JSON-RPC, x402 verify) is sent again to another target after a retryable failure before the
 * answer, and hedged like the forwarder's reads when the upstream has a hedge threshold, within the
 * upstream's retry budget. Everything else (settle, prove, writes) is sent once.
 */
import type { Dispatcher } from 'undici'
import { errors } from '../errors.ts'
import type { UpstreamPool } from './pool.ts'
import { THROTTLED } from './choose.ts'
import { retryableError, retryableStatus } from './retry-rules.ts'
import { retryAfterMs, type Target } from './target.ts'

export type PoolRequestOptions = Omit<Dispatcher.RequestOptions, 'origin'> & {
  /** The call may be sent again (another target, after a failure before the answer) and hedged. Default false. */
  retrySafe?: boolean
}

export interface PoolResponse extends Dispatcher.ResponseData {
  /** Attempts it took (1 when nothing was retried or hedged). */
  attempts: number
  /** Label of the target that answered. */
  target: string
}

interface Answered {
  response: Dispatcher.ResponseData
  target: Target
}

type RequestRest = Omit<PoolRequestOptions, 'retrySafe'>

export class PoolClient {
  constructor(readonly upstream: UpstreamPool) {}

  async request(options: PoolRequestOptions): Promise<PoolResponse> {
    const upstream = this.upstream
    const { retrySafe, ...rest } = options
    const signal = options.signal as AbortSignal | undefined
    upstream.budget.request(Date.now())
    const sent = { attempts: 0 }
    let previous: Target | undefined
    for (;;) {
      const target = upstream.choose(previous)
      if (target === THROTTLED) throw upstream.throttledError()
      if (!target) throw errors.upstreamUnavailable(`upstream ${upstream.name} is overloaded`)
      if (sent.attempts > 0) target.counters.retries++
      let answered: Answered
      try {
        answered = await (retrySafe && previous === undefined && upstream.hedges ? this.#hedged(target, rest, sent) : this.#one(target, rest, sent))
      } catch (error) {
        if (retrySafe && !signal?.aborted && retryableError(error) && this.#mayRetry(sent.attempts)) {
          previous = target
          continue
        }
        throw error
      }
      const { response } = answered
      if (retrySafe && retryableStatus(response.statusCode) && this.#mayRetry(sent.attempts)) {
        await response.body.dump().catch(() => {})
        previous = answered.target
        continue
      }
      return Object.assign(response, { attempts: sent.attempts, target: answered.target.name })
    }
  }

  /** One attempt at one target, recording its outcome on the target (health, latency, 429 back-off). */
  async #one(target: Target, rest: RequestRest, sent: { attempts: number }): Promise<Answered> {
    sent.attempts++
    const started = performance.now()
    target.started()
    let response: Dispatcher.ResponseData
    try {
      response = await target.pool.request({ ...rest, path: this.upstream.pathFor(target, rest.path) })
    } catch (error) {
      target.ended()
      if (!(rest.signal as AbortSignal | undefined)?.aborted) target.failed(Date.now())
      throw error
    }
    const ms = performance.now() - started
    target.answered(response.statusCode, ms)
    this.upstream.latency?.add(ms)
    if (response.statusCode === 429) target.throttle(retryAfterMs(response.headers['retry-after']), Date.now())
    response.body.once('close', () => target.ended())
    return { response, target }
  }

  /**
   * The attempt at `target`, and after the hedge threshold without an answer the same call at
   * another target: the first usable answer wins (a retryable status waits for the other attempt
   * while it runs); the loser runs to its end and is drained, as in the forwarder (forward-attempt.ts says why).
   */
  #hedged(target: Target, rest: RequestRest, sent: { attempts: number }): Promise<Answered> {
    const upstream = this.upstream
    return new Promise<Answered>((resolve, reject) => {
      let running = 0
      let done = false
      let fallback: Answered | undefined
      let failure: unknown
      const finish = (): void => {
        done = true
        clearTimeout(timer)
        if (fallback) resolve(fallback)
        else reject(failure)
      }
      const track = (attempt: Promise<Answered>): void => {
        running++
        attempt.then(
          (answered) => {
            running--
            if (done) return void answered.response.body.dump().catch(() => {})
            if (retryableStatus(answered.response.statusCode) && running > 0) {
              if (fallback) void fallback.response.body.dump().catch(() => {})
              fallback = answered
              return
            }
            done = true
            clearTimeout(timer)
            if (fallback) void fallback.response.body.dump().catch(() => {})
            resolve(answered)
          },
          (error: unknown) => {
            running--
            failure = error
            if (!done && running === 0) finish()
          },
        )
      }
      let timer: NodeJS.Timeout | undefined = setTimeout(() => {
        timer = undefined
        if (done || (rest.signal as AbortSignal | undefined)?.aborted) return
        const other = upstream.choose(target)
        if (other === undefined || other === THROTTLED || other === target || !upstream.budget.take(Date.now())) {
          if (running === 0) finish()
          return
        }
        other.counters.hedges++
        track(this.#one(other, rest, sent))
      }, upstream.hedgeAfterMs())
      track(this.#one(target, rest, sent))
    })
  }

  #mayRetry(attempts: number): boolean {
    return attempts <= this.upstream.config.retry.maxRetries && this.upstream.budget.take(Date.now())
  }

  close(): Promise<void> {
    return this.upstream.close()
  }

  destroy(): Promise<void> {
    return this.upstream.destroy()
  }
}
