/**
 * Credit ledger of the shared engine: PostgreSQL is the only authority, for pending holds as much as
 * for charges, so any number of gateway instances share one exact balance.
 *
 * - `reserve` inserts a hold row (owner = this instance) and adds its amount to the period's
 *   `pending` with one conditional upsert (`used + pending + amount <= allocation`); the row lock of
 *   the period orders concurrent batches of every instance, so there is no overspend.
 * - `commit` moves the hold's amount from `pending` to `used`; `release` gives back what it still
 *   charges (pending or committed); `refundPart` gives back part. All of them ride in the group
 *   commit of their turn (pg.ts) and resolve after its COMMIT.
 * - This instance remembers the holds it made until `close`, so closing a settled one costs no round
 *   trip, and a commit can tell "already committed" from "the reaper released it".
 *
 * Failure behaviour:
 * - PostgreSQL unreachable: every operation rejects with 503 `store_unavailable`. A reserve whose
 *   outcome is unknown, and a release (or close of a pending hold) that failed, are kept and re-sent
 *   as releases every tick until PostgreSQL answers: release is
 *   idempotent, so a commit whose outcome was unknown (connection lost around its COMMIT, client
 *   answered 503) is undone once the database is back, and nothing is charged that was not served.
 * - This instance dies (`kill -9`): it stops heartbeating; once its row in `tollgate_instances` is
 *   older than the instance timeout, the reaper of any live instance releases its pending holds. Its
 *   commits were durable before each answer, so no acknowledged charge is lost.
 * - A commit of a hold the reaper already released (this instance was cut off longer than the
 *   timeout) is refused with `store_unavailable`: the client is not told it succeeded.
 */
import { errors } from '../../proxy/errors.ts'
import { checkGrant, toBalance } from '../credit-balance.ts'
import type { CreditBalance, CreditGrant, CreditLedger, CreditLedgerEntry, CreditReservation } from '../types.ts'
import type pg from 'pg'
import { pgFailure, type PgBatcher } from './pg.ts'
import { CARRIES_SQL, carryEntry } from './credit-carries.ts'
import { unfoldedAfterMark } from './draw-fold-mark-migration.ts'

type HoldState = 'pending' | 'committed' | 'released'

/** A reservation this instance made, from reserve until close. */
interface Held {
  readonly id: string
  readonly createdAt: number
  state: HoldState
  /** The last write of this hold, once one is queued. */
  written?: Promise<void>
}

const done = Promise.resolve()

/**
 * A period's balance as a reader sees it: committed charges plus pending holds, without the credits
 * instances hold in leases (credit-leases.ts), which no request has taken yet: a lease's `charged`
 * less its draws not yet folded (core migration 6, append-draws-migration.ts), read past its fold mark
 * (migration 7, draw-fold-mark-migration.ts) so that folded draws autovacuum has not removed cost nothing.
 */
const BALANCE_SQL = `SELECT b.used + b.pending - coalesce((SELECT sum(l.charged - ${unfoldedAfterMark('l')})
  FROM credit_holds l WHERE l.project_id = b.project_id AND l.period = b.period AND l.state = 'pending' AND l.api_type = 'lease'), 0) AS used, b.granted
  FROM credit_balances b WHERE b.project_id = $1 AND b.period = $2`

/** The credit operations of the shared store. */
export class SharedCreditLedger {
  private readonly held = new Map<string, Held>()
  /** Releases PostgreSQL has not confirmed yet; re-sent by {@link SharedCreditLedger.retryReleases}. */
  private readonly unconfirmedReleases = new Set<string>()

  constructor(
    private readonly pool: pg.Pool,
    private readonly batch: PgBatcher,
    private readonly clock: () => number,
  ) {}

  /** Whether this instance holds a reservation of this id (pending or settled, not yet closed). */
  has(id: string): boolean {
    return this.held.has(id)
  }

