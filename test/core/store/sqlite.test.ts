import t from 'tap'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import Database from 'better-sqlite3'
import { openSqliteStore, type SqliteStore, type SqliteStoreOptions } from '../../../core/store/sqlite.ts'
import { currentPeriod, periodBounds, periodBoundsCached, periodKey } from '../../../core/store/periods.ts'
import type { CreditReservation } from '../../../core/store/types.ts'

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url))

/** What the helpers need of a tap test. */
interface Teardowns {
  teardown(fn: () => unknown): void
}

function tempDir(t: Teardowns): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tollgate-store-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

function openStore(t: Teardowns, options: Partial<SqliteStoreOptions> = {}): SqliteStore {
  const store = openSqliteStore({ dataDir: tempDir(t), ...options })
  t.teardown(() => store.close())
  return store
}

function reservation(id: string, fields: Partial<CreditReservation> = {}): CreditReservation {
  return { id, projectId: 'demo', period: '2026-11', allocation: 100, amount: 1, apiType: 'MIRROR', ...fields }
}

t.test('periods are UTC keys that sort in time order', async (t) => {
  const at = Date.UTC(2026, 10, 21, 9, 30, 15)
  t.equal(periodKey('month', at), '2026-11')
  t.equal(periodKey('day', at), '2026-11-21')
  t.equal(periodKey('hour', at), '2026-11-21T09')
  t.equal(periodKey('month', Date.UTC(2026, 11, 31, 23, 59, 59, 999)), '2026-12')
  t.equal(periodKey('month', Date.UTC(2027, 0, 1)), '2027-01')
  t.same(periodBounds('month', Date.UTC(2026, 11, 15)), { key: '2026-12', startMs: Date.UTC(2026, 11, 1), endMs: Date.UTC(2027, 0, 1) })
  t.same(periodBounds('day', at), { key: '2026-11-21', startMs: Date.UTC(2026, 10, 21), endMs: Date.UTC(2026, 10, 22) })
  t.same(periodBounds('hour', at), { key: '2026-11-21T09', startMs: Date.UTC(2026, 10, 21, 9), endMs: Date.UTC(2026, 10, 21, 10) })
  t.throws(() => periodKey('month', Number.NaN), RangeError)

  const first = periodBoundsCached('hour', at)
  t.equal(periodBoundsCached('hour', at + 60_000), first, 'the same period is not recomputed')
  t.equal(currentPeriod('hour', Date.UTC(2026, 10, 21, 10)), '2026-11-21T10', 'a boundary recomputes')
  t.equal(currentPeriod('hour', at), '2026-11-21T09', 'a clock moved back recomputes too')
  for (const period of ['hour', 'day', 'month'] as const) {
    for (const epochMs of [at, Date.UTC(2026, 11, 31, 23, 59, 59, 999), Date.UTC(2027, 0, 1)]) {
      t.equal(currentPeriod(period, epochMs), periodKey(period, epochMs), `${period} at ${epochMs}`)
    }
  }
  t.throws(() => currentPeriod('day', Number.NaN), RangeError)
})

t.test('no overspend: 1,000 concurrent reservations against 100 credits', async (t) => {
  const store = openStore(t)
  const results = await Promise.all(Array.from({ length: 1000 }, (_, i) => store.reserveCredits(reservation(`r${i}`))))
  t.equal(results.filter((r) => r.ok).length, 100, 'exactly 100 accepted')
  t.equal(results.filter((r) => !r.ok).length, 900, 'exactly 900 refused')
  const refused = results.find((r) => !r.ok)!
  t.same(refused.balance, { projectId: 'demo', period: '2026-11', allocation: 100, granted: 0, used: 100, remaining: 0 })
  t.same(await store.balance('demo', '2026-11', 100), { projectId: 'demo', period: '2026-11', allocation: 100, granted: 0, used: 100, remaining: 0 })
  t.equal((await store.balance('other', '2026-11', 100)).used, 0, 'other projects are untouched')
})

