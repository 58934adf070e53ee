/**
 * The byte-bounded caches (one per route, or one per `pool`), and the requests in flight for
 * their keys (coalescing).
 *
 * Caches live in a module-level registry keyed by pool or route name + bounds and counted by
 * reference: a reload builds the new plugin instance before it closes the old one, so a cache
 * whose name and bounds are unchanged stays warm across reloads, while changed bounds start an
 * empty one and the old one is dropped when its last instance closes.
 */
import { LRUCache } from 'lru-cache'
import type { GatewayError } from '../../core/proxy/plugin-api.ts'
import type { StoredAnswer } from './entry.ts'

/** How a leader's request ended, as seen by the requests waiting on it. */
export type FlightOutcome =
  | { kind: 'answer'; answer: StoredAnswer }
  | { kind: 'error'; error: GatewayError }
  /** The leader's answer may not be shared: each waiting request goes upstream on its own. */
  | { kind: 'bypass' }
  /** The leader ended without an upstream outcome (client gone, refused later): coalesce again. */
  | { kind: 'retry' }

export interface Flight {
  readonly promise: Promise<FlightOutcome>
  settle(outcome: FlightOutcome): void
  settled: boolean
}

export interface CacheStoreOptions {
  maxBytes: number
  maxEntryBytes: number
  onEvict(): void
}

export class CacheStore {
  readonly entries: LRUCache<string, StoredAnswer>
  readonly #flights = new Map<string, Flight>()

  constructor(options: CacheStoreOptions) {
    this.entries = new LRUCache<string, StoredAnswer>({
      maxSize: options.maxBytes,
      maxEntrySize: options.maxEntryBytes,
      sizeCalculation: (answer) => answer.size,
      dispose: (_answer, _key, reason) => {
        if (reason === 'evict') options.onEvict()
      },
    })
  }

  /** The request in flight for `key`, if any. */
  flight(key: string): Flight | undefined {
    return this.#flights.get(key)
  }

  /** Registers the caller as the leader for `key`; its followers wait on the returned flight. */
  lead(key: string): Flight {
    let resolve!: (outcome: FlightOutcome) => void
    const promise = new Promise<FlightOutcome>((r) => (resolve = r))
    const flight: Flight = {
      promise,
      settled: false,
      settle: (outcome) => {
        if (flight.settled) return
        flight.settled = true
        if (this.#flights.get(key) === flight) this.#flights.delete(key)
        resolve(outcome)
      },
    }
    this.#flights.set(key, flight)
    return flight
  }

  clear(): void {
    this.entries.clear()
    for (const flight of [...this.#flights.values()]) flight.settle({ kind: 'retry' })
  }
}

const registry = new Map<string, { store: CacheStore; refs: number }>()

/**
 * The store for `identity`, created on first use; call the returned release when the plugin
 * instance closes.
 * @example const { store, release } = acquireStore(`${routeName}\n${JSON.stringify(config)}`, options)
 */
export function acquireStore(identity: string, options: CacheStoreOptions): { store: CacheStore; release: () => void } {
  let slot = registry.get(identity)
  if (!slot) {
    slot = { store: new CacheStore(options), refs: 0 }
    registry.set(identity, slot)
  }
  slot.refs++
  const held = slot
  let released = false
  return {
    store: held.store,
    release: () => {
      if (released) return
      released = true
      if (--held.refs > 0) return
      if (registry.get(identity) === held) registry.delete(identity)
      held.store.clear()
    },
  }
}
