/**
 * In-process token buckets for rate limiting (the embedded engine's `takeToken`).
 *
 * A bucket holds up to `capacity` tokens and refills continuously at `refillPerSecond`; a request
 * takes `cost` tokens or is refused. State is two numbers per key, mutated in place.
 *
 * Memory is bounded: buckets live in an LRU map of at most `maxBuckets` keys (a Map kept in
 * recency order: a bucket used again moves to its end, unless it is already the last one used,
 * which on a busy route it nearly always is; then a take is one lookup). Forgetting a bucket
 * is the same as finding it full, and the least recently used bucket is the one most likely to have
 * refilled already, so eviction rarely changes a decision. Under a flood of distinct keys larger than
 * the map, the oldest keys start over full: the bound is a memory guarantee, sized well above the
 * number of keys active within one refill time.
 */
import type { RateDecision } from './types.ts'

interface Bucket {
  tokens: number
  /** Clock reading of the last refill, ms. */
  at: number
}

export interface TokenBucketOptions {
  /** Most keys kept at once (default 100,000, about 10 MB). */
  maxBuckets?: number
  /** Epoch-ms clock; injectable for tests. */
  clock?: () => number
}

/** Tolerance for float drift in refill arithmetic (a bucket refilled to 0.9999999999 counts as 1). */
const EPSILON = 1e-9

/**
 * A keyed set of token buckets.
 *
 * @example
 * ```ts
 * const buckets = new TokenBuckets({ maxBuckets: 10_000 })
 * const decision = buckets.take('project:demo', 10, 5) // 10 burst, 5/s sustained
 * if (!decision.allowed) reply429(decision.retryAfterSeconds)
 * ```
 */
export class TokenBuckets {
  /** Least recently used first. */
  private readonly buckets = new Map<string, Bucket>()
  private readonly maxBuckets: number
  /** The key of the last take: already at the end of `buckets`. */
  private lastKey: string | undefined = undefined
  private readonly clock: () => number

  constructor(options: TokenBucketOptions = {}) {
    const max = options.maxBuckets ?? 100_000
    if (!(max >= 1) || !Number.isInteger(max)) throw new RangeError(`maxBuckets must be a positive integer, got ${max}`)
    this.maxBuckets = max
    this.clock = options.clock ?? Date.now
  }

  /** The bucket of `key`, made the most recently used; undefined when there is none. */
  private use(key: string): Bucket | undefined {
    const bucket = this.buckets.get(key)
    if (bucket === undefined || key === this.lastKey) return bucket
    this.buckets.delete(key)
    this.buckets.set(key, bucket)
    this.lastKey = key
    return bucket
  }

  private add(key: string, bucket: Bucket): void {
    if (this.buckets.size >= this.maxBuckets) this.buckets.delete(this.buckets.keys().next().value as string)
    this.buckets.set(key, bucket)
    this.lastKey = key
  }

  /**
   * Takes `cost` tokens from the bucket of `key` if it holds that many. A cost above the capacity
   * can never pass; it is refused with `retryAfterSeconds` equal to the time to a full bucket.
   */
  take(key: string, capacity: number, refillPerSecond: number, cost = 1): RateDecision {
    if (!(capacity > 0) || !Number.isFinite(capacity)) throw new RangeError(`capacity must be a positive number, got ${capacity}`)
    if (!(refillPerSecond > 0) || !Number.isFinite(refillPerSecond)) {
      throw new RangeError(`refillPerSecond must be a positive number, got ${refillPerSecond}`)
    }
    if (!(cost >= 0) || !Number.isFinite(cost)) throw new RangeError(`cost must be a non-negative number, got ${cost}`)

    const now = this.clock()
    let bucket = this.use(key)
    if (bucket === undefined) {
      bucket = { tokens: capacity, at: now }
      this.add(key, bucket)
    } else {
      // A clock stepping backwards must not mint tokens, hence the max(0, ...).
      const elapsedMs = Math.max(0, now - bucket.at)
      bucket.tokens = Math.min(capacity, bucket.tokens + (elapsedMs * refillPerSecond) / 1000)
      bucket.at = Math.max(bucket.at, now)
    }

    const allowed = cost <= capacity && bucket.tokens + EPSILON >= cost
    if (allowed) bucket.tokens = Math.max(0, bucket.tokens - cost)

    const resetSeconds = secondsFor(capacity - bucket.tokens, refillPerSecond)
    let retryAfterSeconds = 0
    if (!allowed) retryAfterSeconds = cost <= capacity ? Math.max(1, secondsFor(cost - bucket.tokens, refillPerSecond)) : Math.max(1, resetSeconds)
    return {
      allowed,
      limit: capacity,
      remaining: Math.floor(bucket.tokens + EPSILON),
      resetSeconds,
      retryAfterSeconds,
    }
  }

  /** Number of buckets held (bounded by `maxBuckets`). */
  get size(): number {
    return this.buckets.size
  }

  clear(): void {
    this.buckets.clear()
    this.lastKey = undefined
  }
}

/** Whole seconds (rounded up) to refill `tokens`. */
function secondsFor(tokens: number, refillPerSecond: number): number {
  if (tokens <= EPSILON) return 0
  return Math.ceil(tokens / refillPerSecond - EPSILON)
}
