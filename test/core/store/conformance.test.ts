/**
 * One store conformance suite, two engines: every case runs against the embedded SQLite engine (temp
 * dir) and against the shared engine (real PostgreSQL + Redis, fresh schema and key prefix), with
 * credit leases (the default) and without them, and with charges committed asynchronously. Without
 * the servers the shared half is skipped with the reason (failed under CI).
 */
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { openSqliteStore } from '../../../core/store/sqlite.ts'
import { openSharedStore, type CreditCommit } from '../../../core/store/shared/index.ts'
import type { CreditGrant, CreditReservation, Store } from '../../../core/store/types.ts'
import { ledgerSum } from '../../../core/store/credit-balance.ts'
import { freshPrefix, freshSchema, needServers, PG_URL, REDIS_URL } from '../../helpers/shared-servers.ts'

interface Teardowns {
  teardown(fn: () => unknown): void
}

interface Engine {
  name: string
  /** Opens a store; a second call in the same test opens another instance on the same state. */
  opener(t: Teardowns): (clock?: () => number) => Promise<Store>
  available(t: Parameters<typeof needServers>[0]): Promise<boolean>
  /** Whether two stores can be open on the same state at once. */
  shared: boolean
  /** Shared engine: whether reservations come from credit leases. */
  leases?: boolean
}

const engines: Engine[] = [
  {
    name: 'sqlite',
    shared: false,
    available: async () => true,
    opener(t) {
      const dir = mkdtempSync(join(tmpdir(), 'tollgate-conformance-'))
      t.teardown(() => rmSync(dir, { recursive: true, force: true }))
      return async (clock) => {
        const store = openSqliteStore({ dataDir: dir, clock })
        t.teardown(() => store.close())
        return store
      }
    },
  },
  sharedEngine('shared', 100),
  // Leases off: one PostgreSQL reservation per request, the path a lease falls back to.
  sharedEngine('shared without leases', 0),
  // Charges answered before PostgreSQL's WAL flush (store.creditCommit: async).
  sharedEngine('shared, async credit commit', 100, 'async'),
]

let sequence = 0
function reservation(fields: Partial<CreditReservation> = {}): CreditReservation {
  return { id: `r${++sequence}-${randomBytes(3).toString('hex')}`, projectId: 'demo', period: '2026-11', allocation: 100, amount: 1, apiType: 'MIRROR', ...fields }
}

function grant(fields: Partial<CreditGrant> = {}): CreditGrant {
  return { id: `topup:${++sequence}-${randomBytes(3).toString('hex')}`, projectId: 'demo', period: '2026-11', allocation: 100, amount: 10, reason: 'top_up', actor: 'alice', ...fields }
}

function sharedEngine(name: string, leaseCredits: number, creditCommit: CreditCommit = 'durable'): Engine {
  return {
    name,
    shared: true,
    leases: leaseCredits > 0,
    available: (t) => needServers(t),
    opener(t) {
      const schema = freshSchema(t)
      const keyPrefix = freshPrefix(t)
      return async (clock) => {
        const store = await openSharedStore({ postgres: PG_URL, redis: REDIS_URL, schema, keyPrefix, clock, poolSize: 4, leaseCredits, creditCommit })
        t.teardown(() => store.close())
        return store
      }
    },
  }
}

