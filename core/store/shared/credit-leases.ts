/**
 * Credit leases: how the shared engine admits a metered request without a PostgreSQL round trip,
 * and stays exact.
 *
 * An instance takes a block of a period's credits into a lease (one `lease` op; the credits join the
 * period's `pending`, so no other instance can spend them) and reserves from it in memory. The
 * charge is still durable before the answer: `commit` is a `draw` op in the turn's group commit (a
 * committed ledger row for the request, the amount moved from the lease to `used`). A release before
 * the commit, the common refund, costs nothing at all. So a request makes one PostgreSQL round trip
 * (its commit) where it made two, and PostgreSQL writes one row for it instead of two versions.
 *
 * Exactness is kept where it matters, near exhaustion:
 * - a lease takes at most an eighth of what is left of the period (at least what the request
 *   needs), so the last credits go one request at a time, as without leases;
 * - a request is refused only when PostgreSQL says the period cannot cover it (`used + pending +
 *   amount > allocation + granted`) AND no other instance's lease holds credits no request took:
 *   the refused `lease` op marks the other leases `recall`; their owners give back their unheld
 *   credits at their next draw or within {@link IDLE_MS} when idle, and the request asks again
 *   ({@link RETRY_DELAYS_MS}, about 0.6 s in all) before it is refused;
 * - a lease unused for {@link IDLE_MS} is given back whole.
 *
 * Early charges (`chargeEarly`, off by default): a request admitted from a lease sends its draw at
 * once, so the draw's round trip and WAL flush run while the upstream serves the request instead of
 * after it; its `commit` then only waits for that draw, and the answer still leaves after the charge
 * is durable. The reservation stays pending until then, as the store's contract says: a release or
 * a close undoes the draw in PostgreSQL (one more op, queued after the draw), a partial refund too.
 * The price: a request in flight when its gateway is killed stays charged (the ledger is still within
 * acknowledged + in flight); without early charges it is released.
 *
 * Failures: while PostgreSQL is failing, reservations bypass the leases (they fail with 503 as
 * before). A lease whose op failed (outcome unknown), or that the reaper released (this instance was
 * cut off longer than the instance timeout: its draws answer `expired`, the client 503 and nothing
 * charged), is closed: no more reservations, and it is ended (`shrink all`, re-sent every tick
 * until confirmed) once no request holds part of it. A `kill -9` leaves its leases pending with a
 * dead owner: the reaper of any live instance releases them like any pending hold; every charge
 * already acknowledged was drawn (committed) before its answer.
 */
import { errors } from '../../proxy/errors.ts'
import { toBalance } from '../credit-balance.ts'
import type { CreditBalance, CreditLedger, CreditLedgerEntry, CreditReservation } from '../types.ts'
import { DrawOp, drawTextOf, withoutReserved, type DrawResult, type Lease, type LeasedHold, type Refusal, type TopUpResult } from './credit-lease-records.ts'
import { checkAmount, checkReservation, reservationExists, type SharedCreditLedger } from './credits.ts'
import type { PgBatcher } from './pg.ts'
import { backgroundFailed, backgroundSucceeded, type BackgroundLog } from '../../proxy/resilience.ts'

/** A lease not reserved from for this long gives its credits back (ms). */
export const IDLE_MS = 250
/** Waits of a refused request while other instances' leases hold credits (ms); they sum past two {@link IDLE_MS}. */
export const RETRY_DELAYS_MS = [5, 10, 20, 40, 80, 160, 320]
/**
 * Top-up rounds of one reservation. Each round either takes, or waits for a top-up that brought
 * credits other requests took first; reaching this many answers 503 (retry) rather than a 402 the
 * balance may not justify.
 */
const MOST_ROUNDS = 1000

