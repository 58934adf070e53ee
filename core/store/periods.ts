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

/**
 * A refill schedule (Unkey's `credits.refill`): the allocation is fresh at every refill, daily at
 * 00:00 UTC or monthly on `day` (1 to 31; a day past a month's end means that month's last day, so
 * day 31 refills on Feb 28, or 29 in a leap year, then on Mar 31).
 */
export interface RefillSchedule {
  interval: 'day' | 'month'
  /** Monthly: the day of the month the period starts on (default 1). */
  day?: number
}

/** A project's credit periods: `refill` when set, else the calendar `period`. */
export interface CreditSchedule {
  period: Period
  refill?: RefillSchedule | null
}

function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month + 1, 0)).getUTCDate()
}

/**
 * Midnight UTC of `day` in the month `month` of `year` (month may run past 0..11), clamped to
 * the month's last day.
 *
 * @example
 * ```ts
 * refillStart(2027, 1, 31) === Date.UTC(2027, 1, 28) // Feb 2027 has 28 days
 * ```
 */
export function refillStart(year: number, month: number, day: number): number {
  const first = new Date(Date.UTC(year, month, 1))
  const y = first.getUTCFullYear()
  const m = first.getUTCMonth()
  return Date.UTC(y, m, Math.min(day, daysInMonth(y, m)))
}

/**
 * The period of a schedule that contains `epochMs`. Calendar periods (and `refill` daily, or
 * monthly on day 1) keep their plain keys (`2026-11`, `2026-11-21`), so switching between the
 * equivalent forms keeps the balance; a monthly refill on another day is keyed by its first day
 * and length, `2026-11-15/P1M` (an ISO 8601 interval), which sorts in time order too.
 *
 * @example
 * ```ts
 * scheduleBounds({ period: 'month', refill: { interval: 'month', day: 31 } }, Date.UTC(2027, 2, 5))
 * // { key: '2027-02-28/P1M', startMs: Date.UTC(2027, 1, 28), endMs: Date.UTC(2027, 2, 31) }
 * ```
 */
export function scheduleBounds(schedule: CreditSchedule, epochMs: number): PeriodBounds {
  const refill = schedule.refill
  if (!refill) return periodBounds(schedule.period, epochMs)
  if (refill.interval === 'day') return periodBounds('day', epochMs)
  const day = refill.day ?? 1
  if (!(Number.isInteger(day) && day >= 1 && day <= 31)) throw new RangeError(`refill.day must be an integer from 1 to 31, got ${day}`)
  if (day === 1) return periodBounds('month', epochMs)
  const date = new Date(epochMs)
  if (Number.isNaN(date.getTime())) throw new RangeError(`epochMs must be a finite number, got ${epochMs}`)
  const year = date.getUTCFullYear()
  const month = date.getUTCMonth()
  const thisMonth = refillStart(year, month, day)
  const startMs = epochMs >= thisMonth ? thisMonth : refillStart(year, month - 1, day)
  const startMonth = new Date(startMs).getUTCMonth() + (new Date(startMs).getUTCFullYear() - year) * 12
  const endMs = refillStart(year, startMonth + 1, day)
  return { key: `${isoOf(startMs).slice(0, 10)}/P1M`, startMs, endMs }
}

/** The last bounds computed per schedule (`interval:day`): almost every call falls in them again. */
const lastScheduleBounds = new Map<string, PeriodBounds>()

/**
 * Key of the schedule's period containing `epochMs`, as {@link scheduleBounds}; the per-request path
 * (a calendar period goes through {@link currentPeriod}'s cache, a schedule through its own).
 *
 * @example
 * ```ts
 * currentSchedulePeriod({ period: 'month', refill: { interval: 'month', day: 15 } }, Date.UTC(2026, 10, 21)) // '2026-11-15/P1M'
 * ```
 */
export function currentSchedulePeriod(schedule: CreditSchedule, epochMs: number): string {
  const refill = schedule.refill
  if (!refill) return currentPeriod(schedule.period, epochMs)
  if (refill.interval === 'day' || (refill.day ?? 1) === 1) return currentPeriod(refill.interval, epochMs)
  const id = `month:${refill.day}`
  const last = lastScheduleBounds.get(id)
  if (last !== undefined && epochMs >= last.startMs && epochMs < last.endMs) return last.key
  const fresh = Object.freeze(scheduleBounds(schedule, epochMs))
  lastScheduleBounds.set(id, fresh)
  return fresh.key
}
