/**
 * The upstream client of handler plugins (JSON-RPC, x402 facilitator chain RPCs and remote
 * facilitators, prove). Each call picks a target; a call the plugin marks `retrySafe` (read-only
 * JSON-RPC, x402 verify) is sent again to another target after a retryable failure before the
 * answer, within the upstream's retry budget. Everything else (settle, prove, writes) is sent once.
 */
import type { Dispatcher } from 'undici'
import { errors } from '../errors.ts'
import type { UpstreamPool } from './pool.ts'
import { THROTTLED } from './choose.ts'
import { retryableError, retryableStatus } from './retry-rules.ts'
import { retryAfterMs, type Target } from './target.ts'

export type PoolRequestOptions = Omit<Dispatcher.RequestOptions, 'origin'> & {
  /** The call may be sent again (another target, after a failure before the answer). Default false. */
  retrySafe?: boolean
}

export interface PoolResponse extends Dispatcher.ResponseData {
  /** Attempts it took (1 when nothing was retried). */
  attempts: number
  /** Label of the target that answered. */
  target: string
}

export class PoolClient {
  constructor(readonly upstream: UpstreamPool) {}

  async request(options: PoolRequestOptions): Promise<PoolResponse> {
    const upstream = this.upstream
    const { retrySafe, ...rest } = options
    const now = Date.now()
    upstream.budget.request(now)
    let attempts = 0
    let previous: Target | undefined
    for (;;) {
      const target = upstream.choose(previous)
      if (target === THROTTLED) throw upstream.throttledError()
      if (!target) throw errors.upstreamUnavailable(`upstream ${upstream.name} is overloaded`)
      attempts++
      if (attempts > 1) target.counters.retries++
      const started = performance.now()
      target.started()
      let response: Dispatcher.ResponseData
      try {
        response = await target.pool.request({ ...rest, path: upstream.pathFor(target, rest.path) })
      } catch (error) {
        target.ended()
        if (!(options.signal as AbortSignal | undefined)?.aborted) target.failed(Date.now())
        if (retrySafe && !(options.signal as AbortSignal | undefined)?.aborted && retryableError(error) && this.#mayRetry(attempts)) {
          previous = target
          continue
        }
        throw error
      }
      const end = Date.now()
      target.answered(response.statusCode, performance.now() - started)
      if (response.statusCode === 429) target.throttle(retryAfterMs(response.headers['retry-after']), end)
      response.body.once('close', () => target.ended())
      if (retrySafe && retryableStatus(response.statusCode) && this.#mayRetry(attempts)) {
        await response.body.dump().catch(() => {})
        previous = target
        continue
      }
      return Object.assign(response, { attempts, target: target.name })
    }
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
