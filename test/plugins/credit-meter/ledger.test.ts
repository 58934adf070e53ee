/**
 * The credit-meter's ledger logic on the real SQLite store: billing-period rollover (with the
 * ledger's injectable clock), commit/release/partial refunds, and the pure rules beside it
 * (refund policy, batch item count, usage query parameters).
 */
import t from 'tap'
import type { Project } from '../../../core/projects/projects.ts'
import { openSqliteStore } from '../../../core/store/sqlite.ts'
import { GatewayError } from '../../../core/proxy/errors.ts'
import { CreditLedger } from '../../../plugins/credit-meter/ledger.ts'
import { isCharged, type RefundPolicy } from '../../../plugins/credit-meter/refund-policy.ts'
import { countItems } from '../../../plugins/credit-meter/items.ts'
import { parseUsageQuery } from '../../../plugins/credit-meter/usage-route.ts'
import { tempDir } from '../../helpers/temp.ts'
import { meteredProject } from '../../helpers/project-fixture.ts'

const project = (allocation: number, period: Project['credits']['period']): Project => meteredProject(allocation, period)

function openStore(t: Tap) {
  const store = openSqliteStore({ dataDir: tempDir('tollgate-meter-'), usageFlushMs: 0 })
  t.teardown(() => store.close())
  return store
}
type Tap = { teardown(fn: () => unknown): void }

t.test('a reservation made before a period boundary and settled after it stays in its own period', async (t) => {
  const store = openStore(t)
  let now = Date.UTC(2026, 10, 21, 9, 59, 59, 900)
  const ledger = new CreditLedger(store, () => now)
  const hourly = project(3, 'hour')

  const late = await ledger.reserve('r-late', hourly, 'PRIVNET_ZKPAAS', 2)
  t.equal(late.period, '2026-11-21T09')
  await t.rejects(ledger.reserve('r-over', hourly, 'PRIVNET_ZKPAAS', 2), { status: 402, code: 'credits_exhausted' }, 'the pending reservation already counts')

  now = Date.UTC(2026, 10, 21, 10, 0, 0, 100)
  await ledger.settle(late, true, 0)
  t.equal((await store.balance('p1', '2026-11-21T09', 3)).used, 2, 'committed after the boundary, charged to 09')
  t.equal((await store.balance('p1', '2026-11-21T10', 3)).used, 0, 'the new hour starts empty')
  t.equal(ledger.currentPeriod(hourly), '2026-11-21T10')
  const fresh = await ledger.reserve('r-fresh', hourly, 'PRIVNET_ZKPAAS', 3)
  t.equal(fresh.period, '2026-11-21T10', 'a new request gets the whole allocation of the new hour')

  const early = await ledger.reserve('r-month', project(10, 'month'), 'MIRROR', 4)
  now = Date.UTC(2026, 11, 1, 0, 0, 1)
  await ledger.release(early)
  t.equal((await store.balance('p1', '2026-11', 10)).used, 0, 'a release after a month boundary refunds the old month')
})

t.test('settle: commit minus partial refunds, release after commit, idempotence', async (t) => {
  const store = openStore(t)
  const ledger = new CreditLedger(store, () => Date.UTC(2026, 0, 5))
  const monthly = project(100, 'month')
  const used = async () => (await store.balance('p1', '2026-01', 100)).used

  const a = await ledger.reserve('a', monthly, 'PRIVNET_ZKPAAS', 10)
  t.equal(await used(), 10, 'pending counts at once')
  await ledger.settle(a, true, 3)
  t.equal(a.state, 'committed')
  t.equal(await used(), 7, 'charged 10 - 3')
  t.equal(CreditLedger.charged(a), 7)
  await ledger.settle(a, true, 3)
  t.equal(await used(), 7, 'settling again for the same answer changes nothing')
  await ledger.settle(a, false, 0)
  t.equal(a.state, 'released')
  t.equal(await used(), 0, 'an answer that turned into a failure gives everything back')
  await ledger.release(a)
  await ledger.settle(a, true, 0)
  t.equal(await used(), 0, 'a released reservation is never charged again')
  t.equal(CreditLedger.charged(a), 0)

  const b = await ledger.reserve('b', monthly, 'PRIVNET_ZKPAAS', 10)
  await ledger.settle(b, true, 50)
  t.equal(await used(), 0, 'a refund above the cost gives back the cost, no more')
  const c = await ledger.reserve('c', monthly, 'PRIVNET_ZKPAAS', 100)
  t.equal(c.amount, 100, 'the whole allocation can be reserved')
  const refused = await ledger.reserve('d', monthly, 'PRIVNET_ZKPAAS', 1).catch((error: GatewayError) => error)
  t.match(refused, { status: 402, code: 'credits_exhausted', message: 'project p1 has 0 of 100 credits left in period 2026-01; this request needs 1' })
})

