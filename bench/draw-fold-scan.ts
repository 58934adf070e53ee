/**
 * What an unfolded-draw sum costs after many draws and folds on one lease (issue 26, core migration 7,
 * core/store/shared/draw-fold-mark-migration.ts). No gateway, no wall-clock figure to compare: the
 * counts are PostgreSQL buffers (load-independent), the times only show the trend.
 *
 * On a fresh schema migrated to core version `--version` (default: the newest), one instance takes a
 * lease and runs `--cycles` cycles of a batch of `--draws` draws and a fold (a `shrink` of 0, as the
 * owner's periodic fold sends), with autovacuum off on `credit_draws` (as between two passes of the
 * launcher, 60 s apart by default). Every `--every` cycles it prints the buffers one draw batch
 * touches (`EXPLAIN (ANALYZE, BUFFERS) SELECT tollgate_apply(...)`: everything the function reads,
 * including the unfolded sum, and the instance, lease and balance rows, whose versions pile up on
 * their page between two prunings, so that column varies either way), and the buffers of the
 * unfolded sum itself as that version writes it.
 * `--hold-snapshot` keeps a REPEATABLE READ transaction open meanwhile (as any long reader, a
 * `pg_dump` or a replica with hot_standby_feedback would), so no dead draw row can be pruned either.
 *
 *   node --import tsx bench/draw-fold-scan.ts [--version 6|7] [--cycles 2000] [--draws 10] [--every 500]
 *       [--hold-snapshot] [--postgres URL]
 */
import pg from 'pg'
import { randomBytes } from 'node:crypto'
import { parseArgs } from 'node:util'
import { coreMigrations, runMigrations } from '../core/store/shared/index.ts'
import { openPgPool } from '../core/store/shared/pg.ts'

const { values } = parseArgs({
  options: {
    version: { type: 'string', default: String(coreMigrations.migrations.length) },
    cycles: { type: 'string', default: '2000' },
    draws: { type: 'string', default: '10' },
    every: { type: 'string', default: '500' },
    'hold-snapshot': { type: 'boolean', default: false },
    postgres: { type: 'string', default: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test' },
  },
})
const version = Number(values.version)
const [cycles, draws, every] = [Number(values.cycles), Number(values.draws), Number(values.every)]
const schema = `tg_bench_${randomBytes(5).toString('hex')}`

/** The unfolded sum of one lease as `tollgate_apply` of that version reads it (from 7: past the lease's fold mark, `$1`). */
const UNFOLDED: Record<number, string> = {
  6: `SELECT coalesce(sum(fd.amount), 0) FROM credit_draws fd WHERE fd.lease_id = 'lease-a'`,
  7: `SELECT coalesce(sum(fd.amount), 0) FROM credit_draws fd WHERE fd.lease_id = 'lease-a' AND fd.id > $1`,
}

async function main(): Promise<void> {
  const pool = openPgPool({ url: values.postgres!, schema, max: 1 })
  await runMigrations(pool, schema, [{ module: 'core', migrations: coreMigrations.migrations.slice(0, version) }])
  await pool.end()
  const client = new pg.Client({ connectionString: values.postgres, options: `-c search_path="${schema}"` })
  await client.connect()
  const holder = new pg.Client({ connectionString: values.postgres, options: `-c search_path="${schema}"` })
  await holder.connect()
  try {
    await client.query('ALTER TABLE credit_draws SET (autovacuum_enabled = false)')
    const apply = (ops: object[]) => client.query('SELECT tollgate_apply($1::jsonb, $2)', [JSON.stringify(ops), 'A'])
    await apply([{ o: 'lease', i: 'lease-a', p: 'proj', e: '2026-11', a: 1e12, n: 1e9, m: 1 }])
    if (values['hold-snapshot']) {
      await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ')
      await holder.query('SELECT count(*) FROM credit_balances')
    }
    console.log(`core version ${version}, ${draws} draws + 1 fold per cycle, autovacuum off on credit_draws${values['hold-snapshot'] ? ', an old snapshot held' : ''}`)
    console.log('cycles  folded draws  buffers/draw batch  ms/draw batch  unfolded sum: buffers  ms')
    let n = 0
    for (let cycle = 1; cycle <= cycles; cycle++) {
      const batch = Array.from({ length: draws }, () => ({ o: 'draw', i: `d${++n}`, l: 'lease-a', n: 1, t: 'X' }))
      if (cycle % every === 0 || cycle === 1) {
        const plan = await client.query<{ 'QUERY PLAN': string }>('EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT tollgate_apply($1::jsonb, $2)', [JSON.stringify(batch), 'A'])
        const top = (plan.rows[0]!['QUERY PLAN'] as unknown as { Plan: Record<string, number>; 'Execution Time': number }[])[0]!
        const mark = version >= 7 ? [(await client.query(`SELECT folded_through::text AS f FROM credit_holds WHERE id = 'lease-a'`)).rows[0].f] : []
        const sum = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${UNFOLDED[version]}`, mark)
        const sumTop = (sum.rows[0]!['QUERY PLAN'] as unknown as { Plan: Record<string, number>; 'Execution Time': number }[])[0]!
        const buffers = (p: Record<string, number>) => (p['Shared Hit Blocks'] ?? 0) + (p['Shared Read Blocks'] ?? 0)
        console.log(
          `${String(cycle).padStart(6)}  ${String((cycle - 1) * draws).padStart(12)}  ${String(buffers(top.Plan)).padStart(18)}  ${top['Execution Time'].toFixed(2).padStart(13)}  ${String(buffers(sumTop.Plan)).padStart(21)}  ${sumTop['Execution Time'].toFixed(3)}`,
        )
      } else {
        await apply(batch)
      }
      await apply([{ o: 'shrink', i: 'lease-a', n: 0 }])
    }
    const { rows } = await client.query(`SELECT n_live_tup, n_dead_tup FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'credit_draws'`, [schema])
    console.log(`credit_draws: ${JSON.stringify(rows[0])}`)
  } finally {
    await holder.query('ROLLBACK').catch(() => {})
    await holder.end()
    await client.query(`DROP SCHEMA "${schema}" CASCADE`).catch(() => {})
    await client.end()
  }
}

await main()