for (const engine of engines) {
  t.test(engine.name, async (t) => {
    if (!(await engine.available(t))) return

    t.test('no overspend: 1,000 concurrent reservations against 100 credits', async (t) => {
      const store = await engine.opener(t)()
      const results = await Promise.all(Array.from({ length: 1000 }, () => store.reserveCredits(reservation({ projectId: 'p-over' }))))
      t.equal(results.filter((r) => r.ok).length, 100)
      const balance = await store.balance('p-over', '2026-11', 100)
      t.same(balance, { projectId: 'p-over', period: '2026-11', allocation: 100, granted: 0, used: 100, remaining: 0 })
    })

    t.test('lifecycle: reserve, commit, release, partial refund, close', async (t) => {
      const store = await engine.opener(t)()
      const a = reservation({ projectId: 'life', amount: 10 })
      const b = reservation({ projectId: 'life', amount: 20 })
      const c = reservation({ projectId: 'life', amount: 30 })
      t.ok((await store.reserveCredits(a)).ok)
      const second = await store.reserveCredits(b)
      t.ok(second.ok)
      t.equal(second.balance.used, 30, 'the balance returned counts pending reservations')
      t.ok((await store.reserveCredits(c)).ok)
      await store.commitCredits(a.id)
      await store.commitCredits(a.id) // idempotent
      await store.releaseCredits(b.id)
      await store.releaseCredits(b.id) // idempotent
      t.equal((await store.balance('life', '2026-11', 100)).used, 40, 'committed 10 + pending 30')
      await store.refundPart(c.id, 5)
      await store.commitCredits(c.id)
      t.equal((await store.balance('life', '2026-11', 100)).used, 35, 'a partial refund of a pending reservation lowers its charge')
      await store.refundPart(a.id, 4)
      t.equal((await store.balance('life', '2026-11', 100)).used, 31, 'a partial refund of a committed charge is given back')
      await store.refundPart(a.id, 100)
      t.equal((await store.balance('life', '2026-11', 100)).used, 25, 'a refund never gives back more than was charged')
      await store.releaseCredits(c.id)
      t.equal((await store.balance('life', '2026-11', 100)).used, 0, 'releasing a committed charge refunds it')
      await store.commitCredits(c.id)
      t.equal((await store.balance('life', '2026-11', 100)).used, 0, 'a released reservation cannot be committed')

      const d = reservation({ projectId: 'life', amount: 7 })
      t.ok((await store.reserveCredits(d)).ok)
      await store.closeCredits(d.id)
      t.equal((await store.balance('life', '2026-11', 100)).used, 0, 'closing a pending reservation releases it')
      const e = reservation({ projectId: 'life', amount: 9 })
      t.ok((await store.reserveCredits(e)).ok)
      await store.commitCredits(e.id)
      await store.closeCredits(e.id)
      t.equal((await store.balance('life', '2026-11', 100)).used, 9, 'closing a committed one keeps the charge')
      await store.commitCredits('never-reserved')
      await store.releaseCredits('never-reserved')
      t.pass('settling an unknown reservation is a no-op')
    })

    t.test('a reservation id in use is refused; bad amounts are refused', async (t) => {
      const store = await engine.opener(t)()
      const r = reservation({ projectId: 'dup' })
      t.ok((await store.reserveCredits(r)).ok)
      await t.rejects(store.reserveCredits(r), { code: 'reservation_exists' })
      await t.rejects(store.reserveCredits(reservation({ amount: -1 })), RangeError)
      await t.rejects(store.reserveCredits(reservation({ amount: Number.NaN })), RangeError)
      await t.rejects(store.refundPart(r.id, -2), RangeError)
    })

    t.test('grants: a grant lets through what the allocation refused; same id grants once', async (t) => {
      const open = engine.opener(t)
      const store = await open()
      t.ok((await store.reserveCredits(reservation({ projectId: 'g', allocation: 10, amount: 10 }))).ok)
      const refused = await store.reserveCredits(reservation({ projectId: 'g', allocation: 10, amount: 5 }))
      t.notOk(refused.ok, 'the allocation is used up')
      const g = grant({ projectId: 'g', allocation: 10, amount: 7 })
      const first = await store.grantCredits(g)
      t.same(first, { created: true, balance: { projectId: 'g', period: '2026-11', allocation: 10, granted: 7, used: 10, remaining: 7 } })
      const again = await store.grantCredits({ ...g, amount: 1000 })
      t.same(again, { created: false, balance: first.balance }, 'the same id again grants nothing, whatever its amount')
      const passed = await store.reserveCredits(reservation({ projectId: 'g', allocation: 10, amount: 5 }))
      t.ok(passed.ok, 'the reservation refused before passes now')
      t.same(passed.balance, { projectId: 'g', period: '2026-11', allocation: 10, granted: 7, used: 15, remaining: 2 })
      t.notOk((await store.reserveCredits(reservation({ projectId: 'g', allocation: 10, amount: 3 }))).ok, 'no more than allocation + granted')
      t.same(await store.balance('g', '2026-12', 10), { projectId: 'g', period: '2026-12', allocation: 10, granted: 0, used: 0, remaining: 10 }, 'a grant counts in its own period only')
      // A grant to a period nobody reserved in yet creates its balance; more than the allocation then passes.
      await store.grantCredits(grant({ projectId: 'fresh', allocation: 0, amount: 4 }))
      t.ok((await store.reserveCredits(reservation({ projectId: 'fresh', allocation: 0, amount: 4 }))).ok, 'a project with allocation 0 runs on grants')
      t.notOk((await store.reserveCredits(reservation({ projectId: 'fresh', allocation: 0, amount: 1 }))).ok)

      await t.rejects(store.grantCredits(grant({ amount: 0 })), RangeError)
      await t.rejects(store.grantCredits(grant({ amount: 1.5 })), RangeError)
      await t.rejects(store.grantCredits(grant({ id: '' })), TypeError)
      await t.rejects(store.grantCredits(grant({ reason: '' })), TypeError)
    })

    t.test('grants: 20 concurrent grants of one id grant once; durable across a reopen', async (t) => {
      const open = engine.opener(t)
      const store = await open()
      const g = grant({ projectId: 'race', amount: 25 })
      const results = await Promise.all(Array.from({ length: 20 }, () => store.grantCredits(g)))
      t.equal(results.filter((r) => r.created).length, 1, 'exactly one grant is created')
      t.equal((await store.balance('race', '2026-11', 100)).granted, 25)
      if (engine.shared) {
        const other = await open()
        const g2 = grant({ projectId: 'race', amount: 5 })
        const both = await Promise.all([store.grantCredits(g2), other.grantCredits(g2), other.grantCredits(g2), store.grantCredits(g2)])
        t.equal(both.filter((r) => r.created).length, 1, 'two instances granting the same id at once: one grant')
        t.equal((await other.balance('race', '2026-11', 100)).granted, 30)
      } else {
        await store.close()
        const reopened = await open()
        t.equal((await reopened.balance('race', '2026-11', 100)).granted, 25, 'the grant is on disk')
        t.equal((await reopened.grantCredits(g)).created, false, 'and its id still known')
      }
    })

    t.test('ledger: the entries add up exactly to the balance after mixed traffic, refunds and grants', async (t) => {
      const store = await engine.opener(t)()
      const allocation = 50
      const r = (amount: number, apiType = 'MIRROR') => reservation({ projectId: 'led', allocation, amount, apiType })
      const check = async (label: string) => {
        const { balance, entries } = await store.creditLedger('led', '2026-11', allocation)
        t.equal(ledgerSum(entries), balance.allocation + balance.granted - balance.used, `${label}: entries sum to allocation + granted - used`)
        t.same(balance, await store.balance('led', '2026-11', allocation), `${label}: the ledger's balance is the balance`)
        return { balance, entries }
      }
      const a = r(10)
      const b = r(7, 'PRIVNET_RPC')
      const c = r(5, 'PRIVNET_RPC')
      const d = r(3)
      for (const x of [a, b, c, d]) t.ok((await store.reserveCredits(x)).ok)
      await store.commitCredits(a.id)
      await store.commitCredits(b.id)
      await store.refundPart(b.id, 2)
      await store.releaseCredits(c.id)
      await check('mixed, with one pending')
      await store.grantCredits(grant({ projectId: 'led', allocation, amount: 20, reason: 'x402', actor: '0xpayer' }))
      await store.grantCredits(grant({ projectId: 'led', allocation, amount: 5 }))
      await store.commitCredits(d.id)
      const e = r(40)
      t.ok((await store.reserveCredits(e)).ok, 'the grants admit a reservation past the allocation')
      await store.commitCredits(e.id)
      await store.refundPart(a.id, 10)
      const { balance, entries } = await check('after grants and refunds')
      t.same(balance, { projectId: 'led', period: '2026-11', allocation, granted: 25, used: 48, remaining: 27 })
      t.same(entries.map((x) => x.kind), ['allocation', 'grant', 'grant', 'charge', 'charge'])
      const charges = entries.filter((x) => x.kind === 'charge')
      t.same(charges.map((x) => [x.kind === 'charge' && x.apiType, x.amount]).sort(), [['MIRROR', -43], ['PRIVNET_RPC', -5]], 'charges per API type (and hour)')
      const grants = entries.filter((x) => x.kind === 'grant')
      t.match(grants[0], { kind: 'grant', reason: 'x402', actor: '0xpayer', amount: 20 })
      t.ok(grants.every((x) => x.kind === 'grant' && !Number.isNaN(Date.parse(x.at))), 'each grant has its time')
      t.same((await store.creditLedger('nobody', '2026-11', 9)).entries, [{ kind: 'allocation', amount: 9 }], 'an untouched period is its allocation')
    })

    t.test('ledger: two-phase metering shows the estimate (reserved) beside the actual (charged)', async (t) => {
      const store = await engine.opener(t)()
      const r = (amount: number) => reservation({ projectId: 'two-phase', allocation: 100, amount, apiType: 'PRIVNET_RPC' })
      const estimated = r(10)
      const flat = r(4)
      for (const x of [estimated, flat]) t.ok((await store.reserveCredits(x)).ok)
      // The meter's settlement of a measured cost of 3: the rest goes back, then the commit.
      await store.refundPart(estimated.id, 7)
      await store.commitCredits(estimated.id)
      await store.commitCredits(flat.id)
      const { balance, entries } = await store.creditLedger('two-phase', '2026-11', 100)
      t.equal(balance.used, 7, 'the balance took the actuals: 3 + 4')
      const charges = entries.filter((e) => e.kind === 'charge')
      t.equal(charges.reduce((sum, e) => sum + e.amount, 0), -7)
      if (engine.leases) t.ok(charges.every((e) => e.kind === 'charge' && e.reserved === undefined), 'a leasing store leaves reserved out')
      else t.equal(charges.reduce((sum, e) => sum + (e.kind === 'charge' ? e.reserved ?? 0 : 0), 0), -14, 'reserved: the estimates, 10 + 4')
      t.equal(ledgerSum(entries), balance.allocation + balance.granted - balance.used, 'reserved is not part of the sum')
    })

    t.test('the allocation comes from each call; periods are separate balances', async (t) => {
      const store = await engine.opener(t)()
      t.ok((await store.reserveCredits(reservation({ projectId: 'alloc', allocation: 5, amount: 5 }))).ok)
      const denied = await store.reserveCredits(reservation({ projectId: 'alloc', allocation: 5, amount: 1 }))
      t.notOk(denied.ok)
      t.same(denied.balance, { projectId: 'alloc', period: '2026-11', allocation: 5, granted: 0, used: 5, remaining: 0 })
      t.ok((await store.reserveCredits(reservation({ projectId: 'alloc', allocation: 6, amount: 1 }))).ok, 'a raised allocation applies at once')
      t.ok((await store.reserveCredits(reservation({ projectId: 'alloc', period: '2026-12', allocation: 5, amount: 5 }))).ok, 'a new period starts empty')
      t.notOk((await store.reserveCredits(reservation({ projectId: 'alloc', period: '2027-01', allocation: 5, amount: 6 }))).ok, 'more than the allocation never passes')
    })

    t.test('usage aggregates per project, apiType and UTC hour; day sums UTC days', async (t) => {
      const store = await engine.opener(t)()
      const at = Date.UTC(2026, 10, 21, 9, 30)
      await store.recordUsage({ projectId: 'u', apiType: 'MIRROR', at, requests: 1, credits: 2, errors: 0 })
      await store.recordUsage({ projectId: 'u', apiType: 'MIRROR', at: at + 60_000, requests: 1, credits: 3, errors: 1 })
      await store.recordUsage({ projectId: 'u', apiType: 'PRIVNET_RPC', at, requests: 4, credits: 4, errors: 0 })
      await store.recordUsage({ projectId: 'u', apiType: 'MIRROR', at: at + 3_600_000, requests: 1, credits: 1, errors: 0 })
      await store.recordUsage({ projectId: 'other', apiType: 'MIRROR', at, requests: 9, credits: 9, errors: 9 })
      const hours = await store.queryUsage('u', Date.UTC(2026, 10, 21), Date.UTC(2026, 10, 22), 'hour')
      t.same(hours, [
        { bucket: '2026-11-21T09:00:00.000Z', apiType: 'MIRROR', requests: 2, credits: 5, errors: 1 },
        { bucket: '2026-11-21T09:00:00.000Z', apiType: 'PRIVNET_RPC', requests: 4, credits: 4, errors: 0 },
        { bucket: '2026-11-21T10:00:00.000Z', apiType: 'MIRROR', requests: 1, credits: 1, errors: 0 },
      ])
      const days = await store.queryUsage('u', Date.UTC(2026, 10, 21, 12), Date.UTC(2026, 10, 21, 13), 'day')
      t.same(days, [
        { bucket: '2026-11-21T00:00:00.000Z', apiType: 'MIRROR', requests: 3, credits: 6, errors: 1 },
        { bucket: '2026-11-21T00:00:00.000Z', apiType: 'PRIVNET_RPC', requests: 4, credits: 4, errors: 0 },
      ])
      await t.rejects(store.recordUsage({ projectId: 'u', apiType: 'MIRROR', at: Number.NaN, requests: 1, credits: 0, errors: 0 }), RangeError)
    })

    t.test('usage per route and status class: per hour or day, with latency sum and maximum', async (t) => {
      const store = await engine.opener(t)()
      const at = Date.UTC(2026, 10, 21, 9, 30)
      const event = { projectId: 'r', apiType: 'MIRROR', requests: 1, credits: 1, errors: 0 }
      await store.recordUsage({ ...event, at, route: 'blocks', status: 200, latencyMs: 10 })
      await store.recordUsage({ ...event, at: at + 1_000, route: 'blocks', status: 204, latencyMs: 30 })
      await store.recordUsage({ ...event, at, route: 'blocks', status: 404, latencyMs: 2, credits: 0, errors: 1 })
      await store.recordUsage({ ...event, at, route: 'tx', status: 502, latencyMs: 5, credits: 0, errors: 1 })
      await store.recordUsage({ ...event, at: at + 3_600_000, route: 'blocks', status: 200, latencyMs: 50 })
      // Without a route (an older caller) it counts in the per-API-type usage only.
      await store.recordUsage({ ...event, at })
      await store.recordUsage({ ...event, projectId: 'other', at, route: 'blocks', status: 200, latencyMs: 1 })
      const hours = await store.queryUsageDetail('r', Date.UTC(2026, 10, 21), Date.UTC(2026, 10, 22), 'hour')
      t.same(hours, [
        { bucket: '2026-11-21T09:00:00.000Z', apiType: 'MIRROR', route: 'blocks', statusClass: '2xx', requests: 2, credits: 2, errors: 0, latencyMsSum: 40, latencyMsMax: 30 },
        { bucket: '2026-11-21T09:00:00.000Z', apiType: 'MIRROR', route: 'blocks', statusClass: '4xx', requests: 1, credits: 0, errors: 1, latencyMsSum: 2, latencyMsMax: 2 },
        { bucket: '2026-11-21T09:00:00.000Z', apiType: 'MIRROR', route: 'tx', statusClass: '5xx', requests: 1, credits: 0, errors: 1, latencyMsSum: 5, latencyMsMax: 5 },
        { bucket: '2026-11-21T10:00:00.000Z', apiType: 'MIRROR', route: 'blocks', statusClass: '2xx', requests: 1, credits: 1, errors: 0, latencyMsSum: 50, latencyMsMax: 50 },
      ])
      for (const row of hours) t.type(row.requests, 'number', 'sums are numbers on every engine')
      const days = await store.queryUsageDetail('r', Date.UTC(2026, 10, 21, 12), Date.UTC(2026, 10, 21, 13), 'day')
      t.same(days.map((row) => [row.route, row.statusClass, row.requests, row.latencyMsSum, row.latencyMsMax]), [
        ['blocks', '2xx', 3, 90, 50],
        ['blocks', '4xx', 1, 2, 2],
        ['tx', '5xx', 1, 5, 5],
      ])
      const perType = await store.queryUsage('r', Date.UTC(2026, 10, 21), Date.UTC(2026, 10, 22), 'hour')
      t.same(perType.map((row) => row.requests), [5, 1], 'the per-API-type usage still counts every event')
      t.same(await store.queryUsageDetail('r', Date.UTC(2026, 10, 22), Date.UTC(2026, 10, 23), 'hour'), [], 'nothing outside the range')
    })

    t.test('documents: atomic insertIfAbsent, update, listByOwner oldest first, delete', async (t) => {
      let now = 1_000
      const store = await engine.opener(t)(() => now)
      const docs = store.documents('settlements')
      const racing = await Promise.all(Array.from({ length: 20 }, (_, i) => docs.insertIfAbsent('tx-1', 'payer-a', { n: i })))
      t.equal(racing.filter((r) => r.created).length, 1, 'exactly one of 20 concurrent inserts creates the document')
      const winner = racing.find((r) => r.created)!.stored
      for (const r of racing) t.same(r.stored, winner, 'every caller sees the stored document')
      now = 2_000
      await docs.insertIfAbsent('tx-2', 'payer-a', { n: 'second' })
      await docs.insertIfAbsent('tx-3', 'payer-b', { n: 'other' })
      t.equal(await docs.update('tx-2', { n: 'changed' }), true)
      t.equal(await docs.update('missing', { n: 1 }), false)
      const got = await docs.get<{ n: string }>('tx-2')
      t.same(got, { key: 'tx-2', owner: 'payer-a', doc: { n: 'changed' }, createdAt: 2_000, updatedAt: 2_000 })
      t.same((await docs.listByOwner('payer-a')).map((d) => d.key), ['tx-1', 'tx-2'])
      t.same((await docs.listByOwner('payer-a', 1)).map((d) => d.key), ['tx-1'])
      t.equal(await docs.get('nope'), undefined)
      t.equal(await store.documents('other-collection').get('tx-1'), undefined, 'collections are separate')
      t.equal(await docs.delete('tx-1'), true)
      t.equal(await docs.delete('tx-1'), false)
      t.same((await docs.listByOwner('payer-a')).map((d) => d.key), ['tx-2'])
      await t.rejects(docs.insertIfAbsent('bad', 'x', undefined), TypeError)
      await t.rejects(docs.listByOwner('payer-a', -1), RangeError)
    })

    t.test('documents: revisions and compare-and-set, one winner among racing writers', async (t) => {
      let now = 5_000
      const store = await engine.opener(t)(() => now)
      const docs = store.documents('cas')
      await docs.insertIfAbsent('w', 'p', { n: 0 })
      const first = await docs.getWithRevision<{ n: number }>('w')
      t.same(first, { stored: { key: 'w', owner: 'p', doc: { n: 0 }, createdAt: 5_000, updatedAt: 5_000 }, revision: 1 })
      now = 6_000
      t.equal(await docs.compareAndSet('w', 1, { n: 1 }), 2, 'the expected revision wins and gets the next one')
      t.equal(await docs.compareAndSet('w', 1, { n: 99 }), undefined, 'a stale revision changes nothing')
      t.same(await docs.getWithRevision('w'), { stored: { key: 'w', owner: 'p', doc: { n: 1 }, createdAt: 5_000, updatedAt: 6_000 }, revision: 2 })
      t.equal(await docs.update('w', { n: 2 }), true)
      t.equal((await docs.getWithRevision('w'))?.revision, 3, 'a plain update is a new revision too')
      const racing = await Promise.all(Array.from({ length: 10 }, (_, i) => docs.compareAndSet('w', 3, { n: 10 + i })))
      t.equal(racing.filter((r) => r === 4).length, 1, 'exactly one of 10 concurrent writers of revision 3 wins')
      t.equal(racing.filter((r) => r === undefined).length, 9)
      const winner = racing.findIndex((r) => r === 4)
      t.same((await docs.get('w'))?.doc, { n: 10 + winner }, "the winner's document is stored")
      t.equal(await docs.compareAndSet('absent', 1, { n: 1 }), undefined, 'an absent key is not created')
      t.equal(await docs.getWithRevision('absent'), undefined)
      await t.rejects(docs.compareAndSet('w', 0, { n: 1 }), RangeError)
    })

    t.test('token buckets: the burst passes, the next is refused with a retry time', async (t) => {
      const store = await engine.opener(t)()
      const key = `bucket-${randomBytes(3).toString('hex')}`
      const decisions = []
      for (let i = 0; i < 4; i++) decisions.push(await store.takeToken(key, 3, 0.01))
      t.same(decisions.map((d) => d.allowed), [true, true, true, false])
      t.same(decisions.map((d) => d.remaining), [2, 1, 0, 0])
      t.equal(decisions[3]!.limit, 3)
      t.ok(decisions[3]!.retryAfterSeconds >= 99, `retry after about 100 s at 0.01/s (got ${decisions[3]!.retryAfterSeconds})`)
      t.ok(decisions[3]!.resetSeconds >= 299, 'reset is the time to a full bucket')
      t.ok((await store.takeToken(`${key}-other`, 3, 0.01)).allowed, 'buckets are per key')
      t.notOk((await store.takeToken(`${key}-big`, 3, 1, 4)).allowed, 'a cost above the capacity never passes')
      await t.rejects(store.takeToken(key, 0, 1), RangeError)
    })

    t.test('health reports the store as usable', async (t) => {
      const store = await engine.opener(t)()
      const health = await store.health()
      t.equal(health.ok, true)
      t.ok(Object.values(health.components).every((state) => state === 'ok'), JSON.stringify(health.components))
    })

    if (engine.shared) {
      t.test('two instances share one balance, one usage log, one set of documents and buckets', async (t) => {
        const open = engine.opener(t)
        const [a, b] = await Promise.all([open(), open()])
        const asked = Array.from({ length: 1000 }, (_, i) => ({ on: i % 2 ? a : b, reservation: reservation({ projectId: 'two' }) }))
        const results = await Promise.all(asked.map(({ on, reservation }) => on.reserveCredits(reservation)))
        t.equal(results.filter((r) => r.ok).length, 100, 'exactly 100 of 1,000 across both instances')
        // An instance's requests in flight are its own until charged (with leases they never reach
        // PostgreSQL before); once charged, every instance reads them.
        await Promise.all(asked.filter((_, i) => results[i]!.ok).map(({ on, reservation }) => on.commitCredits(reservation.id)))
        t.equal((await b.balance('two', '2026-11', 100)).used, 100)
        t.equal((await a.balance('two', '2026-11', 100)).used, 100)
        const key = `shared-${randomBytes(3).toString('hex')}`
        t.ok((await a.takeToken(key, 1, 0.01)).allowed)
        t.notOk((await b.takeToken(key, 1, 0.01)).allowed, 'a bucket drained on one instance is drained on the other')
        await a.documents('d').insertIfAbsent('k', 'o', { from: 'a' })
        t.same((await b.documents('d').get('k'))?.doc, { from: 'a' })
        t.equal(await a.documents('d').compareAndSet('k', 1, { from: 'a again' }), 2)
        t.equal(await b.documents('d').compareAndSet('k', 1, { from: 'b, stale' }), undefined, 'the other instance sees the new revision')
        t.equal(await b.documents('d').compareAndSet('k', 2, { from: 'b' }), 3)
        await a.recordUsage({ projectId: 'two', apiType: 'MIRROR', at: Date.UTC(2026, 10, 1), requests: 1, credits: 1, errors: 0 })
        await b.recordUsage({ projectId: 'two', apiType: 'MIRROR', at: Date.UTC(2026, 10, 1), requests: 2, credits: 2, errors: 0 })
        await a.queryUsage('two', 0, Date.UTC(2027, 0, 1), 'day')
        const rows = await b.queryUsage('two', 0, Date.UTC(2027, 0, 1), 'day')
        t.same(rows, [{ bucket: '2026-11-01T00:00:00.000Z', apiType: 'MIRROR', requests: 3, credits: 3, errors: 0 }])
      })

      t.test('rate decisions of one turn share one Redis call and stay exact, in order, across instances', async (t) => {
        const open = engine.opener(t)
        const [a, b] = (await Promise.all([open(), open()])) as Awaited<ReturnType<typeof openSharedStore>>[]
        const key = `turn-${randomBytes(3).toString('hex')}`
        const before = a.rateStats()
        // 30 + 30 decisions on one bucket of 10 from two instances in the same turn; each instance's
        // decisions of the turn go out as one script call, and Redis orders the two calls.
        const [fromA, fromB] = await Promise.all([
          Promise.all(Array.from({ length: 30 }, () => a.takeToken(key, 10, 0.001))),
          Promise.all(Array.from({ length: 30 }, () => b.takeToken(key, 10, 0.001))),
        ])
        const after = a.rateStats()
        t.equal(after.calls - before.calls, 1, '30 decisions of one turn: one script call')
        t.equal(after.takes - before.takes, 30)
        t.equal([...fromA, ...fromB].filter((d) => d.allowed).length, 10, 'exactly the capacity passes across both instances')
        const remaining = [...fromA, ...fromB].filter((d) => d.allowed).map((d) => d.remaining).sort((x, y) => y - x)
        t.same(remaining, [9, 8, 7, 6, 5, 4, 3, 2, 1, 0], 'each allowed decision saw the one before it')
        // Several buckets, costs and capacities mixed in one call decide as one call each would.
        const k = (name: string) => `${key}-${name}`
        const mixed = await Promise.all([
          a.takeToken(k('x'), 3, 0.001, 2),
          a.takeToken(k('y'), 2, 0.001),
          a.takeToken(k('x'), 3, 0.001, 2),
          a.takeToken(k('x'), 3, 0.001, 1),
          a.takeToken(k('y'), 2, 0.001, 5),
          a.takeToken(k('y'), 2, 0.001),
        ])
        t.same(
          mixed.map((d) => [d.allowed, d.remaining]),
          [
            [true, 1],
            [true, 1],
            [false, 1],
            [true, 0],
            [false, 1],
            [true, 0],
          ],
        )
        t.ok(mixed[2]!.retryAfterSeconds >= 999, `a refused take waits for its missing token (${mixed[2]!.retryAfterSeconds} s)`)
        // What the call left in Redis is what the next call (a later turn, the other instance) sees.
        t.notOk((await b.takeToken(k('x'), 3, 0.001)).allowed, 'bucket x was left empty')
        t.notOk((await b.takeToken(k('y'), 2, 0.001)).allowed, 'bucket y was left empty')
        t.ok((await b.takeToken(k('z'), 2, 0.001)).allowed, 'a new bucket starts full')
      })

      t.test('group commit: the writes of one turn share one round trip', async (t) => {
        const store = (await engine.opener(t)()) as Awaited<ReturnType<typeof openSharedStore>>
        const held = Array.from({ length: 200 }, () => reservation({ projectId: 'gc', allocation: 100_000 }))
        const before = store.writeStats()
        await Promise.all(held.map((r) => store.reserveCredits(r)))
        const reserved = store.writeStats()
        if (engine.leases) {
          t.ok(reserved.ops - before.ops <= 2, `200 reservations from one lease: ${reserved.ops - before.ops} top-ups, no write per reservation`)
        } else {
          t.equal(reserved.ops - before.ops, 200)
          t.equal(reserved.batches - before.batches, 1, '200 reservations issued in one turn: one transaction')
        }
        await store.idle()
        const idle = store.writeStats()
        await Promise.all(held.map((r) => store.commitCredits(r.id)))
        const after = store.writeStats()
        t.equal(after.ops - idle.ops, 200, 'one write per charge')
        t.equal(after.batches - idle.batches, 1, '200 charges of one turn: one transaction')
        t.equal((await store.balance('gc', '2026-11', 100_000)).used, 200)
      })
    }
  })
}