// The meter's in-process reserve answers a number (credits left) when it holds the reservation and
// the period's balance when it refuses: the same figures as Store.reserveCredits, on the same ledger.
t.test('immediate reserve: credits left as a number when held, the balance when refused; agrees with reserveCredits', async (t) => {
  const store = openStore(t)
  await store.grantCredits({ id: 'g1', projectId: 'demo', period: '2026-11', allocation: 10, amount: 5, reason: 'top_up', actor: 'ops' })
  const immediate = store.immediate
  t.equal(immediate.reserveCredits(reservation('i1', { allocation: 10, amount: 4 })), 11, '10 + 5 granted - 4')
  const viaStore = await store.reserveCredits(reservation('s1', { allocation: 10, amount: 3 }))
  t.same(viaStore, { ok: true, balance: { projectId: 'demo', period: '2026-11', allocation: 10, granted: 5, used: 7, remaining: 8 } })
  t.equal(immediate.reserveCredits(reservation('i2', { allocation: 10, amount: 8 })), 0, 'the last credits: 0 left, held')
  const refused = immediate.reserveCredits(reservation('i3', { allocation: 10, amount: 1 }))
  t.same(refused, { projectId: 'demo', period: '2026-11', allocation: 10, granted: 5, used: 15, remaining: 0 }, 'refused: the balance, unchanged')
  t.same(await store.reserveCredits(reservation('s2', { allocation: 10, amount: 1 })), { ok: false, balance: refused })
  await store.releaseCredits('i1')
  t.equal(immediate.reserveCredits(reservation('i3', { allocation: 10, amount: 1 })), 3, 'a refused id was not held: it can reserve once credits are back')
  t.throws(() => immediate.reserveCredits(reservation('i3', { allocation: 10, amount: 1 })), { code: 'reservation_exists' })
})

t.test('group commit: the writes of one event-loop turn share a transaction, at most maxBatchOps each', async (t) => {
  const store = openStore(t)
  const results = await Promise.all(Array.from({ length: 1000 }, (_, i) => store.reserveCredits(reservation(`r${i}`, { allocation: 1e6 }))))
  t.ok(results.every((r) => r.ok))
  t.same(store.writeStats(), { transactions: 0, operations: 0 }, 'reservations are held in memory: no disk write')
  t.same(results.slice(0, 3).map((r) => r.balance.used), [1, 2, 3], 'each reserve sees the state the ones before it left')

  await Promise.all(Array.from({ length: 1000 }, (_, i) => store.commitCredits(`r${i}`)))
  t.same(store.writeStats(), { transactions: 1, operations: 1 }, '1,000 concurrent commits: one sum, one transaction')
  await Promise.all(Array.from({ length: 10 }, (_, i) => store.releaseCredits(`r${i}`)))
  await store.commitCredits('r999')
  t.same(store.writeStats(), { transactions: 2, operations: 2 }, 'refunds of a later turn: one more sum; a repeated commit writes nothing')
  t.equal((await store.balance('demo', '2026-11', 1e6)).used, 990)

  const insertMany = async (target: SqliteStore, count: number) => {
    const items = target.documents('items')
    await Promise.all(Array.from({ length: count }, (_, i) => items.insertIfAbsent(`k${i}`, 'owner', { i })))
  }
  const capped = openStore(t, { maxBatchOps: 100 })
  await insertMany(capped, 250)
  t.same(capped.writeStats(), { transactions: 3, operations: 250 }, '250 writes with a cap of 100 take 3 transactions')

  const unbatched = openStore(t, { maxBatchOps: 1 })
  await insertMany(unbatched, 20)
  t.same(unbatched.writeStats(), { transactions: 20, operations: 20 }, 'maxBatchOps 1: one transaction per write')
  t.throws(() => openSqliteStore({ dataDir: tempDir(t), maxBatchOps: 0 }), RangeError)
})

