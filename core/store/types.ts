/**
 * The state interface. Every operation is async and atomic on its own, so that the shared engine
 * (PostgreSQL + Redis, shared/) can implement each as one statement of a batched transaction or one
 * Lua script; the embedded engine (SQLite + in-process counters) implements it synchronously underneath.
 */

import type { SettingsStore } from './settings/types.ts'
import type { AccountsStore } from './accounts/types.ts'

export type Granularity = 'hour' | 'day'

export interface CreditReservation {
  /** Unique per request; commit/release refer to it. */
  id: string
  projectId: string
  /** Billing period the charge falls in, e.g. `2026-11` for monthly. */
  period: string
  /** Allocation of that period, from config at reservation time. */
  allocation: number
  amount: number
  apiType: string
}

export interface CreditBalance {
  projectId: string
  period: string
  allocation: number
  /** Credits granted on top of the allocation in this period (top-ups, x402 payments). */
  granted: number
  /** Committed charges plus reservations still pending. */
  used: number
  /** `allocation + granted - used`, never below 0. */
  remaining: number
}

/** Credits added to a project's period on top of its allocation, once per `id`. */
export interface CreditGrant {
  /**
   * Idempotency key: a second grant with the same id grants nothing (whatever its other fields).
   * E.g. `topup:<key>` for an operator's top-up, `x402:<network>:<tx>` for a settled payment.
   */
  id: string
  projectId: string
  /** Billing period the credits count in (the project's current one). */
  period: string
  /** The period's allocation, from config at grant time (for the balance returned). */
  allocation: number
  /** Credits added, an integer > 0. */
  amount: number
  /** Why: `top_up`, `x402`, ... (1 to 64 characters). */
  reason: string
  /** Who: the admin actor, or the payer of an x402 payment (1 to 128 characters). */
  actor: string
}

/**
 * A changed refill schedule (or period): the project's current period gets a new key, and the
 * credits granted in the old one and not yet spent move with it, so nothing paid for is lost.
 * Charges stay in the period they were made in. The allocation is spent before grants, so what moves
 * is `min(granted, allocation + granted - used)` of `from` (pending reservations count as used).
 */
export interface CreditCarry {
  /** Idempotency key: a second carry with the same id moves nothing. */
  id: string
  projectId: string
  /** The period the old schedule is in now. */
  from: string
  /** The old schedule's allocation (what `from` is measured against). */
  fromAllocation: number
  /** The period the new schedule is in now. */
  to: string
  toAllocation: number
  /** Who changed the schedule (1 to 128 printable ASCII characters). */
  actor: string
}

export interface CreditCarried {
  /** False when the id was carried before (nothing moved this time). */
  created: boolean
  /** Credits moved from `from` to `to` (0: nothing unspent was granted). */
  amount: number
  from: CreditBalance
  to: CreditBalance
}

/**
 * One line of a period's ledger. The amounts of a period's entries add up exactly to
 * `allocation + granted - used` (its balance before the clamp at 0).
 *
 * Charges are grouped per API type and UTC hour of the reservation (the hour the request arrived
 * in), the granularity both engines keep exactly: the embedded engine stores per-(period, API type,
 * hour) sums beside its per-period sum, the shared one sums its hold rows.
 */
export type CreditLedgerEntry =
  | { kind: 'allocation'; amount: number }
  | { kind: 'grant'; id: string; reason: string; actor: string; at: string; amount: number }
  /**
   * Committed charges (after refunds) of requests that arrived in `hour`; amount is negative.
   * `reserved` (negative) is what those requests had reserved: the estimate beside the actual. It
   * differs from `amount` when part went back before the commit (two-phase metering, a batch's
   * failed items); it is not part of the balance's sum. Absent on a shared store with credit leases
   * (a lease's draw records only the charge).
   */
  | { kind: 'charge'; apiType: string; hour: string; amount: number; reserved?: number }
  /** Reservations still pending (requests in flight); amount is negative. */
  | { kind: 'pending'; amount: number }
  /** Charges committed by versions that did not record them per hour; amount is negative. */
  | { kind: 'earlier_charges'; amount: number }
  /**
   * Unspent granted credits moved by a schedule change ({@link CreditCarry}): positive in `to`'s
   * ledger, negative in `from`'s; both name both periods.
   */
  | { kind: 'carry'; id: string; from: string; to: string; actor: string; at: string; amount: number }

export interface CreditLedger {
  balance: CreditBalance
  entries: CreditLedgerEntry[]
}