const done = Promise.resolve()
const ignore = (): void => {}
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** The shared engine's credit operations with leases in front of {@link SharedCreditLedger}. */
export class CreditLeases {
  private readonly leases = new Map<string, Lease>()
  private readonly holds = new Map<string, LeasedHold>()
  /** Closed leases whose end PostgreSQL has not confirmed; re-sent by {@link CreditLeases.tick}. */
  private readonly ending = new Map<string, Lease>()
  /** Credits this instance's requests hold per period (key), for readers of the balance. */
  private readonly heldByKey = new Map<string, number>()
  private sequence = 0

  /**
   * @param exact the ledger of per-request holds, used while PostgreSQL fails and for what leases do not cover.
   * @param size most credits one lease takes at a time.
   * @param owner this instance's id (lease ids are unique per owner).
   * @param log where a failing upkeep op (below) is logged, once per outage.
   * @param chargeEarly draw a lease-admitted reservation at once (see the top of this file).
   */
  constructor(
    private readonly exact: SharedCreditLedger,
    private readonly batch: PgBatcher,
    private readonly size: number,
    private readonly owner: string,
    private readonly clock: () => number,
    private readonly log?: BackgroundLog,
    private readonly chargeEarly = false,
  ) {}

  /**
   * The lease ops no request waits for (a top-up ahead, a fold, a give-back, an end) report here: a
   * failure is counted in tollgate_background_errors_total{task="credit-lease-upkeep"} and logged once
   * per outage (core/proxy/resilience.ts); what it leaves undone is redone by the next op or tick.
   */
  private readonly upkeepFailed = (error: unknown): void => backgroundFailed('credit-lease-upkeep', error, this.log)
  private readonly upkeepDone = (): void => backgroundSucceeded('credit-lease-upkeep', this.log)

  reserve(reservation: CreditReservation): Promise<{ ok: boolean; balance: CreditBalance }> {
    let now: { ok: true; balance: CreditBalance } | undefined
    try {
      now = this.reserveNow(reservation)
    } catch (error) {
      return Promise.reject(error)
    }
    return now === undefined ? this.reserveLater(reservation) : Promise.resolve(now)
  }

  /**
   * Checks `reservation` (throws on bad input or an id already held) and admits it from its period's
   * open lease when that covers it: the common case, decided without a promise or an async frame.
   * Undefined: {@link reserveLater} decides.
   */
  reserveNow(reservation: CreditReservation): { ok: true; balance: CreditBalance } | undefined {
    checkReservation(reservation)
    if (this.holds.has(reservation.id) || this.exact.has(reservation.id)) throw reservationExists(reservation.id)
    if (this.batch.failing) return undefined
    const lease = this.leases.get(`${reservation.projectId}\u001f${reservation.period}`)
    if (lease !== undefined && !lease.closed && lease.free >= reservation.amount) return this.take(lease, reservation)
    return undefined
  }

  /** A checked reservation {@link reserveNow} did not admit: a top-up of its lease, or the exact ledger while PostgreSQL fails. */
  reserveLater(reservation: CreditReservation): Promise<{ ok: boolean; balance: CreditBalance }> {
    if (this.batch.failing) return this.exact.reserve(reservation)
    return this.reserveSlow(reservation, `${reservation.projectId}\u001f${reservation.period}`)
  }

  private async reserveSlow(reservation: CreditReservation, key: string): Promise<{ ok: boolean; balance: CreditBalance }> {
    const { id, projectId, period, allocation, amount } = reservation
    let refusals = 0
    for (let round = 0; round < MOST_ROUNDS; round++) {
      let lease = this.leases.get(key)
      if (lease === undefined || lease.closed) lease = this.open(key, projectId, period)
      if (lease.free >= amount) return this.take(lease, reservation)
      // A top-up in flight is shared: its answer may bring enough, or decide for this request too.
      const refused = await (lease.topUp ?? this.topUp(lease, allocation, amount - lease.free))
      if (refused === undefined || lease.free >= amount || lease.closed) continue
      // Refused for a larger need than this one's: ask for this one's.
      if (allocation + refused.granted - refused.used >= amount - lease.free) continue
      if (refused.othersLeased > 0 && refusals < RETRY_DELAYS_MS.length) {
        await sleep(RETRY_DELAYS_MS[refusals++]!)
        continue
      }
      return { ok: false, balance: toBalance(projectId, period, allocation, refused.used, refused.granted) }
    }
    throw errors.storeUnavailable(`credit reservation ${id} could not be decided; retry`)
  }

