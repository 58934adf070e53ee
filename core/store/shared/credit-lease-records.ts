/**
 * What credit-leases.ts keeps per lease and per request it admitted from one, the answers of the
 * `lease` and `draw` ops, and the ledger as a leasing store shows it.
 */
import type { CreditLedger } from '../types.ts'
import type { BatchOp } from './pg.ts'

export interface Lease {
  readonly key: string
  /** Its `credit_holds` row. */
  readonly id: string
  /** The start of its draws' op text, up to the request's id ({@link drawTextOf}). */
  readonly drawText: string
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

/**
 * Draw ops are written as text (`PgBatcher.enqueueText`), not as objects for JSON.stringify, which
 * walks and escapes every key and value of each, per charged request (gateway CPU, issue 26): the
 * lease's part is made once per lease, the API type's once per type, and only the request's id is
 * escaped per draw. The text is what JSON.stringify made of `{ o, l, i, n, t }`.
 */
export function drawTextOf(leaseId: string): string {
  return `{"o":"draw","l":${JSON.stringify(leaseId)},"i":`
}

/** The `draw` op of `hold` as JSON text (see {@link drawTextOf}). */
export function drawOpText(hold: LeasedHold): string {
  // `amount` passed checkAmount (a finite number): its text is the same as JSON's.
  return `${hold.lease.drawText}${JSON.stringify(hold.id)},"n":${hold.amount},"t":${apiTypeText(hold.apiType)}}`
}

/** API types whose JSON text is kept (a gateway has a handful; the map is cleared past this, never unbounded). */
const MOST_API_TYPE_TEXTS = 64
const apiTypeTexts = new Map<string, string>()

function apiTypeText(apiType: string): string {
  let text = apiTypeTexts.get(apiType)
  if (text === undefined) {
    if (apiTypeTexts.size >= MOST_API_TYPE_TEXTS) apiTypeTexts.clear()
    // Not a string (a caller outside the types): null, where JSON.stringify of the object left `t` out; read the same.
    text = JSON.stringify(apiType) ?? 'null'
    apiTypeTexts.set(apiType, text)
  }
  return text
}

/** What a {@link DrawOp} reports to (credit-leases.ts). */
interface DrawSettler {
  drawAnswered(hold: LeasedHold, amount: number, outcome: DrawResult): Error | undefined
  drawFailed(hold: LeasedHold, amount: number): void
}

/**
 * A lease's draw in the group commit (`PgBatcher.push`), settling its request's promise itself when
 * the batch answers. Never throws into the batcher, whose loop settles the batch's other ops next.
 */
export class DrawOp implements BatchOp {
  readonly kind = 'draw'
  readonly text: string
  /** Captured when sent: what the batch charges, whatever later happens to the hold. */
  private readonly amount: number

  constructor(
    private readonly leases: DrawSettler,
    private readonly hold: LeasedHold,
    private readonly done: () => void,
    private readonly failed: (error: unknown) => void,
  ) {
    this.text = drawOpText(hold)
    this.amount = hold.amount
  }

  resolve(outcome: unknown): void {
    let error: unknown
    try {
      error = this.leases.drawAnswered(this.hold, this.amount, outcome as DrawResult)
    } catch (thrown) {
      error = thrown
    }
    if (error === undefined) this.done()
    else this.failed(error)
  }

  reject(error: unknown): void {
    try {
      this.leases.drawFailed(this.hold, this.amount)
    } finally {
      this.failed(error)
    }
  }
}
