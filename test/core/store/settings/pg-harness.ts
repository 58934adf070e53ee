/**
 * A fresh PostgreSQL schema per test run on the local server (127.0.0.1:5432, database `test`),
 * with the settings migrations applied; dropped at the end. Each "instance" gets its own pool and
 * its own LISTEN client, as separate gateway processes would.
 */
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { PostgresSettings, SETTINGS_MIGRATIONS } from '../../../../core/store/settings/postgres.ts'

export const PG = { host: '127.0.0.1', port: 5432, user: 'postgres', database: 'test' }

export interface PgRun {
  schema: string
  channel: string
  /** A new instance: its own pool and LISTEN client. */
  instance(): PostgresSettings
  /** Pools and settings opened so far (for the test to use, e.g. to kill a LISTEN backend). */
  pools: pg.Pool[]
  drop(): Promise<void>
}

export async function pgRun(): Promise<PgRun> {
  const schema = `tg_settings_${randomBytes(6).toString('hex')}`
  const admin = new pg.Client(PG)
  await admin.connect()
  try {
    await admin.query(`CREATE SCHEMA ${schema}`)
    await admin.query(`SET search_path = ${schema}`)
    for (const migration of [...SETTINGS_MIGRATIONS].sort((a, b) => a.version - b.version)) await admin.query(migration.sql)
  } finally {
    await admin.end()
  }
  const pools: pg.Pool[] = []
  const instances: PostgresSettings[] = []
  return {
    schema,
    channel: schema,
    pools,
    instance() {
      const pool = new pg.Pool({ ...PG, max: 4, options: `-c search_path=${schema}` })
      pools.push(pool)
      const settings = new PostgresSettings({
        pool,
        channel: schema,
        openListener: async () => {
          const client = new pg.Client({ ...PG, application_name: `${schema}-listen` })
          await client.connect()
          return client
        },
        onListenerError: () => {},
      })
      instances.push(settings)
      return settings
    },
    async drop() {
      for (const settings of instances) await settings.close()
      for (const pool of pools) await pool.end()
      const client = new pg.Client(PG)
      await client.connect()
      try {
        await client.query(`DROP SCHEMA ${schema} CASCADE`)
      } finally {
        await client.end()
      }
    },
  }
}