  /** The balance as PostgreSQL has it (without leased credits), plus what this instance's requests hold. */
  async balance(projectId: string, period: string, allocation: number): Promise<CreditBalance> {
    const balance = await this.exact.balance(projectId, period, allocation)
    return toBalance(projectId, period, allocation, balance.used + this.heldFor(projectId, period), balance.granted)
  }

  /** {@link SharedCreditLedger.ledger} with this instance's held credits in the pending entry and the balance. */
  async ledger(projectId: string, period: string, allocation: number): Promise<CreditLedger> {
    const found = withoutReserved(await this.exact.ledger(projectId, period, allocation))
    const held = this.heldFor(projectId, period)
    if (held === 0) return found
    const entries: CreditLedgerEntry[] = found.entries.filter((entry) => entry.kind !== 'pending')
    const pending = found.entries.reduce((sum, entry) => (entry.kind === 'pending' ? sum + entry.amount : sum), 0)
    entries.push({ kind: 'pending', amount: pending - held })
    const { used, granted } = found.balance
    return { balance: toBalance(projectId, period, allocation, used + held, granted), entries }
  }

  commit(id: string): Promise<void> {
    const hold = this.holds.get(id)
    if (hold === undefined) return this.exact.commit(id)
    if (hold.state !== 'pending') return hold.written ?? done
    hold.state = 'committed'
    if (hold.drawn !== undefined) return (hold.written = hold.drawn)
    // Nothing left to charge (it reserved 0, or was refunded whole): no draw. It holds nothing of its
    // lease, so the idle check may have ended that lease already, and a draw would answer `expired`
    // (found by the ledger model test: refund all, lease idle, commit -> 503).
    if (hold.amount === 0) return done
    return (hold.written = this.draw(hold))
  }

  /**
   * Sends `hold`'s charge (a `draw` op in the next group commit); resolves once it is durable. The op
   * settles it itself ({@link DrawOp}): a `.then` was a promise, two closures and a microtask more.
   */
  private draw(hold: LeasedHold): Promise<void> {
    return new Promise<void>((resolve, reject) => this.batch.push(new DrawOp(this, hold, resolve, reject)))
  }

  /** @internal {@link DrawOp}: its batch answered `outcome`; the error its request fails with, if any. */
  drawAnswered(hold: LeasedHold, amount: number, outcome: DrawResult): Error | undefined {
    const lease = hold.lease
    this.unhold(lease, amount)
    if (outcome === 'expired') {
      // Charged early, the hold stays as its request left it: commit answers this error.
      if (hold.drawn === undefined) hold.state = 'released'
      this.retire(lease)
      return errors.storeUnavailable(`credit reservation ${hold.id} expired while the store was unreachable; the request is not charged`)
    }
    lease.drawnSinceSeen += amount
    lease.unfolded++
    if (outcome === true) this.giveBack(lease)
    return undefined
  }

  /** @internal {@link DrawOp}: its batch failed, outcome unknown: the caller releases (re-sent until confirmed); the lease's count is unknown too. */
  drawFailed(hold: LeasedHold, amount: number): void {
    this.unhold(hold.lease, amount)
    this.retire(hold.lease)
  }

  release(id: string): Promise<void> {
    const hold = this.holds.get(id)
    if (hold === undefined) return this.exact.release(id)
    if (hold.state === 'released') return hold.written ?? done
    const wasPending = hold.state === 'pending'
    hold.state = 'released'
    if (wasPending && hold.drawn === undefined) {
      this.unhold(hold.lease, hold.amount, true)
      return done
    }
    // Drawn (or its draw's outcome is unknown): undone in PostgreSQL, after the draw in queue order.
    const written = this.exact.releaseById(id)
    hold.written = written
    return written
  }

