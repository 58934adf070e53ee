/**
 * The ledger listing of the SQLite engine (`Store.creditLedger`): a period's allocation, grants,
 * carries and charge lines from disk, per API type and UTC hour, plus what is pending, so that the
 * entries add up exactly to `allocation + granted - used` (core/store/README.md, "The ledger listing").
 */
import type { CreditDisk } from './sqlite-credit-disk.ts'
import type { CreditLedgerEntry } from './types.ts'

/** The entries of a period; `pending` is what its reservations in flight hold (kept in memory, not on disk). */
export function ledgerEntries(disk: CreditDisk, projectId: string, period: string, allocation: number, pending: number): CreditLedgerEntry[] {
  const entries: CreditLedgerEntry[] = [{ kind: 'allocation', amount: allocation }]
  for (const g of disk.grants(projectId, period)) {
    entries.push({ kind: 'grant', id: g.id, reason: g.reason, actor: g.actor, at: new Date(g.createdAt).toISOString(), amount: g.amount })
  }
  for (const c of disk.carries(projectId, period)) {
    entries.push({ kind: 'carry', id: c.id, from: c.from, to: c.to, actor: c.actor, at: new Date(c.createdAt).toISOString(), amount: c.to === period ? c.amount : -c.amount })
  }
  let lines = 0
  for (const line of disk.charges(projectId, period)) {
    lines += line.amount
    entries.push({ kind: 'charge', apiType: line.apiType, hour: new Date(line.hourMs).toISOString(), amount: -line.amount, reserved: -(line.amount + line.released) })
  }
  // Charges of databases written before the per-hour lines existed are only in the period's sum.
  const earlier = disk.used(projectId, period) - lines
  if (earlier !== 0) entries.push({ kind: 'earlier_charges', amount: -earlier })
  if (pending !== 0) entries.push({ kind: 'pending', amount: -pending })
  return entries
}
