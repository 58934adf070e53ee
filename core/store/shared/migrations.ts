/**
 * Versioned PostgreSQL migrations of the shared engine, per module.
 *
 * A module (the core store, the settings store, a plugin...) contributes a {@link MigrationSet}: its
 * name and an ordered list of `{ version, name, sql }`. {@link runMigrations} applies, in one
 * transaction per migration, every version above the one recorded in `tollgate_migrations` for that
 * module, under a transaction-scoped advisory lock so that gateways starting together never race.
 * A database that records a version above the newest a module's code knows was migrated by a newer
 * tollgate: it is refused with a message saying so, before anything is changed.
 */
import type pg from 'pg'

/** One step of a module's schema. Versions start at 1 and increase by 1. */
export interface Migration {
  version: number
  name: string
  sql: string
}

/** The migrations one module owns. */
export interface MigrationSet {
  /** Stable module name, e.g. `core` or `settings`. */
  module: string
  migrations: Migration[]
}

/** What {@link runMigrations} did. */
export interface MigrationReport {
  schema: string
  applied: { module: string; version: number; name: string }[]
  /** Version each module is at afterwards. */
  versions: Record<string, number>
}

/** A database newer than the code: never migrated down, never used. */
export class SchemaTooNewError extends Error {
  readonly code = 'schema_too_new'
}

/** Arbitrary but fixed: the advisory lock all tollgate migrators take (per database). */
const LOCK_KEY = 7_340_221_913

const LEDGER_TABLE = `
CREATE TABLE IF NOT EXISTS tollgate_migrations (
  module text NOT NULL,
  version integer NOT NULL,
  name text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (module, version)
)`

/** Quotes an SQL identifier. */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`
}

function checkSet(set: MigrationSet): void {
  set.migrations.forEach((migration, index) => {
    if (migration.version !== index + 1) {
      throw new Error(`migrations of module ${set.module} must be numbered 1, 2, 3...; found version ${migration.version} at position ${index + 1}`)
    }
  })
}

/**
 * Brings `schema` up to date with every set (created if missing), or refuses a schema newer than
 * the code. Uses one client of the pool for its whole run.
 *
 * @example
 * ```ts
 * const report = await runMigrations(pool, 'public', [coreMigrations, settingsMigrations])
 * ```
 */
export async function runMigrations(pool: pg.Pool, schema: string, sets: MigrationSet[]): Promise<MigrationReport> {
  for (const set of sets) checkSet(set)
  const client = await pool.connect()
  const report: MigrationReport = { schema, applied: [], versions: {} }
  try {
    await client.query('BEGIN')
    await client.query('SELECT pg_advisory_xact_lock($1)', [LOCK_KEY])
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schema)}`)
    await client.query(`SET LOCAL search_path TO ${quoteIdent(schema)}`)
    await client.query(LEDGER_TABLE)
    const { rows } = await client.query<{ module: string; version: number }>('SELECT module, max(version) AS version FROM tollgate_migrations GROUP BY module')
    const recorded = new Map(rows.map((row) => [row.module, Number(row.version)]))
    for (const set of sets) {
      const known = set.migrations.length
      const at = recorded.get(set.module) ?? 0
      if (at > known) {
        throw new SchemaTooNewError(
          `PostgreSQL schema "${schema}" holds version ${at} of the ${set.module} tables, but this tollgate knows only up to version ${known}: ` +
            'it was migrated by a newer tollgate. Run that version, or point store.schema at another schema.',
        )
      }
    }
    for (const set of sets) {
      const at = recorded.get(set.module) ?? 0
      for (const migration of set.migrations.slice(at)) {
        await client.query('SAVEPOINT migration')
        try {
          await client.query(migration.sql)
        } catch (error) {
          throw new Error(`migration ${set.module} ${migration.version} (${migration.name}) failed: ${(error as Error).message}`, { cause: error })
        }
        await client.query('INSERT INTO tollgate_migrations (module, version, name) VALUES ($1, $2, $3)', [set.module, migration.version, migration.name])
        report.applied.push({ module: set.module, version: migration.version, name: migration.name })
      }
      report.versions[set.module] = set.migrations.length
    }
    await client.query('COMMIT')
    return report
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {})
    throw error
  } finally {
    client.release()
  }
}