t.test('group commit: a failing write is rejected alone, the rest of its batch commits in order', async (t) => {
  const dataDir = tempDir(t)
  // Not exclusive, so a second connection can plant a trigger that makes one project's sum fail.
  const store = openStore(t, { dataDir, exclusive: false })
  const side = new Database(store.file)
  side.exec(`CREATE TRIGGER poison BEFORE INSERT ON credit_balances WHEN NEW.project_id = 'poison'
             BEGIN SELECT RAISE(ABORT, 'poisoned'); END`)
  side.close()
  const items = store.documents('items')
  t.ok((await store.reserveCredits(reservation('a', { amount: 5 }))).ok)
  t.ok((await store.reserveCredits(reservation('p', { projectId: 'poison', amount: 5 }))).ok)
  const [before, commitA, commitP, after] = await Promise.allSettled([
    items.insertIfAbsent('before', 'o', {}),
    store.commitCredits('a'),
    store.commitCredits('p'),
    items.insertIfAbsent('after', 'o', {}),
  ])
  t.equal(before.status, 'fulfilled', 'the write queued before the failing one commits')
  t.match(commitA, { status: 'rejected', reason: { message: /poisoned/ } }, 'the commits of one turn share their write, and its failure')
  t.match(commitP, { status: 'rejected', reason: { message: /poisoned/ } })
  t.equal(after.status, 'fulfilled', 'the write queued after the failing one commits')
  t.ok(await items.get('before'))
  t.ok(await items.get('after'))
  t.equal((await store.getReservation('a'))!.state, 'pending', 'a commit that did not reach the disk is pending again')
  t.equal((await store.balance('demo', '2026-11', 100)).used, 5, 'and still holds its credits in memory')
  await store.releaseCredits('a')
  t.equal((await store.balance('demo', '2026-11', 100)).used, 0, 'so a release gives them back')

  t.match(await Promise.allSettled([store.reserveCredits(reservation('a', { amount: 7 }))]), [{ status: 'rejected', reason: { code: 'reservation_exists' } }], 'an id held in memory is refused at once')
  await store.closeCredits('a')
  t.ok((await store.reserveCredits(reservation('a', { amount: 7 }))).ok, 'a closed id is free again')
  await store.commitCredits('a')
  const reopened = openSqliteStore({ dataDir, exclusive: false })
  t.teardown(() => reopened.close())
  t.equal((await reopened.balance('demo', '2026-11', 100)).used, 7, 'only what committed is on disk')
})

t.test('group commit: reads see the writes issued before them; close commits what is queued', async (t) => {
  const dataDir = tempDir(t)
  const store = openSqliteStore({ dataDir })
  const reserved = store.reserveCredits(reservation('a', { amount: 4 }))
  t.equal((await store.balance('demo', '2026-11', 100)).used, 4, 'balance runs the queued reserve first')
  t.ok((await reserved).ok)
  const committed = store.commitCredits('a')
  t.equal((await store.getReservation('a'))!.state, 'committed')
  await committed

  const items = store.documents('items')
  const inserted = items.insertIfAbsent('k', 'alice', { n: 1 })
  t.same((await items.get('k'))?.doc, { n: 1 })
  const updated = items.update('k', { n: 2 })
  t.same((await items.listByOwner('alice')).map((d) => d.doc), [{ n: 2 }])
  t.ok((await inserted).created)
  t.equal(await updated, true)

  t.ok((await store.reserveCredits(reservation('b', { amount: 6 }))).ok)
  t.ok((await store.reserveCredits(reservation('c', { amount: 5 }))).ok)
  const queued = store.commitCredits('b')
  const queuedDelete = items.delete('k')
  await store.close()
  await queued
  t.pass('a commit queued before close is committed')
  t.equal(await queuedDelete, true)
  await t.rejects(store.commitCredits('c'), /closed/, 'writes after close are refused')

  const reopened = openSqliteStore({ dataDir })
  t.teardown(() => reopened.close())
  t.equal((await reopened.balance('demo', '2026-11', 100)).used, 10, 'commits survive; the pending reservation c does not')
  t.equal(await reopened.documents('items').get('k'), undefined)
})

