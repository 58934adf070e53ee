/**
 * The real PostgreSQL and Redis the shared-engine tests run against, a fresh PostgreSQL schema and
 * Redis key prefix per test (dropped and deleted at teardown), and the skip rule: without the
 * servers, `npm test` skips those tests with the reason; under CI (CI=true) that is a failure.
 *
 * URLs: TOLLGATE_TEST_POSTGRES (default postgres://postgres@127.0.0.1:5432/test) and
 * TOLLGATE_TEST_REDIS (default redis://127.0.0.1:6379).
 */
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { createClient } from 'redis'
import { coreMigrations, runMigrations } from '../../core/store/shared/index.ts'
import { openPgPool } from '../../core/store/shared/pg.ts'

export const PG_URL = process.env.TOLLGATE_TEST_POSTGRES ?? 'postgres://postgres@127.0.0.1:5432/test'
export const REDIS_URL = process.env.TOLLGATE_TEST_REDIS ?? 'redis://127.0.0.1:6379'

interface TapLike {
  teardown(fn: () => unknown): void
  fail(message: string): void
  skip(...args: any[]): unknown
  comment(message: string): void
}

let probed: Promise<string | undefined> | undefined

/** Why the servers cannot be used, or undefined when both answer. */
export function serversMissing(): Promise<string | undefined> {
  probed ??= (async () => {
    const problems: string[] = []
    const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 2000 })
    try {
      await client.connect()
      await client.query('SELECT 1')
    } catch (error) {
      problems.push(`PostgreSQL at ${PG_URL}: ${(error as Error).message || (error as { code?: string }).code}`)
    } finally {
      await client.end().catch(() => {})
    }
    const redis = createClient({ url: REDIS_URL, socket: { connectTimeout: 2000, reconnectStrategy: false } })
    redis.on('error', () => {})
    try {
      await redis.connect()
      await redis.ping()
    } catch (error) {
      problems.push(`Redis at ${REDIS_URL}: ${(error as Error).message}`)
    } finally {
      if (redis.isOpen) await redis.close().catch(() => {})
    }
    return problems.length ? problems.join('; ') : undefined
  })()
  return probed
}

/**
 * True when the servers answer. Otherwise the test is skipped with the reason, or failed under CI
 * (where .ci/run starts the servers, so a missing one is a broken setup, not a reason to skip).
 */
export async function needServers(t: TapLike): Promise<boolean> {
  const missing = await serversMissing()
  if (missing === undefined) return true
  if (process.env.CI === 'true') t.fail(`the shared-engine tests need PostgreSQL and Redis under CI: ${missing}`)
  else t.skip(`shared engine not tested: ${missing} (start them as .ci/run does, or set TOLLGATE_TEST_POSTGRES / TOLLGATE_TEST_REDIS)`)
  return false
}

/** A fresh PostgreSQL schema name, dropped (with everything in it) at teardown. */
export function freshSchema(t: Pick<TapLike, 'teardown'>): string {
  const schema = `tg_test_${randomBytes(6).toString('hex')}`
  t.teardown(() => dropSchema(schema))
  return schema
}

/** A fresh schema (see {@link freshSchema}) migrated to core version `version` (default: the latest). */
export async function schemaAtCoreVersion(t: Pick<TapLike, 'teardown'>, version = coreMigrations.migrations.length): Promise<string> {
  const schema = freshSchema(t)
  const pool = openPgPool({ url: PG_URL, schema, max: 1 })
  try {
    await runMigrations(pool, schema, [{ module: 'core', migrations: coreMigrations.migrations.slice(0, version) }])
  } finally {
    await pool.end()
  }
  return schema
}

export async function dropSchema(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: PG_URL })
  await client.connect()
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
  } finally {
    await client.end()
  }
}

/** A fresh Redis key prefix; its keys are deleted at teardown. */
export function freshPrefix(t: Pick<TapLike, 'teardown'>): string {
  const prefix = `tgtest:${randomBytes(6).toString('hex')}:`
  t.teardown(() => deletePrefix(prefix))
  return prefix
}

/** Deletes every key under `prefix` ("flush Redis" for one test, leaving other users' keys alone). */
export async function deletePrefix(prefix: string, url = REDIS_URL): Promise<number> {
  const redis = createClient({ url })
  redis.on('error', () => {})
  await redis.connect()
  let deleted = 0
  try {
    for await (const keys of redis.scanIterator({ MATCH: `${prefix}*`, COUNT: 500 })) {
      if (keys.length) deleted += await redis.del(keys)
    }
  } finally {
    await redis.close()
  }
  return deleted
}

/** Runs one SQL statement in `schema` and returns its rows. */
export async function sql<T extends pg.QueryResultRow = Record<string, unknown>>(schema: string, text: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: PG_URL, options: `-c search_path="${schema}"` })
  await client.connect()
  try {
    return (await client.query<T>(text, params)).rows
  } finally {
    await client.end()
  }
}