  refundPart(id: string, amount: number): Promise<void> {
    checkAmount('amount', amount)
    const hold = this.holds.get(id)
    if (hold === undefined) return this.exact.refundPart(id, amount)
    if (amount === 0 || hold.state === 'released') return hold.written ?? done
    if (hold.state === 'pending' && hold.drawn === undefined) {
      const part = Math.min(amount, hold.amount)
      hold.amount -= part
      this.unhold(hold.lease, part, true)
      return done
    }
    const written = this.exact.refundPart(id, amount)
    hold.written = written
    return written
  }

  close(id: string): Promise<void> {
    const hold = this.holds.get(id)
    if (hold === undefined) return this.exact.close(id)
    const written = hold.state === 'pending' ? this.release(id) : (hold.written ?? done)
    this.holds.delete(id)
    return written
  }

  /**
   * Every {@link IDLE_MS}: leases nobody reserved from since the last call give their credits back
   * (ended when nothing is held), and ends PostgreSQL did not confirm are re-sent.
   */
  idleCheck(): void {
    for (const lease of this.leases.values()) {
      if (lease.active) {
        lease.active = false
        this.fold(lease)
      } else if (lease.held === 0) this.retire(lease)
      else this.giveBack(lease)
    }
    for (const lease of this.ending.values()) this.sendEnd(lease)
  }

  /**
   * Gives this instance's lease of a period back now, its unheld credits at once and the rest as its
   * requests end (a schedule change carries what the period has left, so none may sit in a lease).
   */
  returnLease(projectId: string, period: string): void {
    const lease = this.leases.get(`${projectId}\u001f${period}`)
    if (lease === undefined) return
    this.giveBack(lease)
    this.retire(lease)
  }

  /** Forgets settled holds nobody closed that are older than `cutoff` (epoch ms). */
  sweep(cutoff: number): void {
    for (const hold of this.holds.values()) if (hold.state !== 'pending' && hold.createdAt < cutoff) this.holds.delete(hold.id)
  }

  /** Open leases, leased holds remembered, and lease ends awaiting PostgreSQL (for tests). */
  counts(): { leases: number; leasedHolds: number; endingLeases: number } {
    return { leases: this.leases.size, leasedHolds: this.holds.size, endingLeases: this.ending.size }
  }

  /** Hands out nothing more from `lease`; it is ended once no request holds part of it. */
  private retire(lease: Lease): void {
    lease.closed = true
    if (this.leases.get(lease.key) === lease) this.leases.delete(lease.key)
    this.endIfIdle(lease)
  }

  /**
   * The periodic fold (core migration 6): draws append rows that a top-up or shrink of the lease
   * folds into the lease and balance rows; a lease drawn from but not topped up meanwhile is sent a
   * shrink of 0, which gives nothing back and folds them, so the draw rows stay few.
   */
  private fold(lease: Lease): void {
    if (lease.unfolded === 0 || lease.closed) return
    lease.unfolded = 0
    // A failure gives nothing back either way; the next top-up, shrink or end folds the draws.
    this.batch.enqueue({ o: 'shrink', i: lease.id, n: 0 }).then(this.upkeepDone, this.upkeepFailed)
  }

  private open(key: string, projectId: string, period: string): Lease {
    const id = `lease:${this.owner}:${++this.sequence}`
    const lease: Lease = { key, id, drawText: drawTextOf(id), projectId, period, free: 0, held: 0, seenUsed: 0, seenGranted: 0, drawnSinceSeen: 0, unfolded: 0, active: true, closed: false }
    this.leases.set(key, lease)
    return lease
  }