t.test('reservation lifecycle: reserve, commit, release, partial refund', async (t) => {
  const store = openStore(t, { clock: () => 1_700_000_000_000 })

  const first = await store.reserveCredits(reservation('a', { amount: 10 }))
  t.ok(first.ok)
  t.same(first.balance, { projectId: 'demo', period: '2026-11', allocation: 100, granted: 0, used: 10, remaining: 90 }, 'a pending reservation counts at once')
  t.same(await store.getReservation('a'), {
    id: 'a', projectId: 'demo', period: '2026-11', apiType: 'MIRROR', amount: 10, charged: 10, state: 'pending', createdAt: 1_700_000_000_000,
  })

  await store.commitCredits('a')
  await store.commitCredits('a')
  t.equal((await store.getReservation('a'))!.state, 'committed')
  t.equal((await store.balance('demo', '2026-11', 100)).used, 10, 'commit is idempotent and does not charge again')

  await store.refundPart('a', 3)
  t.equal((await store.balance('demo', '2026-11', 100)).used, 7, 'a failed batch item is refunded')
  await store.refundPart('a', 50)
  t.equal((await store.balance('demo', '2026-11', 100)).used, 0, 'partial refunds never go below zero')
  t.equal((await store.getReservation('a'))!.charged, 0)

  t.ok((await store.reserveCredits(reservation('b', { amount: 20 }))).ok)
  await store.commitCredits('b')
  await store.releaseCredits('b')
  await store.releaseCredits('b')
  t.equal((await store.balance('demo', '2026-11', 100)).used, 0, 'a committed reservation is refunded exactly once')
  await store.commitCredits('b')
  t.equal((await store.getReservation('b'))!.state, 'released', 'commit after release changes nothing')
  await store.refundPart('b', 5)
  t.equal((await store.balance('demo', '2026-11', 100)).used, 0, 'refundPart after release changes nothing')

  t.ok((await store.reserveCredits(reservation('c', { amount: 30 }))).ok)
  await store.refundPart('c', 10)
  await store.releaseCredits('c')
  t.equal((await store.balance('demo', '2026-11', 100)).used, 0, 'release after a partial refund returns only the rest')

  await store.releaseCredits('unknown')
  await store.commitCredits('unknown')
  await store.refundPart('unknown', 1)
  t.equal((await store.balance('demo', '2026-11', 100)).used, 0, 'unknown ids are no-ops')

  t.ok((await store.reserveCredits(reservation('d', { amount: 5 }))).ok)
  await t.rejects(store.reserveCredits(reservation('d', { amount: 5 })), 'a reused id is refused')
  t.equal((await store.balance('demo', '2026-11', 100)).used, 5, 'and charges nothing')
  await t.rejects(store.reserveCredits(reservation('e', { amount: -1 })), RangeError)
  await t.rejects(store.reserveCredits(reservation('e', { amount: Number.NaN })), RangeError)
  await t.rejects(store.refundPart('d', -1), RangeError)
})

t.test('the allocation comes from each call: a raised allocation applies at once', async (t) => {
  const store = openStore(t)
  t.ok((await store.reserveCredits(reservation('a', { amount: 10, allocation: 10 }))).ok)
  t.notOk((await store.reserveCredits(reservation('b', { amount: 1, allocation: 10 }))).ok)
  t.ok((await store.reserveCredits(reservation('c', { amount: 1, allocation: 20 }))).ok)
  t.notOk((await store.reserveCredits(reservation('d', { amount: 50, allocation: 40 }))).ok, 'a first charge above the allocation is refused')
  t.same(await store.balance('demo', '2026-11', 5), { projectId: 'demo', period: '2026-11', allocation: 5, granted: 0, used: 11, remaining: 0 })
})

t.test('periods roll over: late commits and releases touch the reservation period only', async (t) => {
  let now = Date.UTC(2026, 10, 30, 23, 59, 59, 900)
  const store = openStore(t, { clock: () => now })
  const november = periodKey('month', now)
  t.ok((await store.reserveCredits(reservation('late-commit', { period: november, amount: 40 }))).ok)
  t.ok((await store.reserveCredits(reservation('late-release', { period: november, amount: 60 }))).ok)
  t.notOk((await store.reserveCredits(reservation('no-room', { period: november }))).ok, 'November is full')

  now = Date.UTC(2026, 11, 1, 0, 0, 0, 100)
  const december = periodKey('month', now)
  t.equal(december, '2026-12')
  t.ok((await store.reserveCredits(reservation('fresh', { period: december, amount: 100 }))).ok, 'December starts with its full allocation')
  await store.commitCredits('late-commit')
  await store.releaseCredits('late-release')

  t.equal((await store.balance('demo', november, 100)).used, 40, 'the commit stays charged to November, the release refunds November')
  t.equal((await store.balance('demo', december, 100)).used, 100, 'December is neither refunded nor double-charged')
})

