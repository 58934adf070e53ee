/**
 * The meter's per-request shortcuts (issue 31): `settleThen`, the one-step settlement the response
 * phase uses, on the real SQLite store; and the decimal text of the cost headers for large balances.
 */
import t from 'tap'
import { openSqliteStore } from '../../../core/store/sqlite.ts'
import { CreditLedger, type MeteredRequest } from '../../../plugins/credit-meter/ledger.ts'
import { integerText } from '../../../plugins/credit-meter/index.ts'
import { tempDir } from '../../helpers/temp.ts'
import { meteredProject } from '../../helpers/project-fixture.ts'

const monthly = meteredProject(100, 'month', 'rpc')

t.test('settleThen: the step after runs once the settlement is done, with the state it left', async (t) => {
  const store = openSqliteStore({ dataDir: tempDir('tollgate-settle-then-'), usageFlushMs: 0 })
  t.teardown(() => store.close())
  const ledger = new CreditLedger(store, () => Date.UTC(2026, 0, 5))
  const used = async () => (await store.balance('p1', '2026-01', 100)).used
  const seen: { state: string; charged: number }[] = []
  const after = (metered: MeteredRequest) => seen.push({ state: metered.state, charged: CreditLedger.charged(metered) })

  const whole = ledger.reserveNow(store.immediate, 'whole', monthly, 'PRIVNET_RPC', 10)
  const settling = ledger.settleThen(whole, true, 0, after, whole)
  t.same(seen, [], 'nothing runs before the commit is written')
  await settling
  t.same(seen, [{ state: 'committed', charged: 10 }], 'the usual commit: after sees the charge')
  t.equal(await used(), 10)

  const part = ledger.reserveNow(store.immediate, 'part', monthly, 'PRIVNET_RPC', 10)
  await ledger.settleThen(part, true, 4, after, part)
  t.same(seen[1], { state: 'committed', charged: 6 }, 'a partial refund goes back before the commit')
  t.equal(await used(), 16)

  const refused = ledger.reserveNow(store.immediate, 'refused', monthly, 'PRIVNET_RPC', 10)
  await ledger.settleThen(refused, false, 0, after, refused)
  t.same(seen[2], { state: 'released', charged: 0 }, 'an uncharged answer releases the reservation')
  t.equal(await used(), 16)

  await ledger.settleThen(whole, false, 0, after, whole)
  t.same(seen[3], { state: 'released', charged: 0 }, 'settled again as a failure: the charge is refunded')
  t.equal(await used(), 6)
  t.equal(seen.length, 4)
})

t.test('settleThen: a commit that cannot be written rejects, leaves the reservation pending and skips the step after', async (t) => {
  const store = openSqliteStore({ dataDir: tempDir('tollgate-settle-then-'), usageFlushMs: 0 })
  const ledger = new CreditLedger(store, () => Date.UTC(2026, 0, 5))
  const metered = ledger.reserveNow(store.immediate, 'doomed', monthly, 'PRIVNET_RPC', 1)
  await store.close()
  let ran = false
  await t.rejects(ledger.settleThen(metered, true, 0, () => (ran = true), undefined))
  t.equal(metered.state, 'pending', 'not committed: done releases it')
  t.equal(ran, false)
})

t.test('integerText is the decimal text String gives, for every credit figure', async (t) => {
  const figures = [0, 1, 999, 2 ** 30 - 1, 2 ** 30, 1e9, 1e9 + 7, 1e12, 1e12 - 1, 999_999_999_999, 123_456_789_012_345, Number.MAX_SAFE_INTEGER, -5, 2.5, 2 ** 53 + 2, Infinity]
  for (const n of figures) t.equal(integerText(n), String(n), String(n))
  for (let i = 0; i < 10_000; i++) {
    const n = Math.floor(Math.random() * Number.MAX_SAFE_INTEGER)
    if (integerText(n) !== String(n)) t.fail(`${n}: ${integerText(n)}`)
  }
})
