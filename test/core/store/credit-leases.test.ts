/**
 * Credit leases of the shared engine (core/store/shared/credit-leases.ts) on real PostgreSQL + Redis:
 * a reservation from a lease needs no round trip, yet refusals stay exact across instances (an idle
 * instance gives its leased credits back; a busy one gives them back when recalled), and a lease the
 * reaper released cannot be charged from.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { openSharedStore, type SharedStore } from '../../../core/store/shared/index.ts'
import type { CreditReservation } from '../../../core/store/types.ts'
import { freshPrefix, freshSchema, needServers, PG_URL, REDIS_URL, sql } from '../../helpers/shared-servers.ts'
import { startTcpRelay } from '../../helpers/tcp-relay.ts'

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
let sequence = 0
const reservation = (projectId: string, fields: Partial<CreditReservation> = {}): CreditReservation => ({
  id: `lease-test-${++sequence}-${randomBytes(3).toString('hex')}`,
  projectId,
  period: '2026-11',
  allocation: 100,
  amount: 1,
  apiType: 'PRIVNET_RPC',
  ...fields,
})

/** Reserves and commits one credit at a time until refused; returns how many were charged. */
async function spendUntilRefused(store: SharedStore, projectId: string, pauseMs = 0): Promise<number> {
  let charged = 0
  for (;;) {
    const r = reservation(projectId)
    if (!(await store.reserveCredits(r)).ok) return charged
    await store.commitCredits(r.id)
    await store.closeCredits(r.id)
    charged++
    if (pauseMs > 0) await sleep(pauseMs)
  }
}