t.test('pending reservations die with the process; recoverPendingReservations releases rows of older versions', async (t) => {
  const dataDir = tempDir(t)
  const before = openSqliteStore({ dataDir })
  for (const id of ['p1', 'c1']) t.ok((await before.reserveCredits(reservation(id, { amount: 10 }))).ok)
  await before.commitCredits('c1')
  await before.close()

  const restarted = openSqliteStore({ dataDir })
  t.equal((await restarted.balance('demo', '2026-11', 100)).used, 10, 'only the committed charge survives a restart')
  t.equal(await restarted.recoverPendingReservations(), 0, 'nothing pending on disk')
  await restarted.close()

  // What a version that wrote reservations to disk left behind: pending rows counted in `used`.
  const legacy = new Database(path.join(dataDir, 'tollgate.db'))
  const insert = legacy.prepare(`INSERT INTO credit_reservations VALUES (?, ?, ?, 'MIRROR', ?, ?, 'pending', 0)`)
  const charge = legacy.prepare(`INSERT INTO credit_balances VALUES (?, ?, ?) ON CONFLICT DO UPDATE SET used = used + excluded.used`)
  for (const [id, projectId, period, amount] of [['p1', 'demo', '2026-11', 10], ['p2', 'demo', '2026-11', 10], ['other', 'other', '2026-10', 7]] as const) {
    insert.run(id, projectId, period, amount, amount)
    charge.run(projectId, period, amount)
  }
  legacy.close()

  const after = openSqliteStore({ dataDir })
  t.teardown(() => after.close())
  t.equal((await after.balance('demo', '2026-11', 100)).used, 30, 'legacy pending rows count until recovery')
  t.ok((await after.reserveCredits(reservation('live', { amount: 1 }))).ok, 'the period is now held in memory')
  t.equal(await after.recoverPendingReservations(), 3)
  t.equal((await after.balance('demo', '2026-11', 100)).used, 11, 'recovery also lowers the balance held in memory')
  await after.releaseCredits('live')
  t.equal((await after.balance('demo', '2026-11', 100)).used, 10, 'only the committed charge stays')
  t.equal((await after.balance('other', '2026-10', 100)).used, 0)
  t.equal((await after.getReservation('p1'))!.state, 'released')
  t.equal((await after.getReservation('live'))!.state, 'released', 'held in memory until closed')
  await after.closeCredits('live')
  t.equal((await after.getReservation('live')), undefined)
  t.equal(await after.recoverPendingReservations(), 0, 'a second recovery finds nothing')
})

t.test('closed reservations are forgotten; settled ones nobody closed are dropped after the retention', async (t) => {
  let now = 1_000_000
  const store = openStore(t, { clock: () => now, reservationRetentionMs: 60_000 })
  for (let i = 0; i < 300; i++) {
    t.ok((await store.reserveCredits(reservation(`r${i}`, { allocation: 1000 }))).ok)
    if (i % 3 === 0) await store.commitCredits(`r${i}`)
    if (i % 3 === 1) await store.releaseCredits(`r${i}`)
  }
  await store.commitCredits('r3')
  await store.closeCredits('r3')
  t.equal((await store.getReservation('r3')), undefined, 'a closed reservation is forgotten at once')
  await store.releaseCredits('r3')
  t.equal((await store.balance('demo', '2026-11', 1000)).used, 200, 'and can no longer be refunded')
  await store.closeCredits('r5')
  t.equal((await store.getReservation('r5')), undefined)
  t.equal((await store.balance('demo', '2026-11', 1000)).used, 199, 'closing a pending reservation releases it')

  await store.sweepReservations()
  t.equal((await store.getReservation('r0'))!.state, 'committed', 'nothing is old enough yet')
  now += 60_001
  await store.sweepReservations()
  t.equal((await store.getReservation('r0')), undefined, 'settled and not closed: dropped after the retention')
  t.equal((await store.getReservation('r1')), undefined)
  t.equal((await store.getReservation('r2'))!.state, 'pending', 'pending reservations are never dropped')
  t.equal((await store.balance('demo', '2026-11', 1000)).used, 199, 'balances are unchanged by the sweep')
})