  async reserve(reservation: CreditReservation): Promise<{ ok: boolean; balance: CreditBalance }> {
    const { id, projectId, period, allocation, amount, apiType } = reservation
    checkReservation(reservation)
    if (this.held.has(id)) throw reservationExists(id)
    let result: 'exists' | [boolean, number, number?]
    try {
      result = await this.batch.enqueue({ o: 'reserve', i: id, p: projectId, e: period, a: allocation, n: amount, t: apiType })
    } catch (error) {
      // The hold may exist (COMMIT done, answer lost); this live instance's reaper would never free
      // it, so it is released once PostgreSQL answers again (a release of no hold is a no-op).
      this.unconfirmedReleases.add(id)
      throw error
    }
    if (result === 'exists') throw reservationExists(id)
    const [ok, used, granted] = result
    if (ok) this.held.set(id, { id, createdAt: this.clock(), state: 'pending' })
    return { ok, balance: toBalance(projectId, period, allocation, used, granted ?? 0) }
  }

  commit(id: string): Promise<void> {
    const held = this.held.get(id)
    if (held === undefined) return this.batch.enqueue({ o: 'commit', i: id }).then(() => undefined)
    if (held.state !== 'pending') return held.written ?? done
    held.state = 'committed'
    const written = this.batch.enqueue<string>({ o: 'commit', i: id }).then(
      (outcome) => {
        if (outcome === 'ok' || outcome === 'committed') return
        // Released by the reaper while this instance could not reach the database.
        held.state = 'released'
        throw errors.storeUnavailable(`credit reservation ${id} expired while the store was unreachable; the request is not charged`)
      },
      (error: unknown) => {
        // Outcome unknown: pending again for the caller, who releases it (re-sent until confirmed).
        if (held.written === written) {
          held.state = 'pending'
          held.written = undefined
        }
        throw error
      },
    )
    held.written = written
    return written
  }

  release(id: string): Promise<void> {
    const held = this.held.get(id)
    if (held !== undefined) {
      if (held.state === 'released') return held.written ?? done
      held.state = 'released'
    }
    const written = this.sendRelease(id)
    if (held !== undefined) held.written = written
    return written
  }

  refundPart(id: string, amount: number): Promise<void> {
    checkAmount('amount', amount)
    if (amount === 0) return done
    const held = this.held.get(id)
    if (held?.state === 'released') return held.written ?? done
    const written = this.batch.enqueue({ o: 'refund', i: id, n: amount }).then(() => undefined)
    if (held !== undefined) held.written = written
    return written
  }

  close(id: string): Promise<void> {
    const held = this.held.get(id)
    if (held === undefined) return done
    const written = held.state === 'pending' ? this.release(id) : (held.written ?? done)
    this.held.delete(id)
    return written
  }

  async balance(projectId: string, period: string, allocation: number): Promise<CreditBalance> {
    await this.batch.idle()
    try {
      const { rows } = await this.pool.query<{ used: number; granted: number }>(
        BALANCE_SQL,
        [projectId, period],
      )
      return toBalance(projectId, period, allocation, rows[0]?.used ?? 0, rows[0]?.granted ?? 0)
    } catch (error) {
      throw pgFailure(error)
    }
  }

  /**
   * Grants credits once per id: one `grant` op in the turn's batch, whose transaction inserts the
   * grant row (primary key = id) and moves the period's `granted`; resolves after the COMMIT
   * (flushed to the WAL). A concurrent grant of the same id on any instance waits on the row and
   * then grants nothing. Answers where the grant went (the first grant's project and period when
   * the id was granted before), not a balance: the op's `used + pending` counts credits parked in
   * leases as used, so the caller reads the balance the one way every balance is read.
   */
  async grant(grant: CreditGrant): Promise<{ created: boolean; projectId: string; period: string }> {
    checkGrant(grant)
    const { id, projectId, period, amount, reason, actor } = grant
    const [created, storedProject, storedPeriod] = await this.batch.enqueue<[boolean, string, string, number, number]>({
      o: 'grant', i: id, p: projectId, e: period, n: amount, r: reason, w: actor,
    })
    return { created, projectId: storedProject, period: storedPeriod }
  }

