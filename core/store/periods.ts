/**
 * Calendar periods in UTC, used as billing-period keys (credit balances) and usage buckets.
 *
 * Keys are prefixes of the ISO 8601 form, so they sort in time order as plain strings:
 * month `2026-11`, day `2026-11-21`, hour `2026-11-21T09`.
 */

export type Period = 'hour' | 'day' | 'month'

const HOUR_MS = 3_600_000
const DAY_MS = 86_400_000

/** Length of the ISO string prefix that names each period. */
const KEY_LENGTH: Record<Period, number> = { month: 7, day: 10, hour: 13 }

function isoOf(epochMs: number): string {
  if (!Number.isFinite(epochMs)) throw new RangeError(`epochMs must be a finite number, got ${epochMs}`)
  return new Date(epochMs).toISOString()
}

/**
 * The key of the UTC period that contains `epochMs`.
 *
 * @example
 * ```ts
 * periodKey('month', Date.UTC(2026, 10, 21, 9, 30)) // '2026-11'
 * periodKey('day', Date.UTC(2026, 10, 21, 9, 30))   // '2026-11-21'
 * periodKey('hour', Date.UTC(2026, 10, 21, 9, 30))  // '2026-11-21T09'
 * ```
 */
export function periodKey(period: Period, epochMs: number): string {
  const length = KEY_LENGTH[period]
  if (length === undefined) throw new RangeError(`unknown period ${String(period)}`)
  return isoOf(epochMs).slice(0, length)
}

/** Start (inclusive) and end (exclusive) of a period, epoch ms, with its key. */
export interface PeriodBounds {
  key: string
  startMs: number
  endMs: number
}

/**
 * The UTC period that contains `epochMs`: its key and its [start, end) bounds.
 *
 * @example
 * ```ts
 * const { key, endMs } = periodBounds('month', Date.UTC(2026, 11, 31, 23))
 * // key '2026-12', endMs === Date.UTC(2027, 0, 1)
 * ```
 */
export function periodBounds(period: Period, epochMs: number): PeriodBounds {
  const key = periodKey(period, epochMs)
  if (period === 'month') {
    const date = new Date(epochMs)
    const startMs = Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1)
    const endMs = Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1)
    return { key, startMs, endMs }
  }
  const size = period === 'day' ? DAY_MS : HOUR_MS
  const startMs = floorTo(size, epochMs)
  return { key, startMs, endMs: startMs + size }
}

/**
 * Start of the UTC hour or day containing `epochMs` (usage buckets).
 *
 * @example
 * ```ts
 * bucketStart('hour', Date.UTC(2026, 10, 21, 9, 30)) === Date.UTC(2026, 10, 21, 9)
 * ```
 */
export function bucketStart(granularity: 'hour' | 'day', epochMs: number): number {
  return floorTo(granularity === 'day' ? DAY_MS : HOUR_MS, epochMs)
}

function floorTo(size: number, epochMs: number): number {
  return Math.floor(epochMs / size) * size
}

export const PERIOD_MS = { hour: HOUR_MS, day: DAY_MS } as const

/** The last period computed for each length: almost every call falls in it again. */
const lastBounds: Record<Period, PeriodBounds | undefined> = { hour: undefined, day: undefined, month: undefined }

/**
 * {@link periodBounds}, recomputed only when `epochMs` leaves the period computed last for this
 * length (a boundary passed, or a test clock moved back). The per-request path: no Date, no string.
 * The result is shared and frozen.
 *
 * @example
 * ```ts
 * periodBoundsCached('month', Date.now()).key // '2026-11', the same object until December
 * ```
 */
export function periodBoundsCached(period: Period, epochMs: number): PeriodBounds {
  const last = lastBounds[period]
  if (last !== undefined && epochMs >= last.startMs && epochMs < last.endMs) return last
  const fresh = Object.freeze(periodBounds(period, epochMs))
  lastBounds[period] = fresh
  return fresh
}

/**
 * Key of the period containing `epochMs`, as {@link periodKey}, from {@link periodBoundsCached}.
 *
 * @example
 * ```ts
 * currentPeriod('day', Date.UTC(2026, 10, 21, 9)) // '2026-11-21'
 * ```
 */
export function currentPeriod(period: Period, epochMs: number): string {
  return periodBoundsCached(period, epochMs).key
}
