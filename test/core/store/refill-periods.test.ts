/**
 * Refill schedules (core/store/periods.ts): monthly refill days clamped to the month's end, leap
 * years, year boundaries, and the plain keys kept for the schedules equal to a calendar period.
 */
import t from 'tap'
import { currentSchedulePeriod, refillStart, scheduleBounds, type CreditSchedule } from '../../../core/store/periods.ts'

const monthly = (day: number): CreditSchedule => ({ period: 'month', refill: { interval: 'month', day } })

t.test('day 31: Jan 31 → Feb 28 (29 in a leap year) → Mar 31', async (t) => {
  t.same(scheduleBounds(monthly(31), Date.UTC(2027, 1, 10)), { key: '2027-01-31/P1M', startMs: Date.UTC(2027, 0, 31), endMs: Date.UTC(2027, 1, 28) })
  t.same(scheduleBounds(monthly(31), Date.UTC(2027, 1, 28)), { key: '2027-02-28/P1M', startMs: Date.UTC(2027, 1, 28), endMs: Date.UTC(2027, 2, 31) }, 'the refill of a short month is its last day')
  t.same(scheduleBounds(monthly(31), Date.UTC(2028, 1, 28, 23, 59)), { key: '2028-01-31/P1M', startMs: Date.UTC(2028, 0, 31), endMs: Date.UTC(2028, 1, 29) }, '2028 is a leap year: Feb 29')
  t.same(scheduleBounds(monthly(31), Date.UTC(2028, 1, 29)), { key: '2028-02-29/P1M', startMs: Date.UTC(2028, 1, 29), endMs: Date.UTC(2028, 2, 31) })
  t.same(scheduleBounds(monthly(30), Date.UTC(2100, 1, 28, 12)).key, '2100-02-28/P1M', '2100 is not a leap year')
  t.same(scheduleBounds(monthly(31), Date.UTC(2027, 3, 30, 1)).key, '2027-04-30/P1M', 'April has 30 days')
  t.same(scheduleBounds(monthly(31), Date.UTC(2027, 3, 29)).key, '2027-03-31/P1M')
})

t.test('periods are contiguous: each ends where the next starts, across a year', async (t) => {
  for (const day of [2, 15, 28, 29, 30, 31]) {
    let at = Date.UTC(2027, 0, 1)
    let previous = scheduleBounds(monthly(day), at)
    for (let i = 0; i < 14; i++) {
      const next = scheduleBounds(monthly(day), previous.endMs)
      t.equal(next.startMs, previous.endMs)
      t.ok(next.key > previous.key, `day ${day}: keys sort in time order (${previous.key} < ${next.key})`)
      t.equal(scheduleBounds(monthly(day), next.endMs - 1).key, next.key, 'the last millisecond belongs to the period')
      previous = next
      at = next.startMs
    }
  }
})

t.test('a year boundary: day 15, Jan 3 belongs to the period from Dec 15', async (t) => {
  t.same(scheduleBounds(monthly(15), Date.UTC(2027, 0, 3)), { key: '2026-12-15/P1M', startMs: Date.UTC(2026, 11, 15), endMs: Date.UTC(2027, 0, 15) })
  t.same(scheduleBounds(monthly(15), Date.UTC(2026, 11, 31)).endMs, Date.UTC(2027, 0, 15))
})

t.test('schedules equal to a calendar period keep its keys; period alone still works', async (t) => {
  const at = Date.UTC(2026, 10, 21, 9, 30)
  t.equal(scheduleBounds(monthly(1), at).key, '2026-11')
  t.equal(scheduleBounds({ period: 'hour', refill: { interval: 'day' } }, at).key, '2026-11-21', 'refill wins over period')
  t.equal(scheduleBounds({ period: 'hour' }, at).key, '2026-11-21T09')
  t.equal(scheduleBounds({ period: 'month', refill: null }, at).key, '2026-11')
  t.equal(currentSchedulePeriod(monthly(15), at), '2026-11-15/P1M')
  t.equal(currentSchedulePeriod(monthly(15), Date.UTC(2026, 10, 14)), '2026-10-15/P1M', 'the cache recomputes when the clock leaves the period')
  t.equal(currentSchedulePeriod(monthly(31), Date.UTC(2027, 1, 28)), '2027-02-28/P1M')
  t.equal(currentSchedulePeriod({ period: 'day' }, at), '2026-11-21')
  t.throws(() => scheduleBounds(monthly(32), at), RangeError)
  t.throws(() => scheduleBounds(monthly(0), at), RangeError)
})

t.test('refillStart clamps to the month and rolls months over years', async (t) => {
  t.equal(refillStart(2027, 1, 31), Date.UTC(2027, 1, 28))
  t.equal(refillStart(2024, 1, 30), Date.UTC(2024, 1, 29))
  t.equal(refillStart(2027, 12, 31), Date.UTC(2028, 0, 31), 'month 12 is January of the next year')
  t.equal(refillStart(2027, -1, 31), Date.UTC(2026, 11, 31), 'month -1 is December of the year before')
})