t.test('rows of older versions: committed ones are refunded and swept after the retention', async (t) => {
  let now = 1_000_000
  const dataDir = tempDir(t)
  openSqliteStore({ dataDir }).close()
  const legacy = new Database(path.join(dataDir, 'tollgate.db'))
  legacy.exec(`INSERT INTO credit_reservations VALUES ('old1', 'demo', '2026-11', 'MIRROR', 3, 3, 'committed', 0),
                                                   ('old2', 'demo', '2026-11', 'MIRROR', 4, 4, 'committed', 0)`)
  legacy.close()
  const store = openStore(t, { dataDir, clock: () => now, reservationRetentionMs: 60_000 })
  t.equal((await store.balance('demo', '2026-11', 100)).used, 7, 'their charges were added by the schema trigger')
  t.ok((await store.reserveCredits(reservation('live', { amount: 1 }))).ok)
  await store.releaseCredits('old1')
  await store.refundPart('old2', 1)
  t.equal((await store.balance('demo', '2026-11', 100)).used, 4, 'their refunds reach the balance in memory (3 committed + 1 pending)')
  t.match(await store.getReservation('old2'), { state: 'committed', charged: 3 })
  now += 60_001
  t.equal(await store.sweepReservations(), 2, 'settled rows are deleted after the retention')
  t.equal((await store.getReservation('old1')), undefined)
})

t.test('usage aggregates per project, apiType and UTC hour; day sums UTC days', async (t) => {
  const store = openStore(t)
  const day1 = Date.UTC(2026, 10, 21)
  const hour = 3_600_000
  const event = (at: number, apiType: string, requests: number, credits: number, errors: number, projectId = 'demo') =>
    store.recordUsage({ projectId, apiType, at, requests, credits, errors })
  await event(day1 + 9 * hour + 5, 'MIRROR', 1, 2, 0)
  await event(day1 + 9 * hour + 59 * 60_000, 'MIRROR', 1, 2, 1)
  await event(day1 + 9 * hour + 10, 'EVENTS', 3, 9, 0)
  await event(day1 + 23 * hour + 1, 'MIRROR', 1, 5, 0)
  await event(day1 + 24 * hour, 'MIRROR', 2, 4, 0)
  await event(day1 + 9 * hour, 'MIRROR', 100, 100, 100, 'other')

  t.same(await store.queryUsage('demo', day1, day1 + 48 * hour, 'hour'), [
    { bucket: '2026-11-21T09:00:00.000Z', apiType: 'EVENTS', requests: 3, credits: 9, errors: 0 },
    { bucket: '2026-11-21T09:00:00.000Z', apiType: 'MIRROR', requests: 2, credits: 4, errors: 1 },
    { bucket: '2026-11-21T23:00:00.000Z', apiType: 'MIRROR', requests: 1, credits: 5, errors: 0 },
    { bucket: '2026-11-22T00:00:00.000Z', apiType: 'MIRROR', requests: 2, credits: 4, errors: 0 },
  ])
  t.same(await store.queryUsage('demo', day1 + 12 * hour, day1 + 30 * hour, 'day'), [
    { bucket: '2026-11-21T00:00:00.000Z', apiType: 'EVENTS', requests: 3, credits: 9, errors: 0 },
    { bucket: '2026-11-21T00:00:00.000Z', apiType: 'MIRROR', requests: 3, credits: 9, errors: 1 },
    { bucket: '2026-11-22T00:00:00.000Z', apiType: 'MIRROR', requests: 2, credits: 4, errors: 0 },
  ], 'days overlapping the range are returned whole')
  t.same(await store.queryUsage('demo', day1 + 10 * hour, day1 + 23 * hour, 'hour'), [], 'hours outside the range are left out')
  t.same(await store.queryUsage('nobody', 0, day1 * 2, 'day'), [])
  await t.rejects(store.recordUsage({ projectId: 'demo', apiType: 'X', at: day1, requests: Number.NaN, credits: 0, errors: 0 }), RangeError)
})

t.test('usage and documents survive close and reopen', async (t) => {
  const dataDir = tempDir(t)
  const first = openSqliteStore({ dataDir, usageFlushMs: 60_000 })
  await first.recordUsage({ projectId: 'demo', apiType: 'MIRROR', at: Date.UTC(2026, 0, 1, 5), requests: 1, credits: 3, errors: 0 })
  await first.documents('settlements').insertIfAbsent('tx1', 'payer', { amount: '5' })
  await first.close()
  await first.close()
  const second = openSqliteStore({ dataDir })
  t.teardown(() => second.close())
  t.same(await second.queryUsage('demo', Date.UTC(2026, 0, 1), Date.UTC(2026, 0, 2), 'day'), [
    { bucket: '2026-01-01T00:00:00.000Z', apiType: 'MIRROR', requests: 1, credits: 3, errors: 0 },
  ], 'buffered usage is written on close')
  t.same((await second.documents('settlements').get('tx1'))!.doc, { amount: '5' })
})