  /**
   * A period's entries, read in one REPEATABLE READ snapshot so they add up to the balance read in
   * it: grants, carries in and out, committed hold rows summed per API type and UTC hour of their reservation, pending holds.
   */
  async ledger(projectId: string, period: string, allocation: number): Promise<CreditLedger> {
    await this.batch.idle()
    let client: pg.PoolClient | undefined
    try {
      client = await this.pool.connect()
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY')
      const args = [projectId, period]
      const balance = await client.query<{ used: number; granted: number }>(BALANCE_SQL, args)
      const grants = await client.query<{ id: string; amount: number; reason: string; actor: string; at: Date }>(
        'SELECT id, amount, reason, actor, created_at AS at FROM credit_grants WHERE project_id = $1 AND period = $2 ORDER BY created_at, id',
        args,
      )
      const carries = await client.query<{ id: string; from_period: string; to_period: string; amount: number; actor: string; at: Date }>(CARRIES_SQL, args)
      // `reserved`: the holds' reservations (the estimate) beside what they were charged (the actual).
      const charges = await client.query<{ api_type: string; hour_ms: number; amount: number; reserved: number }>(
        `SELECT api_type, (extract(epoch FROM date_trunc('hour', created_at AT TIME ZONE 'UTC')) * 1000)::bigint AS hour_ms, sum(charged) AS amount, sum(amount) AS reserved
         FROM credit_holds WHERE project_id = $1 AND period = $2 AND state = 'committed'
         GROUP BY 1, 2 HAVING sum(charged) <> 0 OR sum(amount) <> 0 ORDER BY 2, 1`,
        args,
      )
      const pending = await client.query<{ amount: number }>(
        `SELECT coalesce(sum(charged), 0) AS amount FROM credit_holds WHERE project_id = $1 AND period = $2 AND state = 'pending' AND api_type <> 'lease'`,
        args,
      )
      await client.query('COMMIT')
      const entries: CreditLedgerEntry[] = [{ kind: 'allocation', amount: allocation }]
      for (const g of grants.rows) entries.push({ kind: 'grant', id: g.id, reason: g.reason, actor: g.actor, at: g.at.toISOString(), amount: g.amount })
      for (const c of carries.rows) entries.push(carryEntry(period, c))
      for (const c of charges.rows) entries.push({ kind: 'charge', apiType: c.api_type, hour: new Date(c.hour_ms).toISOString(), amount: -c.amount, reserved: -c.reserved })
      const held = pending.rows[0]?.amount ?? 0
      if (held !== 0) entries.push({ kind: 'pending', amount: -held })
      const row = balance.rows[0]
      return { balance: toBalance(projectId, period, allocation, row?.used ?? 0, row?.granted ?? 0), entries }
    } catch (error) {
      await client?.query('ROLLBACK').catch(() => {})
      throw pgFailure(error)
    } finally {
      client?.release()
    }
  }

  /** Re-sends the releases PostgreSQL has not confirmed (it was unreachable); returns how many are left. */
  async retryReleases(): Promise<number> {
    const ids = [...this.unconfirmedReleases]
    await Promise.allSettled(ids.map((id) => this.sendRelease(id)))
    return this.unconfirmedReleases.size
  }

  /** Holds this instance remembers, and releases not yet confirmed (for tests and metrics). */
  counts(): { held: number; unconfirmedReleases: number } {
    return { held: this.held.size, unconfirmedReleases: this.unconfirmedReleases.size }
  }

  /** Forgets settled holds nobody closed that are older than `cutoff` (epoch ms). */
  sweep(cutoff: number): void {
    for (const held of this.held.values()) if (held.state !== 'pending' && held.createdAt < cutoff) this.held.delete(held.id)
  }

  /**
   * Releases hold `id` in PostgreSQL whatever this instance knows of it (a leased charge whose draw
   * may or may not have committed), re-sent every tick until confirmed.
   */
  releaseById(id: string): Promise<void> {
    return this.sendRelease(id)
  }

  private sendRelease(id: string): Promise<void> {
    this.unconfirmedReleases.add(id)
    return this.batch.enqueue({ o: 'release', i: id }).then(() => {
      this.unconfirmedReleases.delete(id)
    })
  }
}

/** Throws TypeError / RangeError naming the field when a reservation is malformed. */
export function checkReservation({ id, amount, allocation }: CreditReservation): void {
  if (typeof id !== 'string' || id === '') throw new TypeError('reservation id must be a non-empty string')
  checkAmount('amount', amount)
  if (!Number.isFinite(allocation)) throw new RangeError(`allocation must be a finite number, got ${allocation}`)
}

export function reservationExists(id: string): Error {
  return Object.assign(new Error(`reservation id ${id} is already in use`), { code: 'reservation_exists' })
}


export function checkAmount(name: string, value: number): void {
  if (!(value >= 0) || !Number.isFinite(value)) throw new RangeError(`${name} must be a non-negative number, got ${value}`)
}