t.test('credit leases', async (t) => {
  if (!(await needServers(t))) return
  const schema = freshSchema(t)
  const keyPrefix = freshPrefix(t)
  const open = async (): Promise<SharedStore> => {
    const store = await openSharedStore({ postgres: PG_URL, redis: REDIS_URL, schema, keyPrefix, poolSize: 4, onBackgroundError: () => {} })
    t.teardown(() => store.close())
    return store
  }
  const [a, b] = await Promise.all([open(), open()])

  t.test('a reservation from a lease makes no round trip; its charge makes one', async (t) => {
    const first = reservation('rt', { allocation: 1_000_000 })
    t.ok((await a.reserveCredits(first)).ok)
    await a.idle()
    const before = a.writeStats()
    const many = Array.from({ length: 20 }, () => reservation('rt', { allocation: 1_000_000 }))
    for (const r of many) t.ok((await a.reserveCredits(r)).ok)
    t.equal(a.writeStats().batches - before.batches, 0, '20 reservations from the lease: no batch')
    await Promise.all(many.map((r) => a.commitCredits(r.id)))
    const after = a.writeStats()
    t.equal(after.batches - before.batches, 1, '20 charges of one turn: one batch')
    t.equal(after.ops - before.ops, 20)
    const rows = await sql<{ n: number }>(schema, `SELECT count(*)::int AS n FROM credit_holds WHERE project_id = 'rt' AND state = 'committed'`)
    t.equal(rows[0]!.n, 20, 'one committed ledger row per charge, durable before commit resolved')
    await a.releaseCredits(first.id)
  })

  t.test('draws are written as text: ids and API types that JSON must escape reach the ledger as given', async (t) => {
    // The draw op is a text template (credit-lease-records.ts drawOpText), not JSON.stringify of an
    // object: each of these would break the batch, or land under another id, if it were not escaped.
    const ids = ['quote"d', 'back\\slash', 'line\nbreak\ttab', 'u2028\u2028x', 'emoji-\u{1F600}', 'ctl-\u0001-\u001f', '{"o":"draw"}']
    const held = ids.map((id, i) => reservation('esc', { id, apiType: i % 2 === 0 ? 'PRIVNET_RPC' : 'type "b"\\', amount: i + 1 }))
    for (const r of held) t.ok((await a.reserveCredits(r)).ok)
    await Promise.all(held.map((r) => a.commitCredits(r.id)))
    const rows = await sql<{ id: string; api_type: string; charged: number }>(schema, `SELECT id, api_type, charged::int FROM credit_holds WHERE project_id = 'esc' AND state = 'committed' ORDER BY charged`)
    t.same(rows.map((row) => [row.id, row.api_type, row.charged]), held.map((r) => [r.id, r.apiType, r.amount]), 'each charge under its own id, API type and amount')
    t.equal((await a.balance('esc', '2026-11', 100)).used, 28, 'the balance counts all seven')
  })

  t.test('store.quick answers from the lease at once, and holds nothing when it cannot', async (t) => {
    const first = reservation('quick', { amount: 3 })
    t.equal(a.quick.tryReserveCredits(first), undefined, 'no lease yet: left to reserveCredits')
    t.ok((await a.reserveCredits(first)).ok, 'the same id is still free: nothing was held under it')
    const second = reservation('quick', { amount: 2 })
    t.equal(a.quick.tryReserveCredits(second), 95, 'from the lease: the credits left after it, synchronously')
    t.throws(() => a.quick.tryReserveCredits(second), { code: 'reservation_exists' }, 'an id already held throws, as reserveCredits rejects')
    t.equal(a.quick.tryReserveCredits(reservation('quick', { amount: 1000 })), undefined, 'more than the lease holds: left to reserveCredits')
    await a.commitCredits(second.id)
    a.quick.closeCredits(first.id)
    a.quick.closeCredits(second.id)
    await a.idle()
    t.equal((await b.balance('quick', '2026-11', 100)).used, 2, 'the charge stands; the closed pending reservation was released')
    t.equal((await a.balance('quick', '2026-11', 100)).used, 2, 'and this instance holds nothing more for either')
  })

  t.test('an idle instance gives its leased credits back: the other spends all of them', async (t) => {
    const r = reservation('idle')
    t.ok((await a.reserveCredits(r)).ok)
    await a.commitCredits(r.id)
    const leased = await sql<{ charged: number }>(schema, `SELECT charged::int FROM credit_holds WHERE project_id = 'idle' AND api_type = 'lease' AND state = 'pending'`)
    t.ok(leased.length === 1 && leased[0]!.charged > 0, `instance a holds a lease (${leased[0]?.charged} credits left in it)`)
    const started = Date.now()
    t.equal(await spendUntilRefused(b, 'idle'), 99, 'b spends the 99 credits left, those a leased included')
    t.ok(Date.now() - started < 5000, `within ${Date.now() - started} ms`)
    t.equal((await a.balance('idle', '2026-11', 100)).used, 100)
    t.equal((await a.creditLedger('idle', '2026-11', 100)).balance.remaining, 0)
  })

  t.test('two busy instances on 100 credits: exactly 100 charged, refusals only at the end', async (t) => {
    const [fromA, fromB] = await Promise.all([spendUntilRefused(a, 'busy', 2), spendUntilRefused(b, 'busy', 2)])
    t.equal(fromA + fromB, 100, `a charged ${fromA}, b charged ${fromB}`)
    t.ok(fromA > 0 && fromB > 0, 'both instances were served')
    t.equal((await b.balance('busy', '2026-11', 100)).used, 100)
    t.notOk((await a.reserveCredits(reservation('busy'))).ok, 'nothing left afterwards on a')
    t.notOk((await b.reserveCredits(reservation('busy'))).ok, 'nor on b')
  })

  t.test('a lease the reaper released cannot be charged from; the next reservation takes a new lease', async (t) => {
    const c = await open()
    const held = reservation('reaped')
    t.ok((await c.reserveCredits(held)).ok)
    await c.idle()
    // c counts as dead (as after a long cut-off) and the reaper runs, in one transaction so that c's
    // own heartbeat cannot bring it back in between.
    t.match(c.instanceId, /^[\w.-]+$/)
    await sql(schema, `BEGIN; DELETE FROM tollgate_instances WHERE id = '${c.instanceId}'; SELECT tollgate_reap(60000); COMMIT`)
    const leases = await sql<{ state: string }>(schema, `SELECT state FROM credit_holds WHERE owner = $1 AND api_type = 'lease'`, [c.instanceId])
    t.same(leases.map((l) => l.state), ['released'], 'the reaper released the lease')
    await t.rejects(c.commitCredits(held.id), { status: 503, code: 'store_unavailable' }, 'its charge is refused, not silently kept')
    t.equal((await b.balance('reaped', '2026-11', 100)).used, 0, 'nothing charged')
    const next = reservation('reaped')
    t.ok((await c.reserveCredits(next)).ok)
    await c.commitCredits(next.id)
    t.equal((await b.balance('reaped', '2026-11', 100)).used, 1, 'a new lease serves')
  })

  t.test('with PostgreSQL unreachable, leases stop serving; nothing is charged that failed', async (t) => {
    const target = new URL(PG_URL)
    const relay = await startTcpRelay(target.hostname, Number(target.port || 5432))
    t.teardown(() => relay.close())
    const d = await openSharedStore({ postgres: relay.url(PG_URL), redis: REDIS_URL, schema, keyPrefix, poolSize: 2, onBackgroundError: () => {} })
    t.teardown(() => d.close())
    const first = reservation('down', { allocation: 1000 })
    t.ok((await d.reserveCredits(first)).ok)
    await d.commitCredits(first.id)
    await relay.sever()
    // The lease still has credits, but its charge cannot be written: 503, and the hold is given back.
    const cut = reservation('down', { allocation: 1000 })
    const served = await d.reserveCredits(cut).then((r) => r.ok, (error: { status?: number }) => error.status)
    if (served === true) {
      await t.rejects(d.commitCredits(cut.id), { status: 503, code: 'store_unavailable' }, 'the charge fails with 503')
      // Rejected too while PostgreSQL is down; kept and re-sent every tick until confirmed.
      await d.releaseCredits(cut.id).catch(() => {})
    } else t.equal(served, 503)
    await t.rejects(d.reserveCredits(reservation('down', { allocation: 1000 })), { status: 503, code: 'store_unavailable' }, 'once a batch failed, no reservation comes from a lease')
    await relay.restore()
    let resumed = false
    for (let attempt = 0; attempt < 50 && !resumed; attempt++) {
      const r = reservation('down', { allocation: 1000 })
      try {
        resumed = (await d.reserveCredits(r)).ok
        await d.commitCredits(r.id)
      } catch {
        await sleep(100)
      }
    }
    t.ok(resumed, 'service resumes by itself')
    await d.idle()
    // The release of a charge whose outcome was unknown is re-sent until PostgreSQL confirms it.
    for (let attempt = 0; attempt < 50 && d.creditCounts().unconfirmedReleases > 0; attempt++) await sleep(100)
    t.equal((await b.balance('down', '2026-11', 1000)).used, 2, 'the first charge and the one after the outage; the failed one is not charged')
  })
})
