/**
 * What the SQLite credit ledger (sqlite-credits.ts, which explains the design) holds in memory: a
 * period's balance, a reservation from reserve until close, and the sums of one event-loop turn that
 * its group commit writes.
 */
import type { ReservationState } from './sqlite-credit-disk.ts'

/** One (project, period) balance held in memory. */
export interface PeriodBalance {
  readonly projectId: string
  readonly period: string
  /** Committed charges (as on disk, after the queued writes) plus pending reservations. */
  used: number
  /** Grants of the period (as on disk, plus grants queued in this process). */
  granted: number
  /** Reservations in memory that point at this balance; it is never dropped while any does. */
  held: number
  /** Touched since the last eviction pass. */
  touched: boolean
}

/** A reservation this process holds, from reserve until close. */
export interface HeldReservation {
  readonly id: string
  readonly projectId: string
  readonly period: string
  readonly apiType: string
  readonly amount: number
  readonly createdAt: number
  charged: number
  state: ReservationState
  readonly balance: PeriodBalance
  /** The last disk write of this reservation (its commit, then maybe a refund), once one is queued. */
  written?: Promise<void>
}

/**
 * The sums of one event-loop turn: what each period's charge lines (and with them its `used`) move
 * by, and the commits that wait for them. Its write step reads `lines` when it runs, so charges
 * added until then ride along; once it ran, the turn's sums are sealed and the next charge opens a
 * new turn.
 */
export class TurnSums {
  /** What each period's charge lines move by: API type and hour of the reservation (`apiType \n hourMs`). */
  readonly lines = new Map<PeriodBalance, Map<string, number>>()
  /**
   * Per charge line, what commits of this turn had reserved beyond their charge (given back before
   * the commit: two-phase metering, a batch's refund). Empty for flat prices: nothing more is written.
   */
  readonly released = new Map<PeriodBalance, Map<string, number>>()
  /** Reservations committed in this turn: they fall back to pending if the write fails. */
  readonly commits: HeldReservation[] = []
  written!: Promise<void>

  add(held: HeldReservation, delta: number): void {
    const balance = held.balance
    let lines = this.lines.get(balance)
    if (lines === undefined) {
      lines = new Map()
      this.lines.set(balance, lines)
    }
    const line = lineOf(held.apiType, held.createdAt)
    lines.set(line, (lines.get(line) ?? 0) + delta)
  }

  /** How many statements the write step runs at most: one per charge line and per released line. */
  statements(): number {
    let n = 0
    for (const lines of this.lines.values()) n += lines.size
    for (const lines of this.released.values()) n += lines.size
    return n
  }

  /** Books what a committed reservation released before its commit, on its charge line. */
  addReleased(held: HeldReservation, amount: number): void {
    let lines = this.released.get(held.balance)
    if (lines === undefined) {
      lines = new Map()
      this.released.set(held.balance, lines)
    }
    const line = lineOf(held.apiType, held.createdAt)
    lines.set(line, (lines.get(line) ?? 0) + amount)
  }
}


/** Takes `amount` off a balance's `used`, never below zero. */
export function uncharge(balance: PeriodBalance, amount: number): void {
  balance.used = Math.max(0, balance.used - amount)
}

/** The last line key built: a turn's charges nearly all share one API type and hour, so the string is built once an hour. */
let lastLine = { apiType: '', hour: -1, key: '' }

/** `apiType \n hourMs`: the charge line of a reservation made at `createdAt`. */
function lineOf(apiType: string, createdAt: number): string {
  const hour = hourOf(createdAt)
  if (hour !== lastLine.hour || apiType !== lastLine.apiType) lastLine = { apiType, hour, key: `${apiType}\n${hour}` }
  return lastLine.key
}

/** Start of the UTC hour of `epochMs`: the charge line a reservation is booked on. */
function hourOf(epochMs: number): number {
  return Math.floor(epochMs / 3_600_000) * 3_600_000
}
