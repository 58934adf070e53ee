/**
 * The credit-meter's side of the ledger: reserve before the service runs, then commit or release
 * once the answer is known, and never leave a reservation pending after the request is over.
 *
 * Durability comes from the store: a commit is on disk when its promise resolves. The meter commits
 * in the response phase, which the core runs before it writes the head, so every 2xx a client
 * receives was charged on disk first. A reservation only has to hold against concurrent requests
 * (the embedded store keeps it in memory); one still pending when the process dies (the answer was
 * not yet decided) is released: it never reached the disk, or recovery releases it at the next start.
 */
import { GatewayError } from '../../core/proxy/plugin-api.ts'
import type { Project } from '../../core/proxy/plugin-api.ts'
import { currentSchedulePeriod } from '../../core/proxy/plugin-api.ts'
import type { CreditBalance, CreditReservation, ImmediateStore, QuickStore, Store } from '../../core/store/types.ts'

const SETTLED = Promise.resolve()

export type SettlementState = 'pending' | 'committed' | 'released'

/**
 * One request's reservation as the meter tracks it. On an engine that answers at once it is also
 * the reservation handed to the store (which copies what it keeps): one object a request, not two.
 * Made as an object literal: V8 allocates a literal inline, where a class with six parameters went
 * through the generic construct stub (~500 instructions more a request, bench/RESULTS.md session 13).
 */
export interface MeteredRequest extends CreditReservation {
  /** Billing period the credits were reserved in; commit and release always go to this one. */
  readonly period: string
  state: SettlementState
  /** Credits given back from a committed charge (failed batch items). */
  refunded: number
  /** The period's balance right after this reservation (it counts against the balance at once). */
  remainingAfterReserve: number
}

/**
 * Reserves and settles credits of requests against a {@link Store}.
 *
 * @example
 * ```ts
 * const ledger = new CreditLedger(init.store)
 * const metered = await ledger.reserve('req-1:route', project, 'MIRROR', 1) // throws 402 when exhausted
 * await ledger.settle(metered, true, 0)                                     // commit
 * ```
 */
export class CreditLedger {
  constructor(
    readonly store: Store,
    /** Epoch-ms clock that picks the billing period; injectable so tests can cross a period boundary. */
    readonly clock: () => number = Date.now,
  ) {}

  /** Key of the project's billing period now (`2026-11`, `2026-11-21`, `2026-11-21T09`, `2026-11-15/P1M`). */
  currentPeriod(project: Project): string {
    return currentSchedulePeriod(project.credits, this.clock())
  }

  /**
   * Reserves `amount` credits in the project's current period. The reservation counts against the
   * balance at once, so concurrent requests can never overspend.
   * @throws GatewayError 402 `credits_exhausted` when the balance does not cover the amount.
   */
  async reserve(id: string, project: Project, apiType: string, amount: number): Promise<MeteredRequest> {
    const record = this.record(id, project, apiType, amount)
    // A plain copy for an engine that may keep or send what it is given (the record changes later).
    const { projectId, period, allocation } = record
    return accepted(record, await this.store.reserveCredits({ id, projectId, period, allocation, amount, apiType }))
  }

  /** {@link reserve} on a store that answers at once (the embedded engine): no promise, no microtask. */
  reserveNow(immediate: ImmediateStore, id: string, project: Project, apiType: string, amount: number): MeteredRequest {
    const record = this.record(id, project, apiType, amount)
    const answer = immediate.reserveCredits(record)
    if (typeof answer === 'number') {
      record.remainingAfterReserve = answer
      return record
    }
    return accepted(record, { ok: false, balance: answer })
  }

  /**
   * {@link reserve} when the store decides it from memory (`Store.quick`: a shared engine's credit
   * lease covers it): the accepted record, with no promise and no microtask; undefined when the
   * store must ask its server (nothing was held: call {@link reserve}). The store keeps nothing of
   * the record it is given.
   */
  tryReserveNow(quick: QuickStore, id: string, project: Project, apiType: string, amount: number): MeteredRequest | undefined {
    const record = this.record(id, project, apiType, amount)
    const left = quick.tryReserveCredits(record)
    if (left === undefined) return undefined
    record.remainingAfterReserve = left
    return record
  }

