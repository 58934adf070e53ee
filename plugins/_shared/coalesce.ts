/**
 * Request coalescing for plugins that call an upstream themselves: identical calls in flight at
 * the same time share one upstream exchange, and every caller gets the result (or the error).
 *
 * The shared exchange runs on a signal of its own, not on any one client's: a client that goes
 * away stops waiting (its promise rejects with its signal's reason) but the exchange carries on for
 * the others; only when every waiting client has gone is the exchange aborted, and a new call with
 * the same key then starts afresh instead of joining a dying one.
 *
 * What may be coalesced is the caller's decision (reads only, never a write): the key must hold
 * everything the upstream's answer depends on.
 *
 * The counter `tollgate_coalesced_requests_total{route}` counts requests answered from another
 * request's upstream exchange; response-cache counts its coalesced followers there as well.
 */
import type { Counter, Registry } from 'prom-client'
import { sharedCounter } from './metrics.ts'

interface Flight<T> {
  promise: Promise<T>
  controller: AbortController
  waiters: number
  settled: boolean
}

/** Counter of requests answered from another request's upstream exchange, by route. */
export function coalescedCounter(registry: Registry): Counter<'route'> {
  return sharedCounter(registry, 'tollgate_coalesced_requests_total', 'Requests answered from an identical request already in flight (one upstream exchange for several clients), by route.', ['route'])
}

/**
 * The calls in flight, by key.
 *
 * @example
 * ```ts
 * const inFlight = new InFlight<Buffer>()
 * const { result, joined } = inFlight.run(key, ctx.signal, (signal) => fetchUpstream(signal))
 * if (joined) coalesced.inc()
 * const body = await result
 * ```
 */
export class InFlight<T> {
  readonly #flights = new Map<string, Flight<T>>()

  /** How many distinct exchanges are in flight (for tests and gauges). */
  get size(): number {
    return this.#flights.size
  }

  /**
   * Joins the exchange in flight for `key`, or starts `work` as a new one. `joined` says whether
   * this caller was answered by another's exchange.
   */
  run(key: string, signal: AbortSignal, work: (signal: AbortSignal) => Promise<T>): { result: Promise<T>; joined: boolean } {
    let flight = this.#flights.get(key)
    const joined = flight !== undefined
    if (!flight) {
      const started: Flight<T> = { promise: undefined as unknown as Promise<T>, controller: new AbortController(), waiters: 0, settled: false }
      started.promise = Promise.resolve()
        .then(() => work(started.controller.signal))
        .finally(() => {
          started.settled = true
          if (this.#flights.get(key) === started) this.#flights.delete(key)
        })
      // Rejections reach every waiter through their own promise; this one must not be unhandled.
      started.promise.catch(() => {})
      this.#flights.set(key, started)
      flight = started
    }
    const shared = flight
    shared.waiters++
    const result = new Promise<T>((resolve, reject) => {
      let left = false
      const leave = () => {
        if (left) return
        left = true
        signal.removeEventListener('abort', onAbort)
        if (--shared.waiters === 0 && !shared.settled) {
          // Nobody waits any more: stop the exchange, and let the next caller start a new one.
          if (this.#flights.get(key) === shared) this.#flights.delete(key)
          shared.controller.abort(signal.reason)
        }
      }
      const onAbort = () => {
        leave()
        reject(signal.reason ?? new Error('aborted'))
      }
      if (signal.aborted) return onAbort()
      signal.addEventListener('abort', onAbort, { once: true })
      shared.promise.then(
        (value) => {
          leave()
          resolve(value)
        },
        (error: unknown) => {
          leave()
          reject(error)
        },
      )
    })
    return { result, joined }
  }
}