export interface UsageEvent {
  projectId: string
  apiType: string
  /** Epoch ms of the request. */
  at: number
  requests: number
  credits: number
  errors: number
  /**
   * Route name, when the request matched one: with `status` it also counts the request in the
   * per-route table ({@link Store.queryUsageDetail}). Both come from config or the HTTP status, so the
   * number of rows stays bounded (routes × status classes × hours).
   */
  route?: string
  /** HTTP status the client got (499: it left before any answer); booked by class, `2xx`, `4xx`... */
  status?: number
  /** Time from the request head to the end of the answer, ms; summed (and the maximum kept) per row. */
  latencyMs?: number
}

/** Status class of an HTTP status: `2xx`, `4xx`, `5xx`... (anything outside 100..599 is `other`). */
export function statusClassOf(status: number): string {
  return status >= 100 && status <= 599 ? STATUS_CLASSES[Math.floor(status / 100)] : 'other'
}

/** The class names by hundreds, made once: every request records one. */
const STATUS_CLASSES = ['', '1xx', '2xx', '3xx', '4xx', '5xx']

/** One row of the per-route usage: a bucket, API type, route and status class. */
export interface UsageDetailRow {
  /** ISO 8601 UTC start of the bucket. */
  bucket: string
  apiType: string
  route: string
  /** `2xx`, `3xx`, `4xx`, `5xx` or `other`. */
  statusClass: string
  requests: number
  credits: number
  errors: number
  /** Sum of the requests' latencies (ms): divided by `requests` it is the mean. */
  latencyMsSum: number
  /** Slowest request of the row (ms). */
  latencyMsMax: number
}

export interface UsageRow {
  /** ISO 8601 UTC start of the bucket. */
  bucket: string
  apiType: string
  requests: number
  credits: number
  errors: number
}

export interface RateDecision {
  allowed: boolean
  limit: number
  remaining: number
  /** Seconds until the bucket is full again. */
  resetSeconds: number
  /** Seconds to wait before a retry can pass (0 when allowed). */
  retryAfterSeconds: number
}

/** What `/readyz` reports of the store. */
export interface StoreHealth {
  /** The store can serve metered requests (its source of truth answers). */
  ok: boolean
  /** Per component (`postgres`, `redis`, `sqlite`): `ok` or why not. */
  components: Record<string, string>
}

/**
 * The operations an engine that decides in this process (the embedded one) answers synchronously,
 * with the same semantics as their promise forms on {@link Store}, throwing where those reject. A
 * plugin on the per-request path calls them when the store has them: each promise form costs a
 * promise, an await and a microtask turn per call, for an answer that was ready at once.
 */
export interface ImmediateStore extends UnawaitedStore {
  /**
   * {@link Store.reserveCredits} without its wrapper: accepted, the credits left after this
   * reservation (a number); refused, the period's balance (nothing held). No per-request objects
   * on the usual path.
   */
  reserveCredits(reservation: CreditReservation): number | CreditBalance
  takeToken(key: string, capacity: number, refillPerSecond: number, cost?: number): RateDecision
}

/** The two per-request calls nobody waits for, answered synchronously by {@link ImmediateStore} and {@link QuickStore}. */
export interface UnawaitedStore {
  /** {@link Store.closeCredits}; resolves nothing the caller waits for: the last write's outcome went to whoever asked for that write. */
  closeCredits(reservationId: string): void
  /** {@link Store.recordUsage}, buffered; throws where that rejects. */
  recordUsage(event: UsageEvent): void
}

/**
 * What an engine that asks a server (the shared one) can often answer from this process's memory,
 * synchronously: a reservation its credit lease covers, a rate decision its leased tokens cover, and
 * the two per-request calls nobody waits for. `undefined` from a `try` method: nothing was taken or
 * held, ask the promise form on {@link Store}. A plugin on the per-request path calls these when the
 * store has them, as it calls {@link ImmediateStore}: each promise form costs a promise, an await and
 * a microtask turn per call for an answer that was ready (gateway CPU per request, issue 26).
 */
export interface QuickStore extends UnawaitedStore {
  /**
   * {@link Store.reserveCredits} when memory decides it: accepted, the credits left after this
   * reservation. Throws where reserveCredits rejects at once (bad input, an id already held). The
   * engine keeps nothing of the object it is given.
   */
  tryReserveCredits(reservation: CreditReservation): number | undefined
  /** {@link Store.takeToken} when tokens held in memory decide it (always allowed then). */
  tryTakeToken(key: string, capacity: number, refillPerSecond: number, cost?: number): RateDecision | undefined
}

export interface Store {
  readonly engine: string
  /**
   * Present on engines whose answers need no I/O (embedded SQLite in its own process); absent on
   * engines that ask a server or another process (shared, a cluster worker's proxy to the primary).
   */
  readonly immediate?: ImmediateStore
  /** Present on engines that can answer some calls from memory without being {@link immediate} (shared). */
  readonly quick?: QuickStore

  /** Whether the store can serve requests now; a shared engine asks its servers (bounded by a short timeout). */
  health(): Promise<StoreHealth>

