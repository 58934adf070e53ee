/** The pure parts of a pool: ejection and the half-open probe, 429 back-off and recovery, the choice, the budget. */
import t from 'tap'
import { normaliseUpstream } from '../../../../core/proxy/upstream/config.ts'
import { Target, retryAfterMs } from '../../../../core/proxy/upstream/target.ts'
import { chooseTarget } from '../../../../core/proxy/upstream/choose.ts'
import { RetryBudget } from '../../../../core/proxy/upstream/budget.ts'
import { LatencyWindow } from '../../../../core/proxy/upstream/latency-window.ts'

const config = normaliseUpstream({
  targets: [{ url: 'http://127.0.0.1:9', name: 'a' }, { url: 'http://127.0.0.1:10', name: 'b' }],
  connections: 1,
  timeouts: { connectMs: 100, headersMs: 100, bodyMs: 100 },
  keepAliveTimeoutMs: 100,
  health: { consecutiveFailures: 2, baseEjectionMs: 1000, maxEjectionMs: 3000 },
  breaker: { recoverMs: 1000 },
})
const make = () => config.targets.map((c) => new Target(c, config, config.health, config.breaker.recoverMs))

t.test('outlier ejection, half-open probe, doubling ejections', async (t) => {
  const [a, b] = make()
  t.teardown(() => Promise.all([a.pool.close(), b.pool.close()]))
  a.failed(0)
  t.ok(a.available(0), 'one failure is not enough')
  a.failed(0)
  t.notOk(a.available(10), 'two in a row eject')
  t.equal(chooseTarget([a, b], undefined, 10, { maxConcurrent: 0, maxPending: 0 }), b, 'the choice skips the ejected target')
  t.ok(a.available(1000), 'ejection over: half-open')
  a.started()
  t.notOk(a.available(1000), 'only one probe request while half-open')
  a.failed(1001)
  t.equal(a.ejectedUntil, 1001 + 2000, 'a failed probe ejects again, twice as long')
  t.equal(a.counters.ejections, 2)
  a.started()
  a.answered(200, 5)
  t.ok(a.available(3002), 'a successful probe brings it back')
  t.equal(a.ejectionsInRow, 0)
  // Panic mode: every target ejected still chooses one.
  a.failed(4000), a.failed(4000), b.failed(4000), b.failed(4000)
  t.ok(chooseTarget([a, b], undefined, 4001, { maxConcurrent: 0, maxPending: 0 }), 'all ejected: a target is still chosen')
  t.equal(chooseTarget([a, b], a, 4001, { maxConcurrent: 0, maxPending: 0 }), b, 'and never the excluded one when another exists')
})

t.test('429 with Retry-After: nothing during it, then a share climbing to full', async (t) => {
  const [a, b] = make()
  t.teardown(() => Promise.all([a.pool.close(), b.pool.close()]))
  a.throttle(retryAfterMs('2'), 0)
  t.notOk(a.admits(1999))
  let admitted = 0
  for (let i = 0; i < 100; i++) if (a.admits(2100)) admitted++
  t.ok(admitted >= 10 && admitted <= 30, `just after: about 19% admitted (${admitted})`)
  admitted = 0
  for (let i = 0; i < 100; i++) if (a.admits(2900)) admitted++
  t.ok(admitted >= 80, `near the end of the ramp: most admitted (${admitted})`)
  t.ok(a.admits(3001), 'recovered')
  t.equal(retryAfterMs(new Date(Date.now() + 5000).toUTCString()) !== undefined, true, 'HTTP-date form')
  t.equal(retryAfterMs('soon'), undefined)
})

t.test('breaker: maxConcurrent moves traffic, maxPending refuses', async (t) => {
  const [a, b] = make()
  t.teardown(() => Promise.all([a.pool.close(), b.pool.close()]))
  a.inFlight = 2
  t.equal(chooseTarget([a, b], undefined, 0, { maxConcurrent: 2, maxPending: 1 }), b)
  b.inFlight = 2
  t.ok(chooseTarget([a, b], undefined, 0, { maxConcurrent: 2, maxPending: 1 }), 'both full, pending 0 < 1: queued')
  a.inFlight = 3
  t.equal(chooseTarget([a, b], undefined, 0, { maxConcurrent: 2, maxPending: 1 }), undefined, 'pending limit reached: refused')
})

t.test('retry budget: percent of the window plus a minimum', async (t) => {
  const budget = new RetryBudget(20, 2)
  for (let i = 0; i < 10; i++) budget.request(0)
  let taken = 0
  while (budget.take(0)) taken++
  t.equal(taken, 4, '2 + 20% of 10')
  t.equal(budget.refused, 1)
  t.ok(budget.take(20_000), 'a new window')
})

t.test('latency window percentile', async (t) => {
  const w = new LatencyWindow(95)
  for (let i = 1; i <= 200; i++) w.add(i % 100)
  t.ok(w.value() >= 90 && w.value() <= 99, `p95 ≈ 95 (${w.value()})`)
})
