/** The options of the shared store engine (index.ts `openSharedStore`). */
import type { BackgroundLog } from '../../proxy/resilience.ts'
import type { MigrationSet } from './migrations.ts'
import type { CreditCommit } from './pg.ts'

export interface SharedStoreOptions {
  /** PostgreSQL connection URL. */
  postgres: string
  /** Redis connection URL (a database number may follow the port: `redis://host:6379/3`). */
  redis: string
  /** PostgreSQL schema of the tables (created if missing). Default `public`. */
  schema?: string
  /** Prefix of every Redis key. Default `tollgate:`. */
  keyPrefix?: string
  /** Most PostgreSQL connections of this instance (default 10). */
  poolSize?: number
  /** An instance silent this long is dead: its pending reservations are released (default 10,000 ms). */
  instanceTimeoutMs?: number
  /** Migrations of other modules applied with the core ones (settings tables...). */
  migrations?: MigrationSet[]
  /** Apply migrations at open (default true); false only checks that the schema is current. */
  migrate?: boolean
  /** Epoch-ms clock for document and usage timestamps; injectable for tests. */
  clock?: () => number
  /** Usage sums are written every this many ms (default 1000). */
  usageFlushMs?: number
  /** Settled reservations nobody closed are forgotten after this long (default 10 minutes). */
  reservationRetentionMs?: number
  /**
   * Most credits this instance takes from a period's balance at a time to admit requests without a
   * PostgreSQL round trip (credit-leases.ts); 0 = one PostgreSQL reservation per request. Default 100.
   */
  leaseCredits?: number
  /**
   * When a batch of credit ops (reservations, charges, releases, refunds, leases) is answered:
   * `durable` (default) after PostgreSQL's WAL flush; `async` before it, with `synchronous_commit =
   * off` (pg.ts: a PostgreSQL crash can lose the last ~0.6 s of charges; a gateway crash loses none).
   * Grants and documents always wait for the flush.
   */
  creditCommit?: CreditCommit
  /**
   * Send a lease-admitted request's charge to PostgreSQL when its credits are reserved, while the
   * upstream serves it, rather than once its answer is known (credit-leases.ts). The answer still
   * waits for the charge to be durable. Default false.
   */
  chargeEarly?: boolean
  /** Most rate-limit tokens leased per bucket at a time (redis-buckets.ts); 0 = every decision goes to Redis. Default 100. */
  rateLeaseTokens?: number
  /** A rate-limit call Redis leaves unanswered this long fails with 503 `store_unavailable` (default 5000 ms). */
  redisTimeoutMs?: number
  /**
   * Failures of background work and of idle connections, at most once per outage of each task
   * (core/proxy/resilience.ts; all are counted in tollgate_background_errors_total). Default: a process warning.
   */
  onBackgroundError?: (error: unknown) => void
  /** Where background failures and recoveries are logged (takes the place of onBackgroundError). */
  backgroundLog?: BackgroundLog
}