  /**
   * Atomically reserves `amount` credits if the period's remaining balance covers it; the
   * reservation holds against concurrent reservations at once. Only `commitCredits` is durable:
   * a store may lose pending reservations in a crash, and they then count as released.
   */
  reserveCredits(reservation: CreditReservation): Promise<{ ok: boolean; balance: CreditBalance }>
  /** Turns a reservation into a charge; durable when the promise resolves. Idempotent. */
  commitCredits(reservationId: string): Promise<void>
  /** Gives a pending reservation back (refund). Idempotent; a committed one is refunded too. */
  releaseCredits(reservationId: string): Promise<void>
  /** Partially refunds a committed or pending reservation (batch items that failed). */
  refundPart(reservationId: string, amount: number): Promise<void>
  /**
   * Ends a reservation once its request is over: a pending one is released, a settled one can no
   * longer be refunded. Until then a committed charge can still be released or partly refunded.
   * A store may forget settled reservations nobody closed after a retention of its own.
   */
  closeCredits(reservationId: string): Promise<void>
  /**
   * A period's balance. The one place a balance is read: every answer that reports one (GET
   * credits, top-up and grant answers, carries, the ledger) reads it this way, so two answers
   * never disagree (issue 25 finding 4: a shared top-up once counted leased credits as used).
   */
  balance(projectId: string, period: string, allocation: number): Promise<CreditBalance>
  /**
   * Adds credits to a period, once per grant id (also when the same id arrives concurrently, on any
   * instance sharing the store). Durable when the promise resolves. `created` is false when the id
   * was granted before; `balance` is then that earlier grant's period balance.
   */
  grantCredits(grant: CreditGrant): Promise<{ created: boolean; balance: CreditBalance }>
  /**
   * Moves a period's unspent granted credits into the period a new schedule is in, once per id,
   * atomically with the reservations of both periods (see {@link CreditCarry}). Durable when it resolves.
   */
  carryCredits(carry: CreditCarry): Promise<CreditCarried>
  /** The entries that explain a period's balance, in order: allocation, grants and carries, charges, pending. */
  creditLedger(projectId: string, period: string, allocation: number): Promise<CreditLedger>
  /** Releases reservations a crashed process left pending; returns how many. */
  recoverPendingReservations(): Promise<number>

  recordUsage(event: UsageEvent): Promise<void>
  queryUsage(projectId: string, fromMs: number, toMs: number, granularity: Granularity): Promise<UsageRow[]>
  /**
   * Usage per bucket, API type, route and status class (events recorded with a `route` and a
   * `status`), ordered by bucket, API type, route, status class. Buffered like `queryUsage`.
   */
  queryUsageDetail(projectId: string, fromMs: number, toMs: number, granularity: Granularity): Promise<UsageDetailRow[]>

  /** Token bucket: `capacity` tokens, refilled at `refillPerSecond`. */
  takeToken(key: string, capacity: number, refillPerSecond: number, cost?: number): Promise<RateDecision>

  /** Durable documents for plugins (event items, settlement records). */
  documents(collection: string): DocumentCollection

  /** Project settings changed at run time (overrides of gateway.yaml's projects), with change notifications. */
  readonly settings: SettingsStore

  /** Admin users, the projects they own, and their sign-in sessions. */
  readonly accounts: AccountsStore

  close(): Promise<void>
}

export interface StoredDocument<T> {
  key: string
  owner: string
  doc: T
  createdAt: number
  updatedAt: number
}

export interface DocumentCollection {
  /** Inserts unless the key exists. Returns the stored document and whether it was created. */
  insertIfAbsent<T>(key: string, owner: string, doc: T): Promise<{ created: boolean; stored: StoredDocument<T> }>
  get<T>(key: string): Promise<StoredDocument<T> | undefined>
  /** Replaces an existing document; returns false when the key is absent. */
  update<T>(key: string, doc: T): Promise<boolean>
  /** Documents of one owner, oldest first. */
  listByOwner<T>(owner: string, limit?: number): Promise<StoredDocument<T>[]>
  delete(key: string): Promise<boolean>
  /**
   * A document with its revision: 1 when inserted, +1 on every `update` or successful
   * `compareAndSet`. What a read-modify-write on several instances hands back to `compareAndSet`.
   */
  getWithRevision<T>(key: string): Promise<{ stored: StoredDocument<T>; revision: number } | undefined>
  /**
   * Replaces the document only if its revision is still `revision` (compare-and-set), atomically on
   * every engine. Returns the new revision, or `undefined` when the key is absent or another writer
   * changed it first (read again and retry). Durable when the promise resolves, like `update`.
   */
  compareAndSet<T>(key: string, revision: number, doc: T): Promise<number | undefined>
}
