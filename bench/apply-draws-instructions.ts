/**
 * Instructions a PostgreSQL backend spends on ONE `tollgate_apply` batch of draws, split by the
 * function's statements (issue 26): a count that does not move with the machine's load, unlike the
 * CPU time of bench/apply-draws-cpu.ts. User space only: the kernel's part (the WAL flush's
 * fdatasync, the socket) is not counted.
 *
 * It needs a private cluster whose postmaster runs under callgrind, so that every backend it forks
 * is counted and dumps a profile at the function's entry, its exit and after each SQL statement:
 *
 *   sudo -u postgres initdb -D /tmp/cg/data -A trust -U postgres && sudo -u postgres createdb ... (see below)
 *   sudo -u postgres valgrind --tool=callgrind --callgrind-out-file=/tmp/cg/cg.%p \
 *     --dump-before=plpgsql_exec_function --dump-after=plpgsql_exec_function \
 *     --dump-after=SPI_execute_plan_with_paramlist --dump-after=SPI_cursor_open_with_paramlist \
 *     /usr/lib/postgresql/15/bin/postgres -D /tmp/cg/data -p 43210 -c listen_addresses=127.0.0.1 \
 *     -c unix_socket_directories=/tmp/cg -c autovacuum=off -c shared_buffers=128MB &
 *   psql -h 127.0.0.1 -p 43210 -U postgres -c 'CREATE DATABASE test'
 *
 * Then, per core version: a fresh schema, one lease, `--warmup` batches, `--calls` batches of
 * `--batch` draws on one connection (named statement, as the gateway sends it), then the
 * connection ends and the backend writes its dumps. The last batch's dumps are printed: the part
 * before the function (the previous commit, the protocol, the outer executor), then each statement
 * (the dump after it holds the PL/pgSQL work since the previous one), then the function's exit.
 *
 *   node --import tsx bench/apply-draws-instructions.ts [--versions 8,10] [--batch 4] [--warmup 20]
 *       [--calls 10] [--postgres postgres://postgres@127.0.0.1:43210/test] [--dumps /tmp/cg]
 */
import pg from 'pg'
import { randomBytes } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { coreMigrations, runMigrations } from '../core/store/shared/index.ts'
import { openPgPool } from '../core/store/shared/pg.ts'

const { values } = parseArgs({
  options: {
    versions: { type: 'string', default: `8,${coreMigrations.migrations.length}` },
    batch: { type: 'string', default: '4' },
    warmup: { type: 'string', default: '20' },
    calls: { type: 'string', default: '10' },
    postgres: { type: 'string', default: 'postgres://postgres@127.0.0.1:43210/test' },
    dumps: { type: 'string', default: '/tmp/cg' },
  },
})
const [batch, warmup, calls] = [values.batch, values.warmup, values.calls].map(Number) as [number, number, number]
const url = values.postgres!
const APPLY = { name: 'apply', text: "SELECT tollgate_apply($1::jsonb, 'A') AS r" }

/** The dumps of backend `pid`, in order: what triggered each and its instruction total. */
function dumpsOf(pid: number): { trigger: string; total: number }[] {
  return readdirSync(values.dumps!)
    .filter((name) => name.startsWith(`cg.${pid}.`))
    .map((name) => ({ part: Number(name.split('.')[2]), text: readFileSync(`${values.dumps}/${name}`, 'utf8') }))
    .sort((a, b) => a.part - b.part)
    .map(({ text }) => ({ trigger: /^desc: Trigger: (.*)$/m.exec(text)?.[1] ?? '?', total: Number(/^totals: (\d+)/m.exec(text)?.[1] ?? 0) }))
}

async function measure(version: number): Promise<void> {
  const schema = `tg_bench_${randomBytes(5).toString('hex')}`
  const pool = openPgPool({ url, schema, max: 1 })
  await runMigrations(pool, schema, [{ module: 'core', migrations: coreMigrations.migrations.slice(0, version) }])
  await pool.end()
  const client = new pg.Client({ connectionString: url, options: `-c search_path="${schema}"` })
  await client.connect()
  const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid
  await client.query({ ...APPLY, values: [JSON.stringify([{ o: 'lease', i: 'lease-a', p: 'proj', e: '2026-11', a: 1e12, n: 1e9, m: 1 }])] })
  let sequence = 0
  for (let i = 0; i < warmup + calls; i++) {
    const ops = Array.from({ length: batch }, () => ({ o: 'draw', i: `d${++sequence}`, l: 'lease-a', n: 1, t: 'api' }))
    const { rows } = await client.query<{ r: unknown[] }>({ ...APPLY, values: [JSON.stringify(ops)] })
    if (rows[0]!.r.some((answer) => answer !== false)) throw new Error(`a draw answered ${JSON.stringify(rows[0]!.r)}`)
  }
  await client.end()
  // The backend writes its last dump when it exits.
  let dumps: { trigger: string; total: number }[] = []
  for (let wait = 0; wait < 300; wait++) {
    await new Promise((resolve) => setTimeout(resolve, 200))
    dumps = dumpsOf(pid)
    if (dumps.at(-1)?.trigger === 'Program termination') break
  }
  const start = dumps.findLastIndex((dump) => dump.trigger.startsWith('--dump-before'))
  const last = dumps.slice(start, dumps.findLastIndex((dump) => dump.trigger.includes('dump-after=plpgsql_exec_function')) + 1)
  if (start < 0 || last.length === 0) throw new Error(`no callgrind dumps of backend ${pid} in ${values.dumps}: is the cluster running under callgrind with the dump options?`)
  console.log(`core v${version}, batch ${batch}: ${last.reduce((sum, dump) => sum + dump.total, 0).toLocaleString('en')} instructions in the last call`)
  for (const dump of last) console.log(`  ${dump.total.toLocaleString('en').padStart(10)}  up to ${dump.trigger.replace(/^--dump-/, '')}`)
  const admin = new pg.Client({ connectionString: url })
  await admin.connect()
  await admin.query(`DROP SCHEMA "${schema}" CASCADE`)
  await admin.end()
}

for (const version of values.versions!.split(',').map(Number)) await measure(version)