t.test('refund policy', async (t) => {
  const policy: RefundPolicy = { refundStatuses: new Set([502, 504]), refundUpstream5xx: true }
  const strict: RefundPolicy = { refundStatuses: new Set([502, 504]), refundUpstream5xx: false }
  const upstream = (status: number) => ({ status, gatewayError: false, upstreamAnswered: true })
  const gateway = (status: number) => ({ status, gatewayError: true, upstreamAnswered: false })
  t.equal(isCharged(upstream(200), policy), true)
  t.equal(isCharged(upstream(404), policy), true, 'an upstream 4xx: the service did its part')
  t.equal(isCharged(upstream(500), policy), false)
  t.equal(isCharged(upstream(500), strict), true, 'refundUpstream5xx: false charges upstream 5xx')
  t.equal(isCharged(upstream(502), strict), false, 'refundStatuses always refund')
  t.equal(isCharged(gateway(502), strict), false)
  t.equal(isCharged(gateway(504), strict), false)
  t.equal(isCharged(gateway(500), strict), false, "the gateway's own 5xx is always refunded")
  t.equal(isCharged(gateway(400), policy), false, 'refused before reaching the service')
  t.equal(isCharged({ status: 422, gatewayError: true, upstreamAnswered: true }, policy), true, 'refused after the service answered')
  t.equal(isCharged(upstream(429), { refundStatuses: new Set([429]), refundUpstream5xx: false }), false, 'statuses are configurable')
})

t.test('batch items and usage query parameters', async (t) => {
  t.equal(countItems({ proofs: [1, 2, 3] }, 'proofs'), 3)
  t.equal(countItems({ batch: { calls: [1, 2] } }, 'batch.calls'), 2)
  t.equal(countItems({ proofs: [] }, 'proofs'), 1, 'an empty batch still costs one item')
  t.equal(countItems({ proofs: 'x' }, 'proofs'), 1)
  t.equal(countItems(undefined, 'proofs'), 1)
  t.equal(countItems([1, 2], 'proofs'), 1)

  const now = Date.UTC(2026, 10, 21, 12)
  const q = (query: string) => parseUsageQuery(new URLSearchParams(query), now)
  t.same(q(''), { from: now - 30 * 86_400_000, to: now, granularity: 'day' }, 'defaults: the last 30 days by day, as the CLI')
  t.same(q('granularity=hour&from=2026-11-21T00:00:00Z&to=2026-11-21T06:00:00Z'), {
    from: Date.UTC(2026, 10, 21),
    to: Date.UTC(2026, 10, 21, 6),
    granularity: 'hour',
  })
  t.same(q('from=2026-11-01').from, Date.UTC(2026, 10, 1), 'a date alone is midnight UTC')
  for (const [query, field] of [
    ['granularity=minute', /granularity/],
    ['from=1700000000000', /^from must be an ISO 8601/],
    ['to=tomorrow', /^to must be an ISO 8601/],
    ['from=2026-11-21&to=2026-11-20', /^from must be earlier than to/],
    ['granularity=hour&from=2026-01-01', /spans more than 93 days/],
  ] as const) {
    t.throws(() => q(query), { status: 400, code: 'invalid_query', message: field }, query)
  }
})
