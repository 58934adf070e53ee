/**
 * The shared engine's {@link QuickStore}: the per-request calls this process answers from memory,
 * without the promise each form on `Store` costs (a promise, an await and a microtask turn per call:
 * gateway CPU per charged request, issue 26). A reservation its period's credit lease covers
 * (credit-leases.ts), a rate decision its bucket's leased tokens cover (redis-buckets.ts), the close
 * of a reservation and a usage record, both of which nobody waits for. Everything else (a lease
 * top-up, a Redis call, a refusal) is left to the promise forms, which decide exactly as before.
 */
import type { CreditReservation, QuickStore, UsageEvent } from '../types.ts'
import type { CreditLeases } from './credit-leases.ts'
import type { SharedCreditLedger } from './credits.ts'
import type { RedisBuckets } from './redis-buckets.ts'
import type { SharedUsageLog } from './usage.ts'

const ignore = (): void => {}

export function sharedQuickStore(
  leases: CreditLeases | undefined,
  credits: CreditLeases | SharedCreditLedger,
  buckets: RedisBuckets,
  usage: SharedUsageLog,
): QuickStore {
  return {
    // Without leases every reservation is a round trip: never from memory.
    tryReserveCredits: (reservation: CreditReservation) => (leases === undefined ? undefined : leases.reserveNow(reservation)?.balance.remaining),
    tryTakeToken: (key: string, capacity: number, refillPerSecond: number, cost?: number) => buckets.takeLeased(key, capacity, refillPerSecond, cost),
    closeCredits: (reservationId: string) => {
      let written: Promise<void>
      try {
        written = credits.close(reservationId)
      } catch {
        // Bad input: Store.closeCredits rejects with it, which a caller that waits for nothing drops.
        return
      }
      // A pending reservation's release may fail (PostgreSQL unreachable): the ledger re-sends it.
      written.catch(ignore)
    },
    recordUsage: (event: UsageEvent) => usage.record(event),
  }
}
