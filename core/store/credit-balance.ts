/**
 * What both store engines share about balances and grants: the arithmetic of a balance and the
 * checks of a grant, so the two engines cannot disagree on either.
 */
import type { CreditBalance, CreditGrant, CreditLedgerEntry } from './types.ts'

/** A period's balance: `remaining = allocation + granted - used`, never below 0. */
export function toBalance(projectId: string, period: string, allocation: number, used: number, granted: number): CreditBalance {
  return { projectId, period, allocation, granted, used, remaining: Math.max(0, allocation + granted - used) }
}

const TEXT = /^[\x20-\x7e]+$/

/** Throws TypeError / RangeError naming the field when a grant is malformed. */
export function checkGrant(grant: CreditGrant): void {
  const { id, projectId, period, allocation, amount, reason, actor } = grant
  if (typeof id !== 'string' || id === '' || id.length > 256) throw new TypeError('grant id must be a string of 1 to 256 characters')
  if (typeof projectId !== 'string' || projectId === '') throw new TypeError('grant projectId must be a non-empty string')
  if (typeof period !== 'string' || period === '') throw new TypeError('grant period must be a non-empty string')
  if (!Number.isFinite(allocation)) throw new RangeError(`allocation must be a finite number, got ${allocation}`)
  if (!Number.isSafeInteger(amount) || amount <= 0) throw new RangeError(`grant amount must be an integer > 0, got ${amount}`)
  if (typeof reason !== 'string' || reason.length > 64 || !TEXT.test(reason)) throw new TypeError('grant reason must be 1 to 64 printable ASCII characters')
  if (typeof actor !== 'string' || actor.length > 128 || !TEXT.test(actor)) throw new TypeError('grant actor must be 1 to 128 printable ASCII characters')
}

/** The sum of a ledger's amounts (equals `allocation + granted - used`). */
export function ledgerSum(entries: readonly CreditLedgerEntry[]): number {
  let sum = 0
  for (const entry of entries) sum += entry.amount
  return sum
}
