/**
 * Opens the store gateway.yaml's `store` names: the embedded SQLite engine, or the shared engine
 * (PostgreSQL + Redis). The gateway, `tollgate usage` and `tollgate migrate` open stores only here.
 *
 * @example
 * ```ts
 * const store = await openStore(config.store, { dir: config.dir })
 * ```
 */
import { resolve } from 'node:path'
import type { StoreConfig } from '../config/types.ts'
// Types only: pg and redis are loaded when the shared engine is asked for, not on every start.
import type { MigrationReport, MigrationSet } from './shared/index.ts'
import { openSqliteStore } from './sqlite.ts'
import type { Store } from './types.ts'
import type { BackgroundLog } from '../proxy/resilience.ts'

export interface OpenStoreOptions {
  /** Directory relative paths (dataDir) are resolved against: the config file's. */
  dir: string
  /** Migrations of other modules for the shared engine (settings tables...), applied with the core ones. */
  migrations?: MigrationSet[]
  /** Failures of background work (usage flush, reaper). */
  onBackgroundError?: (error: unknown) => void
  /** Shared engine: where background failures (once per outage) and recoveries are logged. */
  backgroundLog?: BackgroundLog
  /** Embedded engine: hold the database lock (default true); false lets tooling read it beside a gateway. */
  exclusive?: boolean
}

export async function openStore(config: StoreConfig, options: OpenStoreOptions): Promise<Store> {
  if (config.engine === 'shared') {
    const { postgres, redis } = sharedUrls(config)
    const { openSharedStore } = await import('./shared/index.ts')
    return openSharedStore({
      postgres,
      redis,
      schema: config.schema,
      keyPrefix: config.keyPrefix,
      poolSize: config.poolSize,
      instanceTimeoutMs: config.instanceTimeoutMs,
      leaseCredits: config.leaseCredits,
      rateLeaseTokens: config.rateLeaseTokens,
      creditCommit: config.creditCommit,
      chargeEarly: config.chargeEarly,
      migrations: options.migrations,
      onBackgroundError: options.onBackgroundError,
      backgroundLog: options.backgroundLog,
    })
  }
  return openSqliteStore({ dataDir: resolve(options.dir, config.dataDir), onBackgroundError: options.onBackgroundError, exclusive: options.exclusive })
}

/** Applies the shared engine's migrations (`tollgate migrate`); undefined for the embedded engine, which needs none. */
export async function migrateStore(config: StoreConfig, migrations: MigrationSet[] = []): Promise<MigrationReport | undefined> {
  if (config.engine !== 'shared') return undefined
  const { postgres } = sharedUrls(config)
  const { migrateSharedStore } = await import('./shared/index.ts')
  return migrateSharedStore({ postgres, schema: config.schema, migrations })
}

function sharedUrls(config: StoreConfig): { postgres: string; redis: string } {
  // The config schema requires both for the shared engine; this guards direct callers.
  if (!config.postgres || !config.redis) throw new Error('store.engine shared needs store.postgres and store.redis URLs')
  return { postgres: config.postgres, redis: config.redis }
}
