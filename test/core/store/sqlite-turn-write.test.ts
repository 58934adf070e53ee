import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import Database from 'better-sqlite3'
import { WriteBatcher } from '../../../core/store/sqlite-batch.ts'
import { openSqliteStore } from '../../../core/store/sqlite.ts'
import type { CreditReservation } from '../../../core/store/types.ts'

function tempDir(t: { teardown(fn: () => unknown): void }): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tollgate-turn-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

function reservation(id: string, fields: Partial<CreditReservation> = {}): CreditReservation {
  return { id, projectId: 'demo', period: '2026-11', allocation: 100, amount: 1, apiType: 'MIRROR', ...fields }
}

t.test('an operation alone in its batch says at run time whether it is one statement', async (t) => {
  const db = new Database(':memory:')
  t.teardown(() => db.close())
  const writes = new WriteBatcher(db)
  const seen: boolean[] = []
  await writes.enqueue(() => seen.push(db.inTransaction), () => false)
  await writes.enqueue(() => seen.push(db.inTransaction), () => true)
  await writes.enqueue(() => seen.push(db.inTransaction), true)
  await writes.enqueue(() => seen.push(db.inTransaction))
  t.same(seen, [true, false, false, true], 'false: in a transaction; true: alone, outside one')
  // Beside another operation, a batch is always one transaction, whatever the operations say.
  const both = [writes.enqueue(() => db.inTransaction, () => true), writes.enqueue(() => db.inTransaction, true)]
  t.same(await Promise.all(both), [true, true])
})

t.test("a turn's charge lines move the period's used on disk, and the file keeps no trigger of it", async (t) => {
  const dir = tempDir(t)
  const store = openSqliteStore({ dataDir: dir })
  let open = true
  t.teardown(() => (open ? store.close() : undefined))
  const start = store.writeStats().transactions
  // One line in its turn: one statement, outside a transaction.
  t.equal((await store.reserveCredits(reservation('a', { amount: 5 }))).ok, true)
  await store.commitCredits('a')
  // Two lines (two API types) and two periods in one turn: one transaction for all of them.
  for (const [id, fields] of [['b', { amount: 3, apiType: 'PRIVNET_RPC' }], ['c', { amount: 2 }], ['d', { amount: 7, period: '2026-12' }]] as const) {
    t.equal((await store.reserveCredits(reservation(id, fields))).ok, true)
  }
  await Promise.all([store.commitCredits('b'), store.commitCredits('c'), store.commitCredits('d')])
  // A refund of a committed charge moves the line and the period back.
  await store.releaseCredits('c')
  t.equal(store.writeStats().transactions - start, 3, 'three turns, one write each')
  t.equal((await store.balance('demo', '2026-11', 100)).used, 8)
  t.equal((await store.balance('demo', '2026-12', 100)).used, 7)
  await store.close()
  open = false

  const db = new Database(path.join(dir, 'tollgate.db'), { readonly: true })
  t.teardown(() => db.close())
  const used = db.prepare('SELECT period, used FROM credit_balances ORDER BY period').all()
  const lines = db.prepare('SELECT period, sum(amount) AS used FROM credit_charges GROUP BY period ORDER BY period').all()
  t.same(used, [{ period: '2026-11', used: 8 }, { period: '2026-12', used: 7 }], 'used on disk, as committed minus refunded')
  t.same(lines, used, 'the sum of the charge lines equals used')
  const triggers = db.prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name").pluck().all()
  // An older version opening this file moves used itself: a trigger kept in the file would count its charges twice.
  t.same(triggers, ['credit_reservation_committed'], 'only the trigger older versions created')
})