  private record(id: string, project: Project, apiType: string, amount: number): MeteredRequest {
    const period = this.currentPeriod(project)
    return { id, projectId: project.id, period, allocation: project.credits.allocation, apiType, amount, state: 'pending', refunded: 0, remainingAfterReserve: 0 }
  }

  /**
   * Settles a reservation for the answer as it stands: charged (minus `partialRefund`) or
   * released. May be called again when the answer changes (a later plugin turned it into an
   * error); a release after a commit refunds the charge.
   */
  settle(metered: MeteredRequest, charged: boolean, partialRefund: number): Promise<void> {
    if (!charged) return this.release(metered)
    if (metered.state === 'released') return SETTLED
    const part = refundStillDue(metered, partialRefund)
    // Not an async function itself: on every request it would add a promise and an await around the commit.
    return part > 0 ? this.refundThenCommit(metered, part) : this.commit(metered)
  }

  /**
   * {@link settle}, then `after(arg)` once the settlement is on disk (not when it fails). The usual
   * settlement, a whole commit of a pending reservation, is one step on the store's commit promise:
   * `settle` wrapped in an async function would add a promise, an await and its closures per request.
   */
  settleThen<T>(metered: MeteredRequest, charged: boolean, partialRefund: number, after: (arg: T) => void, arg: T): Promise<void> {
    if (charged && metered.state === 'pending' && refundStillDue(metered, partialRefund) <= 0) {
      return this.store.commitCredits(metered.id).then(() => {
        metered.state = 'committed'
        after(arg)
      })
    }
    return this.settle(metered, charged, partialRefund).then(() => after(arg))
  }

  private async refundThenCommit(metered: MeteredRequest, part: number): Promise<void> {
    // The part goes back before the commit: a crash in between leaves a pending reservation,
    // which recovery releases whole, and that client never received its answer.
    await this.store.refundPart(metered.id, part)
    metered.refunded += part
    await this.commit(metered)
  }

  private async commit(metered: MeteredRequest): Promise<void> {
    if (metered.state !== 'pending') return
    await this.store.commitCredits(metered.id)
    metered.state = 'committed'
  }

  /** Gives the whole reservation back, committed or not. */
  async release(metered: MeteredRequest): Promise<void> {
    if (metered.state === 'released') return
    await this.store.releaseCredits(metered.id)
    metered.state = 'released'
  }

  /** The request is over: the store forgets the reservation (a pending one is released). */
  close(metered: MeteredRequest): void {
    const unawaited = this.store.immediate ?? this.store.quick
    if (unawaited !== undefined) return unawaited.closeCredits(metered.id)
    // What it resolves with is the last write's outcome, already reported where that was awaited.
    this.store.closeCredits(metered.id).catch(() => {})
  }

  /**
   * The balance left once this request is settled, as seen by this request: the balance after its
   * reservation plus what it got back. Concurrent requests of the project may move it meanwhile.
   */
  static remaining(metered: MeteredRequest): number {
    return metered.remainingAfterReserve + metered.amount - CreditLedger.charged(metered)
  }

  /** Credits the request finally costs. */
  static charged(metered: MeteredRequest | undefined): number {
    return metered?.state === 'committed' ? metered.amount - metered.refunded : 0
  }
}

/** What of `partialRefund` (bounded by the amount) has not been given back yet. */
function refundStillDue(metered: MeteredRequest, partialRefund: number): number {
  return Math.min(Math.max(0, partialRefund), metered.amount) - metered.refunded
}

/**
 * The meter's record of an accepted reservation, with the balance it left.
 * @throws GatewayError 402 `credits_exhausted` when the balance did not cover the amount.
 */
function accepted(record: MeteredRequest, { ok, balance }: { ok: boolean; balance: CreditBalance }): MeteredRequest {
  const { projectId, period, allocation, amount } = record
  if (!ok) {
    throw new GatewayError(
      402,
      'credits_exhausted',
      `project ${projectId} has ${balance.remaining} of ${allocation + balance.granted} credits left in period ${period}; this request needs ${amount}`,
      { detail: { project: projectId, period, remaining: balance.remaining, needed: amount } },
    )
  }
  record.remainingAfterReserve = balance.remaining
  return record
}
