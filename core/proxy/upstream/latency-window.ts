/**
 * Recent head latency of one upstream, for a hedge threshold given as a percentile: a ring of the
 * last 1,000 samples, the percentile recomputed at most every 100 samples (a sort of 1,000 numbers
 * every 100 requests costs far less than keeping a sorted structure on every request).
 */
const SIZE = 1000
const RECOMPUTE_EVERY = 100
/** Fewer samples than this: no percentile yet (the fixed floor applies). */
const MIN_SAMPLES = 50

export class LatencyWindow {
  readonly #samples = new Float64Array(SIZE)
  #count = 0
  #next = 0
  #sinceCompute = 0
  #value = 0

  constructor(readonly percentile: number) {}

  add(ms: number): void {
    this.#samples[this.#next] = ms
    this.#next = (this.#next + 1) % SIZE
    if (this.#count < SIZE) this.#count++
    if (++this.#sinceCompute >= RECOMPUTE_EVERY) this.#compute()
  }

  /** The percentile of recent latency in ms, or 0 while there are too few samples. */
  value(): number {
    return this.#value
  }

  #compute(): void {
    this.#sinceCompute = 0
    if (this.#count < MIN_SAMPLES) return
    const sorted = this.#samples.slice(0, this.#count).sort()
    this.#value = sorted[Math.min(this.#count - 1, Math.floor((this.percentile / 100) * this.#count))]
  }
}