t.test('documents: atomic insertIfAbsent, update, listByOwner oldest first, delete', async (t) => {
  let now = 5_000
  const store = openStore(t, { clock: () => now })
  const items = store.documents('items')

  const racers = await Promise.all(Array.from({ length: 20 }, (_, i) => items.insertIfAbsent('k1', 'alice', { racer: i })))
  t.equal(racers.filter((r) => r.created).length, 1, 'concurrent duplicate inserts make one record')
  t.ok(racers.every((r) => (r.stored.doc as { racer: number }).racer === 0), 'every caller sees the winner')
  t.same(racers[0]!.stored, { key: 'k1', owner: 'alice', doc: { racer: 0 }, createdAt: 5_000, updatedAt: 5_000 })

  now = 6_000
  await items.insertIfAbsent('k2', 'alice', { n: 2 })
  await items.insertIfAbsent('k0', 'alice', { n: 0 })
  await items.insertIfAbsent('b1', 'bob', { n: 1 })
  t.same((await store.documents('other').get('k1')), undefined, 'collections are separate')

  now = 7_000
  t.equal(await items.update('k1', { racer: 'updated' }), true)
  t.equal(await items.update('missing', {}), false)
  t.same(await items.get('k1'), { key: 'k1', owner: 'alice', doc: { racer: 'updated' }, createdAt: 5_000, updatedAt: 7_000 })

  t.same((await items.listByOwner('alice')).map((d) => d.key), ['k1', 'k2', 'k0'], 'oldest first, ties in insertion order')
  t.same((await items.listByOwner('alice', 2)).map((d) => d.key), ['k1', 'k2'])
  t.same(await items.listByOwner('carol'), [])

  t.equal(await items.delete('k2'), true)
  t.equal(await items.delete('k2'), false)
  t.equal(await items.get('k2'), undefined)
  await t.rejects(items.insertIfAbsent('bad', 'alice', undefined), TypeError)
})

t.test('takeToken delegates to the in-process buckets on the store clock', async (t) => {
  let now = 0
  const store = openStore(t, { clock: () => now })
  t.match(await store.takeToken('k', 2, 1), { allowed: true, limit: 2, remaining: 1 })
  t.match(await store.takeToken('k', 2, 1), { allowed: true, remaining: 0 })
  t.match(await store.takeToken('k', 2, 1), { allowed: false, remaining: 0, retryAfterSeconds: 1, resetSeconds: 2 })
  now += 1000
  t.match(await store.takeToken('k', 2, 1), { allowed: true })
})

t.test('one process owns the database: a second store on the same data dir is refused', async (t) => {
  const dataDir = tempDir(t)
  const owner = openSqliteStore({ dataDir })
  t.teardown(() => owner.close())
  t.throws(() => openSqliteStore({ dataDir, lockTimeoutMs: 50 }), /locked by another process/)
  await owner.close()
  const next = openSqliteStore({ dataDir, lockTimeoutMs: 50 })
  t.teardown(() => next.close())
  t.equal(next.engine, 'sqlite', 'the data dir is free once the owner closed')
})

t.test('exclusive: false lets a second connection read the live database', async (t) => {
  const dataDir = tempDir(t)
  const writer = openSqliteStore({ dataDir, exclusive: false })
  t.teardown(() => writer.close())
  t.ok((await writer.reserveCredits(reservation('a', { amount: 4 }))).ok)
  await writer.commitCredits('a')
  const reader = openSqliteStore({ dataDir, exclusive: false })
  t.teardown(() => reader.close())
  t.equal((await reader.balance('demo', '2026-11', 100)).used, 4)
})

