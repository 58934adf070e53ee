/**
 * The migration sets the shared engine applies (core first, then every module it serves), the
 * `tollgate migrate` entry point, and the settings' NOTIFY channel of a schema.
 */
import type pg from 'pg'
import type { SharedStoreOptions } from './options.ts'
import { runMigrations, type MigrationReport, type MigrationSet } from './migrations.ts'
import { openPgPool } from './pg.ts'
import { coreMigrations } from './schema.ts'
import { documentRevisionMigrations } from './documents.ts'
import { usageMigrations } from './usage.ts'
import { carryMigrations } from './credit-carries.ts'
import { SETTINGS_MIGRATIONS, DEFAULT_SETTINGS_CHANNEL } from '../settings/postgres.ts'
import { ACCOUNTS_MIGRATIONS } from '../accounts/postgres.ts'

/** Every set of the engine's own tables, in the order they are applied (core first). */
export function engineMigrations(): MigrationSet[] {
  return [coreMigrations, documentRevisionMigrations, settingsMigrations, accountsMigrations, usageMigrations, carryMigrations]
}

/** Applies the migrations of `sets` (core first) to the configured schema and returns what it did. */
export async function migrateSharedStore(options: Pick<SharedStoreOptions, 'postgres' | 'schema' | 'migrations'>): Promise<MigrationReport> {
  const pool = openPgPool({ url: options.postgres, schema: options.schema ?? 'public', max: 1 })
  try {
    return await runMigrations(pool, options.schema ?? 'public', [...engineMigrations(), ...(options.migrations ?? [])])
  } finally {
    await pool.end()
  }
}

/** The run-time settings tables (core/store/settings/postgres.ts), migrated with the core ones. */
export const settingsMigrations: MigrationSet = { module: 'settings', migrations: [...SETTINGS_MIGRATIONS] }

/** Users, project owners and admin sessions (core/store/accounts/postgres.ts). */
export const accountsMigrations: MigrationSet = { module: 'accounts', migrations: [...ACCOUNTS_MIGRATIONS] }

/**
 * NOTIFY channel of the settings: channels are per database, not per schema, so a schema other than
 * `public` gets its own (an identifier: lower-case letters, digits and `_`, at most 63 bytes).
 */
export function settingsChannel(schema: string): string {
  if (schema === 'public') return DEFAULT_SETTINGS_CHANNEL
  return `${DEFAULT_SETTINGS_CHANNEL}_${schema.toLowerCase().replace(/[^a-z0-9_]/g, '_')}`.slice(0, 63)
}

/** Throws unless `schema` holds exactly the versions of `sets` (`migrate: false`: `tollgate migrate` applies them). */
export async function checkSchemaCurrent(pool: pg.Pool, schema: string, sets: MigrationSet[]): Promise<void> {
  const { rows } = await pool.query<{ module: string; version: number }>('SELECT module, max(version) AS version FROM tollgate_migrations GROUP BY module').catch((error) => {
    throw new Error(`PostgreSQL schema "${schema}" has no tollgate tables; run \`tollgate migrate\``, { cause: error })
  })
  const at = new Map(rows.map((row) => [row.module, Number(row.version)]))
  for (const set of sets) {
    const version = at.get(set.module) ?? 0
    if (version !== set.migrations.length) {
      throw new Error(`PostgreSQL schema "${schema}" holds version ${version} of the ${set.module} tables; this tollgate needs ${set.migrations.length}. Run \`tollgate migrate\`.`)
    }
  }
}
