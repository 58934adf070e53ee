/**
 * What a changed refill schedule (or period) does to the money: a change of schedule never drops
 * grants or charges. When the project's current period gets another key (`2026-11` becomes
 * `2026-10-31/P1M`), the credits granted in the old period and not yet spent (top-ups, purchases)
 * carry into the new one ({@link Store.carryCredits}); the charges stay in the period they were made
 * in. Both periods' ledgers list the carried amount as an entry of its own (kind `carry`).
 *
 * Called by the admin routes that change a project's schedule (PATCH /admin/projects/:id, POST
 * /admin/projects/:id/reset) after the new schedule is in force on this instance, so requests here
 * no longer reserve in the old period while its credits move.
 */
import { randomUUID } from 'node:crypto'
import type { Project } from './projects.ts'
import { scheduleBounds } from '../store/periods.ts'
import type { CreditCarried, Store } from '../store/types.ts'

/**
 * Carries the unspent grants of `before`'s current period into `after`'s, when the two differ.
 * Returns what moved, or undefined when the period did not change (or the project is gone).
 *
 * @example
 * ```ts
 * const carried = await carryOnScheduleChange(store, before, after, Date.now(), 'alice@ops')
 * // { created: true, amount: 477, from: {...2026-11}, to: {...2026-10-31/P1M} }
 * ```
 */
export async function carryOnScheduleChange(
  store: Pick<Store, 'carryCredits'>,
  before: Project | undefined,
  after: Project | undefined,
  now: number,
  actor: string,
  id = `carry:${after?.id}:${randomUUID()}`,
): Promise<CreditCarried | undefined> {
  if (before === undefined || after === undefined || before.id !== after.id) return undefined
  const from = scheduleBounds(before.credits, now).key
  const to = scheduleBounds(after.credits, now).key
  if (from === to) return undefined
  return store.carryCredits({
    id,
    projectId: after.id,
    from,
    fromAllocation: before.credits.allocation,
    to,
    toAllocation: after.credits.allocation,
    // The audit actor as the settings change recorded it, in the form a carry row takes (never a 500).
    actor: actor.replace(/[^\x20-\x7e]/g, '?').slice(0, 128) || 'admin',
  })
}

/** What an admin answer shows of a carry. */
export function carryView(carried: CreditCarried | undefined): Record<string, unknown> {
  if (carried === undefined) return {}
  return { carried: { from: carried.from.period, to: carried.to.period, amount: carried.amount } }
}

/**
 * The carries a config reload owes: for every project whose current period gets another key under
 * the new gateway.yaml, its unspent grants move, as an admin change would move them. The carry id
 * names the config (its hash) and both periods, so instances that reload the same file carry once.
 *
 * @example
 * ```ts
 * await carryOnReload(store, previous.projects.all(), next.projects, config.hash, Date.now())
 * ```
 */
export async function carryOnReload(
  store: Pick<Store, 'carryCredits'>,
  before: readonly Project[],
  after: { byId(id: string): Project | undefined },
  configHash: string,
  now: number,
): Promise<CreditCarried[]> {
  const carried: CreditCarried[] = []
  for (const old of before) {
    const next = after.byId(old.id)
    if (next === undefined) continue
    const from = scheduleBounds(old.credits, now).key
    const to = scheduleBounds(next.credits, now).key
    if (from === to) continue
    const done = await carryOnScheduleChange(store, old, next, now, 'config-reload', `carry:${old.id}:config:${configHash.slice(0, 16)}:${from}>${to}`)
    if (done) carried.push(done)
  }
  return carried
}
