/**
 * Versioned migrations of the shared engine against a real PostgreSQL (fresh schema per test):
 * applied once at open and by `tollgate migrate`, other modules' sets applied beside the core one,
 * and a schema newer than the code refused with a message that says so.
 */
import t from 'tap'
import { spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { coreMigrations, migrateSharedStore, openSharedStore, runMigrations } from '../../../core/store/shared/index.ts'
import { openPgPool } from '../../../core/store/shared/pg.ts'
import { BIN } from '../../helpers/gateway-process.ts'
import { tempDir } from '../../helpers/temp.ts'
import { freshPrefix, freshSchema, needServers, PG_URL, REDIS_URL, sql } from '../../helpers/shared-servers.ts'

/** The core version this tollgate migrates to. */
const CORE = coreMigrations.migrations.length

t.test('shared engine migrations', async (t) => {
  if (!(await needServers(t))) return

  t.test('applied at open, once; a module contributes its own set', async (t) => {
    const schema = freshSchema(t)
    const keyPrefix = freshPrefix(t)
    const extra = { module: 'settings-test', migrations: [{ version: 1, name: 'a table', sql: 'CREATE TABLE extra_things (id int PRIMARY KEY)' }] }
    const first = await openSharedStore({ postgres: PG_URL, redis: REDIS_URL, schema, keyPrefix, migrations: [extra] })
    await first.close()
    const second = await openSharedStore({ postgres: PG_URL, redis: REDIS_URL, schema, keyPrefix, migrations: [extra] })
    await second.close()
    const rows = await sql<{ module: string; version: number }>(schema, 'SELECT module, version FROM tollgate_migrations ORDER BY module, version')
    t.same(rows, [
      { module: 'accounts', version: 1 },
      { module: 'core', version: 1 },
      { module: 'core', version: 2 },
      { module: 'core', version: 3 },
      { module: 'core', version: 4 },
      { module: 'core', version: 5 },
      { module: 'core', version: 6 },
      { module: 'core', version: 7 },
      { module: 'core', version: 8 },
      { module: 'core', version: 9 },
      { module: 'core', version: 10 },
      { module: 'core', version: 11 },
      { module: 'core', version: 12 },
      { module: 'core', version: 13 },
      { module: 'credit-carries', version: 1 },
      { module: 'document-revisions', version: 1 },
      { module: 'settings', version: 1 },
      { module: 'settings', version: 2 },
      { module: 'settings-test', version: 1 },
      { module: 'usage', version: 1 },
    ], 'each migration recorded once (the run-time settings, per-route usage and credit carry tables are modules of their own)')
    t.same(await sql(schema, 'SELECT count(*)::int AS n FROM extra_things'), [{ n: 0 }], "the module's table exists")
    const report = await migrateSharedStore({ postgres: PG_URL, schema, migrations: [extra] })
    t.same(report.applied, [], 'nothing left to apply')
  })

  t.test('a schema at core 1 with holds in flight upgrades to the latest core and settles them', async (t) => {
    const schema = freshSchema(t)
    const pool = openPgPool({ url: PG_URL, schema, max: 1 })
    t.teardown(() => pool.end())
    await runMigrations(pool, schema, [{ module: 'core', migrations: coreMigrations.migrations.slice(0, 1) }])
    const reserve = (i: string) => ({ o: 'reserve', i, p: 'up', e: '2026-11', a: 10, n: 4, t: 'MIRROR' })
    const v1 = await sql<{ r: unknown }>(schema, 'SELECT tollgate_apply($1::jsonb, $2) AS r', [JSON.stringify([reserve('old-a'), reserve('old-b')]), 'old-instance'])
    t.same(v1[0]!.r, [[true, 4], [true, 8]], 'reserved by the core 1 function')
    const store = await openSharedStore({ postgres: PG_URL, redis: REDIS_URL, schema, keyPrefix: freshPrefix(t) })
    t.teardown(() => store.close())
    t.same(await sql(schema, "SELECT max(version)::int AS v FROM tollgate_migrations WHERE module = 'core'"), [{ v: coreMigrations.migrations.length }])
    // The holds of core 1 are settled by the latest function; the balance stays exact.
    await store.commitCredits('old-a')
    await store.releaseCredits('old-b')
    t.match(await store.reserveCredits({ id: 'new-a', projectId: 'up', period: '2026-11', allocation: 10, amount: 7, apiType: 'MIRROR' }), { ok: false, balance: { used: 4 } })
    t.match(await store.reserveCredits({ id: 'new-b', projectId: 'up', period: '2026-11', allocation: 10, amount: 6, apiType: 'MIRROR' }), { ok: true, balance: { used: 10 } })
    t.same(await sql(schema, "SELECT used::int, pending::int FROM credit_balances WHERE project_id = 'up'"), [{ used: 4, pending: 6 }])
  })

  t.test('a schema newer than the code is refused, untouched', async (t) => {
    const schema = freshSchema(t)
    await migrateSharedStore({ postgres: PG_URL, schema })
    await sql(schema, "INSERT INTO tollgate_migrations (module, version, name) VALUES ('core', $1, 'from the future')", [coreMigrations.migrations.length + 1])
    const opening = openSharedStore({ postgres: PG_URL, redis: REDIS_URL, schema, keyPrefix: freshPrefix(t) })
    await t.rejects(opening, { name: 'Error', code: 'schema_too_new' })
    await t.rejects(migrateSharedStore({ postgres: PG_URL, schema }), new RegExp(`holds version ${CORE + 1} of the core tables, but this tollgate knows only up to version ${CORE}`))
  })

  t.test('migrations of a set must be numbered 1, 2, 3...', async (t) => {
    const schema = freshSchema(t)
    await t.rejects(migrateSharedStore({ postgres: PG_URL, schema, migrations: [{ module: 'bad', migrations: [{ version: 2, name: 'x', sql: 'SELECT 1' }] }] }), /numbered 1, 2, 3/)
  })

  t.test('`tollgate migrate -c FILE` applies them and reports; a newer schema exits 1', async (t) => {
    const schema = freshSchema(t)
    const dir = tempDir('tollgate-migrate-')
    const file = join(dir, 'gateway.yaml')
    writeFileSync(file, `version: 1\nstore: { engine: shared, postgres: '\${DATABASE_URL}', redis: '\${REDIS_URL}', schema: ${schema} }\nroutes: []\n`)
    const env = { ...process.env, DATABASE_URL: PG_URL, REDIS_URL }
    const run = () => spawnSync(process.execPath, [BIN, 'migrate', '-c', file], { env, encoding: 'utf8' })
    const first = run()
    t.equal(first.status, 0, first.stderr)
    t.match(first.stdout, /applied core 1: credits, usage, documents, instances/)
    t.match(first.stdout, /applied core 2: credit grants/)
    t.match(first.stdout, /applied core 3: tollgate_apply: one write per balance row per batch/)
    t.match(first.stdout, /applied core 4: credit leases: lease, draw and shrink ops/)
    t.match(first.stdout, /applied core 5: one lock order/)
    t.match(first.stdout, /applied core 6: append-only draws/)
    t.match(first.stdout, /applied core 7: draw ids and a fold mark per lease/)
    t.match(first.stdout, /applied core 8: tollgate_apply: a batch's draws on a share-locked lease/)
    t.match(first.stdout, /applied core 9: tollgate_apply: the balance of a draw settled in its own batch is locked up front/)
    t.match(first.stdout, /applied core 10: tollgate_apply: typed literals; a batch of draws on one lease/)
    t.match(first.stdout, /applied document-revisions 1: documents.revision and its trigger/)
    t.match(first.stdout, /applied settings 1: settings: projects, keys, audit/)
    t.match(first.stdout, /applied accounts 1: accounts: users, project owners, sessions/)
    t.match(first.stdout, /applied usage 1: usage per route and status class/)
    t.match(first.stdout, /applied credit-carries 1: credit carries: unspent grants moved by a schedule change/)
    t.match(first.stdout, new RegExp(`schema "${schema}" is current \\(core ${CORE}, document-revisions 1, settings 2, accounts 1, usage 1, credit-carries 1\\); ${CORE + 6} migration\\(s\\) applied`))
    await sql(schema, "INSERT INTO tollgate_migrations (module, version, name) VALUES ('core', $1, 'newer')", [CORE + 2])
    const refused = run()
    t.equal(refused.status, 1)
    t.match(refused.stderr, new RegExp(`holds version ${CORE + 2} of the core tables, but this tollgate knows only up to version ${CORE}`))
    const missing = spawnSync(process.execPath, [BIN, 'migrate', '-c', file], { env: { ...process.env, DATABASE_URL: '', REDIS_URL: '' }, encoding: 'utf8' })
    t.equal(missing.status, 1, 'a config without the URLs is refused by the schema')
  })
})
