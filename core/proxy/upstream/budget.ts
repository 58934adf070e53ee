/**
 * The retry budget of one upstream (Envoy's retry_budget, as a rate): retries and hedges together
 * may add at most `percent` % over the requests of the last ten seconds, plus `minPerWindow`, so a
 * failing upstream is never sent a storm of second attempts. Two 5-second buckets approximate the
 * sliding window at the cost of two counters.
 */
const BUCKET_MS = 5000

export class RetryBudget {
  #bucketStart = 0
  #requests = [0, 0]
  #extra = [0, 0]
  /** Extra attempts refused by the budget since start (for metrics). */
  refused = 0

  constructor(readonly percent: number, readonly minPerWindow: number) {}

  #roll(now: number): void {
    if (now - this.#bucketStart < BUCKET_MS) return
    const skipped = Math.floor((now - this.#bucketStart) / BUCKET_MS)
    if (skipped >= 2) {
      this.#requests = [0, 0]
      this.#extra = [0, 0]
    } else {
      this.#requests = [0, this.#requests[0]]
      this.#extra = [0, this.#extra[0]]
    }
    this.#bucketStart = now - ((now - this.#bucketStart) % BUCKET_MS)
  }

  /** A client request arrived (counted once, however many attempts it takes). */
  request(now: number): void {
    this.#roll(now)
    this.#requests[0]++
  }

  /** Takes one extra attempt from the budget; false when it is spent. */
  take(now: number): boolean {
    this.#roll(now)
    const requests = this.#requests[0] + this.#requests[1]
    const extra = this.#extra[0] + this.#extra[1]
    if (extra >= this.minPerWindow + (requests * this.percent) / 100) {
      this.refused++
      return false
    }
    this.#extra[0]++
    return true
  }
}
