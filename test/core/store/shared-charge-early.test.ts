/**
 * Early charges of the shared engine (`chargeEarly`, core/store/shared/credit-leases.ts) on real
 * PostgreSQL + Redis: a reservation admitted from a lease is drawn at once, so its charge is durable
 * while the request still runs and `commit` has nothing left to send; the store's contract holds
 * otherwise (a release, a close or a partial refund of a pending reservation undoes what was drawn),
 * and a draw the reaper made impossible still refuses the charge.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { openSharedStore, type SharedStore } from '../../../core/store/shared/index.ts'
import type { CreditReservation } from '../../../core/store/types.ts'
import { freshPrefix, freshSchema, needServers, PG_URL, REDIS_URL, sql } from '../../helpers/shared-servers.ts'

let sequence = 0
const reservation = (projectId: string, fields: Partial<CreditReservation> = {}): CreditReservation => ({
  id: `early-${++sequence}-${randomBytes(3).toString('hex')}`,
  projectId,
  period: '2026-11',
  allocation: 1000,
  amount: 3,
  apiType: 'PRIVNET_RPC',
  ...fields,
})

t.test('early charges', async (t) => {
  if (!(await needServers(t))) return
  const schema = freshSchema(t)
  const keyPrefix = freshPrefix(t)
  const open = async (chargeEarly: boolean): Promise<SharedStore> => {
    const store = await openSharedStore({ postgres: PG_URL, redis: REDIS_URL, schema, keyPrefix, poolSize: 4, chargeEarly, onBackgroundError: () => {} })
    t.teardown(() => store.close())
    return store
  }
  const [early, late] = await Promise.all([open(true), open(false)])
  const rowOf = async (id: string) => (await sql<{ state: string; charged: number }>(schema, `SELECT state, charged::int FROM credit_holds WHERE id = $1`, [id]))[0]
  const used = async (projectId: string) => (await late.balance(projectId, '2026-11', 1000)).used

  t.test('the charge is written while the request runs; commit sends nothing more', async (t) => {
    const warm = reservation('run')
    t.ok((await early.reserveCredits(warm)).ok)
    await early.commitCredits(warm.id)
    await early.idle()
    const r = reservation('run')
    t.ok((await early.reserveCredits(r)).ok)
    await early.idle()
    t.same(await rowOf(r.id), { state: 'committed', charged: 3 }, 'drawn before any commit')
    t.equal(await used('run'), 6, 'counted once by every instance')
    t.equal((await early.balance('run', '2026-11', 1000)).used, 6, 'and by its own, which holds it')
    const before = early.writeStats()
    await early.commitCredits(r.id)
    t.equal(early.writeStats().ops - before.ops, 0, 'the commit waits for the draw and sends nothing')
    await early.closeCredits(r.id)
    t.equal(await used('run'), 6)

    // Without early charges the same reservation writes nothing until its commit.
    const plain = reservation('run')
    t.ok((await late.reserveCredits(plain)).ok)
    await late.idle()
    t.equal(await rowOf(plain.id), undefined, 'chargeEarly: false draws at commit')
    await late.commitCredits(plain.id)
    t.same(await rowOf(plain.id), { state: 'committed', charged: 3 })
    await late.closeCredits(plain.id)
  })

  t.test('a pending reservation stays pending: release, close and partial refund undo the draw', async (t) => {
    const released = reservation('undo')
    const closed = reservation('undo')
    const refunded = reservation('undo')
    for (const r of [released, closed, refunded]) t.ok((await early.reserveCredits(r)).ok)
    await early.idle()
    t.equal(await used('undo'), 9, 'all three drawn')
    await early.releaseCredits(released.id)
    await early.closeCredits(closed.id)
    await early.refundPart(refunded.id, 2)
    await early.commitCredits(refunded.id)
    await early.closeCredits(refunded.id)
    await early.idle()
    t.equal(await used('undo'), 1, 'only what the third one kept')
    t.equal((await rowOf(released.id))?.state, 'released', 'released in PostgreSQL')
    t.equal((await rowOf(closed.id))?.state, 'released', 'closing a pending reservation releases it')
    t.same(await rowOf(refunded.id), { state: 'committed', charged: 1 })
    await early.commitCredits(released.id)
    await early.idle()
    t.equal(await used('undo'), 1, 'a released reservation cannot be committed afterwards')
  })

  t.test('a draw on a lease the reaper released is refused at commit; nothing is charged', async (t) => {
    const c = await open(true)
    const first = reservation('reaped')
    t.ok((await c.reserveCredits(first)).ok)
    await c.commitCredits(first.id)
    await c.closeCredits(first.id)
    await c.idle()
    await sql(schema, `BEGIN; DELETE FROM tollgate_instances WHERE id = '${c.instanceId}'; SELECT tollgate_reap(60000); COMMIT`)
    const held = reservation('reaped')
    t.ok((await c.reserveCredits(held)).ok, 'admitted from the lease it still believes in')
    await t.rejects(c.commitCredits(held.id), { status: 503, code: 'store_unavailable' }, 'its charge is refused, not silently kept')
    await c.releaseCredits(held.id).catch(() => {})
    await c.idle()
    t.equal(await used('reaped'), 3, 'only the first charge')
  })
})