t.test('durability: every commit a killed process reported is on disk', async (t) => {
  const dataDir = tempDir(t)
  const script = path.join(repoRoot, 'test/core/store/fixtures/reserve-commit-loop.ts')
  const workers = 8
  const child = spawn(process.execPath, ['--import', 'tsx', script, dataDir, String(workers)], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'inherit'] })
  const printed: string[] = []
  let partial = ''
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)))
  child.stdout.setEncoding('utf8')
  child.stdout.on('data', (chunk: string) => {
    const lines = (partial + chunk).split('\n')
    partial = lines.pop()!
    printed.push(...lines)
    if (printed.length >= 3000 && !child.killed) child.kill('SIGKILL')
  })
  t.equal(await exited, 'SIGKILL', 'the child was killed mid-loop')
  t.ok(printed.length >= 3000)

  const store = openSqliteStore({ dataDir })
  t.teardown(() => store.close())
  t.equal(await store.recoverPendingReservations(), 0)
  const { used } = await store.balance('crash', '2026-11', 1e9)
  t.ok(used >= printed.length, `every printed commit is on disk: ledger ${used} >= printed ${printed.length}`)
  // Each loop may have had one more commit on disk whose line it had not printed yet.
  t.ok(used <= printed.length + workers, `and nothing else: ledger ${used} <= printed ${printed.length} + ${workers} loops`)
})

t.test('measurement (printed, not asserted): reserve + commit pairs, 1 and 50 in flight', async (t) => {
  // bench/store-bench.ts compares with a git revision; this only shows the order of magnitude.
  for (const inFlight of [1, 50]) {
    const store = openStore(t)
    const pairs = 10_000
    let next = 0
    const cpuBefore = process.cpuUsage()
    const started = process.hrtime.bigint()
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (next < pairs) {
          const id = `bench-${next++}`
          await store.reserveCredits(reservation(id, { allocation: 1e12 }))
          await store.commitCredits(id)
        }
      }),
    )
    const micros = Number(process.hrtime.bigint() - started) / 1000 / pairs
    const cpu = process.cpuUsage(cpuBefore)
    const cpuMicros = (cpu.user + cpu.system) / pairs
    const { transactions, operations } = store.writeStats()
    t.comment(
      `reserve+commit, ${inFlight} in flight: ${micros.toFixed(1)} µs wall, ${cpuMicros.toFixed(1)} µs CPU per pair, ` +
        `${(operations / transactions).toFixed(1)} writes per transaction`,
    )
  }
  t.pass('measured')
})

t.test('ledger of a database written before the per-hour charge lines: one earlier_charges entry keeps the sum exact', async (t) => {
  const dataDir = tempDir(t)
  const first = openSqliteStore({ dataDir, clock: () => Date.UTC(2026, 10, 21, 9, 30) })
  for (const [id, amount] of [['old-1', 4], ['old-2', 6]] as const) {
    t.ok((await first.reserveCredits(reservation(id, { amount }))).ok)
    await first.commitCredits(id)
  }
  await first.close()
  // What an older version left: the period's sum, no charge lines.
  const db = new Database(path.join(dataDir, 'tollgate.db'))
  db.prepare('DELETE FROM credit_charges').run()
  db.close()
  const store = openSqliteStore({ dataDir, clock: () => Date.UTC(2026, 10, 21, 10, 5) })
  t.teardown(() => store.close())
  t.ok((await store.reserveCredits(reservation('new-1', { amount: 3, apiType: 'PRIVNET_RPC' }))).ok)
  await store.commitCredits('new-1')
  t.ok((await store.reserveCredits(reservation('new-2', { amount: 2 }))).ok, 'one still pending')
  await store.grantCredits({ id: 'topup:1', projectId: 'demo', period: '2026-11', allocation: 100, amount: 7, reason: 'top_up', actor: 'ops' })
  const { balance, entries } = await store.creditLedger('demo', '2026-11', 100)
  t.same(balance, { projectId: 'demo', period: '2026-11', allocation: 100, granted: 7, used: 15, remaining: 92 })
  t.same(entries, [
    { kind: 'allocation', amount: 100 },
    { kind: 'grant', id: 'topup:1', reason: 'top_up', actor: 'ops', at: '2026-11-21T10:05:00.000Z', amount: 7 },
    { kind: 'charge', apiType: 'PRIVNET_RPC', hour: '2026-11-21T10:00:00.000Z', amount: -3, reserved: -3 },
    { kind: 'earlier_charges', amount: -10 },
    { kind: 'pending', amount: -2 },
  ])
  t.equal(entries.reduce((sum, e) => sum + e.amount, 0), balance.remaining)
})
