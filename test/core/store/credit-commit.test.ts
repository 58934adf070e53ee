/**
 * `store.creditCommit` of the shared engine: `durable` (default) answers a charge after
 * PostgreSQL's WAL flush; `async` answers before it. The store conformance suite runs on `async`
 * too (conformance.test.ts); here: a gateway killed with SIGKILL still leaves every charge it
 * answered in the ledger under `async`, and a misspelt value is refused at load. What `async`
 * saves is a speed, measured in bench/shared-store-bench.ts (`--credit-commit async`), not asserted.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { loadConfig } from '../../../core/config/load.ts'
import { formatIssue } from '../../../core/config/source.ts'
import { freshPrefix, freshSchema, needServers, PG_URL, REDIS_URL } from '../../helpers/shared-servers.ts'
import { tempDir } from '../../helpers/temp.ts'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))
t.test('async: a gateway killed with SIGKILL mid-load leaves every answered charge in the ledger', async (t) => {
  if (!(await needServers(t))) return
  const schema = freshSchema(t)
  const keyPrefix = freshPrefix(t)
  const dir = tempDir('tollgate-credit-commit-')
  // A process that charges as a gateway does, 20 at a time, and prints each id once its commit resolved.
  const script = join(dir, 'charger.mts')
  writeFileSync(
    script,
    `import { openSharedStore } from ${JSON.stringify(join(ROOT, 'core/store/shared/index.ts'))}
const store = await openSharedStore({ postgres: ${JSON.stringify(PG_URL)}, redis: ${JSON.stringify(REDIS_URL)}, schema: ${JSON.stringify(schema)}, keyPrefix: ${JSON.stringify(keyPrefix)}, creditCommit: 'async' })
let next = 0
await Promise.all(Array.from({ length: 20 }, async () => {
  for (;;) {
    const id = 'c-' + next++
    const { ok } = await store.reserveCredits({ id, projectId: 'demo', period: '2026-11', allocation: 1000000, amount: 1, apiType: 'MIRROR' })
    if (!ok) continue
    await store.commitCredits(id)
    process.stdout.write(id + '\\n')
  }
}))
`,
  )
  const child = spawn(process.execPath, ['--import', 'tsx', script], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] })
  let output = ''
  child.stdout.setEncoding('utf8')
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the charger answered fewer than 2,000 charges in 30 s')), 30_000)
    child.stdout.on('data', (chunk: string) => {
      output += chunk
      if (output.split('\n').length > 2000) {
        clearTimeout(timer)
        resolve()
      }
    })
    child.on('exit', (code) => reject(new Error(`the charger exited early with ${code}`)))
  })
  child.kill('SIGKILL')
  await new Promise((resolve) => child.once('close', resolve))
  const answered = new Set(output.split('\n').filter((line) => /^c-\d+$/.test(line)))
  const client = new pg.Client({ connectionString: PG_URL })
  await client.connect()
  t.teardown(() => client.end())
  // A charge is its request's committed hold (the id is the key: one row per request at most).
  const { rows } = await client.query<{ id: string; charged: number }>(`SELECT id, charged FROM "${schema}".credit_holds WHERE id LIKE 'c-%' AND state = 'committed'`)
  const charged = new Map(rows.map((row) => [row.id, Number(row.charged)]))
  const lost = [...answered].filter((id) => charged.get(id) !== 1)
  // Draws of the killed instance's lease not folded yet (core migration 6) count as used, as every reader counts them.
  const { rows: [balance] } = await client.query<{ used: string }>(
    `SELECT b.used + coalesce((SELECT sum(d.amount) FROM "${schema}".credit_draws d JOIN "${schema}".credit_holds l ON l.id = d.lease_id WHERE l.project_id = b.project_id AND l.period = b.period), 0) AS used
     FROM "${schema}".credit_balances b WHERE b.project_id = 'demo'`,
  )
  t.comment(`figure: ${answered.size} charges answered before the SIGKILL, ${charged.size} in the ledger`)
  t.ok(answered.size >= 2000, 'the charger was killed mid-load')
  t.same(lost, [], 'every answered charge is in the ledger, for 1 credit')
  t.equal(Number(balance!.used), charged.size, 'the balance counts each charge once')
})

t.test('a misspelt creditCommit is refused at load, naming the field', async (t) => {
  const dir = tempDir('tollgate-credit-commit-config-')
  const file = join(dir, 'gateway.yaml')
  writeFileSync(file, `version: 1\nstore: { engine: shared, postgres: "postgres://x@127.0.0.1/db", redis: "redis://127.0.0.1:6379", creditCommit: sometimes }\nupstreams:\n  demo:\n    url: http://127.0.0.1:9\nroutes:\n  - name: demo\n    path: /demo/:id\n    upstream: demo\n`)
  const { config, issues } = await loadConfig(file, {})
  t.equal(config, undefined, 'no config')
  const messages = issues.map(formatIssue).join('\n')
  t.match(messages, /store\.creditCommit/, 'the message names store.creditCommit')
  t.match(messages, /durable/, 'and says what it may be')
})