  private take(lease: Lease, { id, projectId, period, allocation, amount, apiType }: CreditReservation): { ok: true; balance: CreditBalance } {
    lease.free -= amount
    lease.held += amount
    lease.active = true
    this.heldByKey.set(lease.key, (this.heldByKey.get(lease.key) ?? 0) + amount)
    const hold: LeasedHold = { id, lease, apiType, amount, state: 'pending', createdAt: this.clock() }
    this.holds.set(id, hold)
    if (this.chargeEarly && amount > 0) {
      hold.drawn = this.draw(hold)
      // Its failure reaches the request through commit, or is what a release undoes: handled here.
      hold.drawn.catch(ignore)
    }
    // Refilled ahead, while this request runs, so the next ones do not wait for a round trip.
    if (lease.free < this.size / 2 && lease.topUp === undefined) this.topUp(lease, allocation, 0).then(this.upkeepDone, this.upkeepFailed)
    return { ok: true, balance: toBalance(projectId, period, allocation, lease.seenUsed + lease.drawnSinceSeen + (this.heldByKey.get(lease.key) ?? 0), lease.seenGranted) }
  }

  private heldFor(projectId: string, period: string): number {
    return this.heldByKey.get(`${projectId}\u001f${period}`) ?? 0
  }

  /**
   * Takes up to `size` more credits (at least `need`) into `lease`. Resolves with what PostgreSQL
   * said when it refused (the period's `used + pending`, `granted`, and the other instances' leased
   * credits), else undefined.
   */
  private topUp(lease: Lease, allocation: number, need: number): Promise<Refusal | undefined> {
    lease.unfolded = 0
    const asked = this.batch.enqueue<TopUpResult>({ o: 'lease', i: lease.id, p: lease.projectId, e: lease.period, a: allocation, n: Math.max(this.size, need), m: need }).then(
      (result) => {
        if (result === 'expired') {
          this.retire(lease)
          return undefined
        }
        const [taken, used, granted, othersLeased, usedWithoutLeases] = result
        lease.seenUsed = usedWithoutLeases
        lease.seenGranted = granted
        lease.drawnSinceSeen = 0
        // Closed meanwhile: what came in goes back with the end.
        if (!lease.closed) lease.free += taken
        return taken === 0 && need > 0 ? { used, granted, othersLeased } : undefined
      },
      (error: unknown) => {
        this.retire(lease)
        throw error
      },
    )
    const topUp = asked.finally(() => {
      if (lease.topUp === topUp) lease.topUp = undefined
    })
    lease.topUp = topUp
    return topUp
  }

  /** A request's credits leave the hold: back to the lease's free credits when `giveBack` and it is open. */
  private unhold(lease: Lease, amount: number, giveBack = false): void {
    lease.held -= amount
    const held = (this.heldByKey.get(lease.key) ?? 0) - amount
    if (held > 0) this.heldByKey.set(lease.key, held)
    else this.heldByKey.delete(lease.key)
    if (giveBack && !lease.closed) lease.free += amount
    if (lease.closed) this.endIfIdle(lease)
  }

  /** Gives the unheld credits of `lease` back to the period (recalled, or idle). */
  private giveBack(lease: Lease): void {
    if (lease.closed || lease.free <= 0) return
    const amount = lease.free
    lease.free = 0
    lease.unfolded = 0
    this.batch.enqueue({ o: 'shrink', i: lease.id, n: amount }).then(this.upkeepDone, (error: unknown) => {
      // Unknown whether they went back: the end gives back whatever the row still has.
      this.upkeepFailed(error)
      this.retire(lease)
    })
  }

  private endIfIdle(lease: Lease): void {
    if (lease.held > 0 || this.ending.has(lease.id)) return
    this.ending.set(lease.id, lease)
    this.sendEnd(lease)
  }

  private sendEnd(lease: Lease): void {
    this.batch.enqueue({ o: 'shrink', i: lease.id, n: 'all' }).then(() => {
      this.ending.delete(lease.id)
      this.upkeepDone()
    }, this.upkeepFailed)
  }
}
