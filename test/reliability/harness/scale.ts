/**
 * How big each part of the suite runs. `npm test` runs the short form; `npm run reliability`
 * sets RELIABILITY=long (the figures of RELIABILITY.md); each count can also be set on its own.
 */
const LONG = process.env.RELIABILITY === 'long'

function count(name: string, short: number, long: number): number {
  const value = process.env[`RELIABILITY_${name}`]
  if (value !== undefined && /^\d+$/.test(value)) return Number(value)
  return LONG ? long : short
}

export const scale = {
  long: LONG,
  /** fast-check runs per request generator (paths, headers, bodies, raw framing). */
  fuzzRuns: count('FUZZ_RUNS', 300, 22_500),
  /** Upstream faults injected in total, spread over every fault kind and upstream. */
  faults: count('FAULTS', 420, 3_400),
  /** kill -9 cycles under load. */
  killCycles: count('KILL_CYCLES', 2, 18),
  /** Acknowledged answers to wait for before each kill. */
  answersPerCycle: count('ANSWERS_PER_CYCLE', 300, 7_000),
  /** Bursts of 1,000 concurrent requests on a balance of 100. */
  bursts: count('BURSTS', 2, 48),
  /** Reloads under load. */
  reloads: count('RELOADS', 8, 60),
  /** Requests of the soak. */
  soakRequests: count('SOAK_REQUESTS', 6_000, 1_000_000),
  /**
   * Requests sent before the soak's first sample. V8 grows its heap over the first few thousand
   * requests (about 12 KiB a request, level from about 5,000 on: 30,000 requests on 2026-11-27 read
   * 231 → 281 MiB by 4,500, then 273 MiB to the end), so samples taken earlier measure heap sizing,
   * not a leak.
   */
  soakWarmup: count('SOAK_WARMUP', 6_000, 20_000),
  /** Connections that send their headers a byte at a time. */
  slowConnections: count('SLOW_CONNECTIONS', 150, 1_050),
}

/** Per-file time bound: the short form stays within minutes even on a busy machine; the long form gets hours. */
export const FILE_TIMEOUT_MS = LONG ? 6 * 3600_000 : 300_000

/** How long a gateway may take to print its start line (a loaded CI machine compiles slowly). */
export const START_TIMEOUT_MS = 90_000
