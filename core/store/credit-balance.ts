/**
 * What both store engines share about balances and grants: the arithmetic of a balance and the
 * checks of a grant, so the two engines cannot disagree on either.
 */
import type { CreditBalance, CreditCarry, CreditGrant, CreditLedgerEntry } from './types.ts'

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

/**
 * What a schedule change moves out of a period: its granted credits not yet spent. The allocation
 * is spent first (it would have refilled anyway), so that is `allocation + granted - used` capped at
 * `granted`, never below 0. `used` includes pending reservations: they may still be charged there.
 */
export function carryAmount(allocation: number, granted: number, used: number): number {
  return Math.max(0, Math.min(granted, allocation + granted - used))
}

/** Throws TypeError / RangeError naming the field when a carry is malformed. */
export function checkCarry(carry: CreditCarry): void {
  const { id, projectId, from, to, fromAllocation, toAllocation, actor } = carry
  if (typeof id !== 'string' || id === '' || id.length > 256) throw new TypeError('carry id must be a string of 1 to 256 characters')
  if (typeof projectId !== 'string' || projectId === '') throw new TypeError('carry projectId must be a non-empty string')
  if (typeof from !== 'string' || from === '') throw new TypeError('carry from must be a non-empty period key')
  if (typeof to !== 'string' || to === '') throw new TypeError('carry to must be a non-empty period key')
  if (from === to) throw new RangeError(`carry from and to must differ, both are ${from}`)
  if (!Number.isFinite(fromAllocation)) throw new RangeError(`fromAllocation must be a finite number, got ${fromAllocation}`)
  if (!Number.isFinite(toAllocation)) throw new RangeError(`toAllocation must be a finite number, got ${toAllocation}`)
  if (typeof actor !== 'string' || actor.length > 128 || !TEXT.test(actor)) throw new TypeError('carry actor must be 1 to 128 printable ASCII characters')
}

/** The sum of a ledger's amounts (equals `allocation + granted - used`). */
export function ledgerSum(entries: readonly CreditLedgerEntry[]): number {
  let sum = 0
  for (const entry of entries) sum += entry.amount
  return sum
}
