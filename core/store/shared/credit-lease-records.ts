/**
 * What credit-leases.ts keeps per lease and per request it admitted from one, the answers of the
 * `lease` and `draw` ops, and the ledger as a leasing store shows it.
 */
import type { CreditLedger } from '../types.ts'

export interface Lease {
  readonly key: string
  /** Its `credit_holds` row. */
  readonly id: string
  readonly projectId: string
  readonly period: string
  /** Credits of the lease no request holds. */
  free: number
  /** Credits held by requests in flight: reserved, not yet drawn or given back. */
  held: number
  /** The period's `used + pending` without leased credits, and `granted`, as PostgreSQL last said. */
  seenUsed: number
  seenGranted: number
  /** Credits drawn (charged) from this lease since PostgreSQL last said `seenUsed`. */
  drawnSinceSeen: number
  /** Draws committed since the last top-up or shrink was sent (each folds the lease's draws). */
  unfolded: number
  /** Reserved from since the last idle check. */
  active: boolean
  /** Hands out nothing more; ended once nothing is held. */
  closed: boolean
  topUp?: Promise<Refusal | undefined>
}

export interface LeasedHold {
  readonly id: string
  readonly lease: Lease
  readonly apiType: string
  readonly createdAt: number
  /** Credits still held (a partial refund lowers it). */
  amount: number
  state: 'pending' | 'committed' | 'released'
  written?: Promise<void>
  /** Its charge, sent at reservation (early charges, credit-leases.ts); `commit` waits for it. */
  drawn?: Promise<void>
}

export type TopUpResult = 'expired' | [taken: number, usedAndPending: number, granted: number, othersLeased: number, usedWithoutLeases: number]
export type DrawResult = boolean | 'exists' | 'expired'

export interface Refusal {
  used: number
  granted: number
  othersLeased: number
}

/**
 * A lease's draw writes the charge after any part given back before it, so its ledger row does not
 * keep the reservation: charge lines of a leasing store leave `reserved` out rather than show a
 * figure that is only the charge again.
 */
export function withoutReserved(ledger: CreditLedger): CreditLedger {
  return {
    balance: ledger.balance,
    entries: ledger.entries.map((entry) => {
      if (entry.kind !== 'charge') return entry
      const { reserved: _reserved, ...rest } = entry
      return rest
    }),
  }
}
