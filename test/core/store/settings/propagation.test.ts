/**
 * A change made on instance A is enforced on instance B within 5 s: two PostgresSettings on two
 * pools with two LISTEN connections (as two gateway processes have), each feeding a
 * ProjectSettingsSync that keeps a ProjectDirectory, the object the auth plugins look keys up in.
 * Propagation times are measured and printed; the NOTIFY path, the reconnect after a lost LISTEN
 * connection and the periodic backstop (with notifications never arriving) are each exercised.
 */
import t from 'tap'
import pg from 'pg'
import pino from 'pino'
import { hashCredential, ProjectDirectory, type Project } from '../../../../core/projects/projects.ts'
import { ProjectSettingsSync } from '../../../../core/projects/project-settings.ts'
import { PostgresSettings } from '../../../../core/store/settings/postgres.ts'
import { PG, pgRun } from './pg-harness.ts'

const SEED_KEY = 'tk_seed_key_0123456789'
const NEW_KEY = 'tk_new_key_0123456789'
const seed: Project[] = [
  {
    id: 'acme',
    name: 'acme',
    plan: 'enterprise',
    scopes: new Set(['zkpaas']),
    credits: { allocation: 100, period: 'month' },
    features: { proveBatch: false, sponsoredWallet: false, relayToConfidentialSpace: false, tee: false, workstation: false },
    keys: [{ label: 'main', hash: hashCredential(SEED_KEY), disabled: false }],
    settings: {},
  },
]
const log = pino({ level: 'silent' })

/** One gateway instance's view: a directory kept in sync with the store. */
async function instance(settings: PostgresSettings, resyncMs = 2000) {
  const directory = new ProjectDirectory(seed)
  const sync = new ProjectSettingsSync(settings, log, () => ({ projects: directory, seedProjects: seed }))
  await sync.start(resyncMs)
  sync.apply(directory, seed)
  await settings.listening()
  return { directory, sync }
}

/** Milliseconds until `check` holds (polled every millisecond); fails past 5 s. */
async function propagation(check: () => boolean): Promise<number> {
  const started = performance.now()
  while (!check()) {
    if (performance.now() - started > 5000) return Infinity
    await new Promise((r) => setTimeout(r, 1))
  }
  return performance.now() - started
}

t.test('a change on instance A is enforced on instance B within 5 s', async (t) => {
  const run = await pgRun()
  const storeA = run.instance()
  const storeB = run.instance()
  const a = await instance(storeA)
  const b = await instance(storeB)
  t.teardown(async () => {
    a.sync.stop()
    b.sync.stop()
    await run.drop()
  })
  const timings: Record<string, number> = {}

  t.equal(b.directory.byId('acme')!.features.proveBatch, false)
  await storeA.updateProject('acme', { features: { proveBatch: true } }, 'alice')
  timings.featureToggle = await propagation(() => b.directory.byId('acme')!.features.proveBatch)
  t.ok(timings.featureToggle < 5000, `feature toggle on B after ${timings.featureToggle.toFixed(1)} ms`)

  t.same(b.directory.lookupKey(NEW_KEY), { ok: false, reason: 'unknown_key' })
  await storeA.addKey('acme', { label: 'ci', hash: hashCredential(NEW_KEY) }, 'alice')
  timings.keyAdded = await propagation(() => b.directory.lookupKey(NEW_KEY).ok)
  t.ok(timings.keyAdded < 5000, `added key accepted on B after ${timings.keyAdded.toFixed(1)} ms`)

  await storeA.updateKey('acme', 'main', { disabled: true }, 'alice')
  timings.keyDisabled = await propagation(() => !b.directory.lookupKey(SEED_KEY).ok)
  t.ok(timings.keyDisabled < 5000, `disabled key refused on B after ${timings.keyDisabled.toFixed(1)} ms`)
  t.match(b.directory.lookupKey(SEED_KEY), { ok: false, reason: 'disabled_key' })

  // And the other way round: B changes, A follows.
  await storeB.updateProject('acme', { credits: { allocation: 7 } }, 'bob')
  timings.creditsBtoA = await propagation(() => a.directory.byId('acme')!.credits.allocation === 7)
  t.ok(timings.creditsBtoA < 5000, `credit allocation on A after ${timings.creditsBtoA.toFixed(1)} ms`)
  t.comment(`propagation over LISTEN/NOTIFY (ms): ${JSON.stringify(Object.fromEntries(Object.entries(timings).map(([k, v]) => [k, Number(v.toFixed(1))])))}`)
})

t.test('a lost LISTEN connection is reopened and what it missed is re-read', async (t) => {
  const run = await pgRun()
  const storeA = run.instance()
  const storeB = run.instance()
  const b = await instance(storeB, 60_000) // backstop out of the way: the reconnect must do it
  t.teardown(async () => {
    b.sync.stop()
    await run.drop()
  })
  const killer = new pg.Client(PG)
  await killer.connect()
  t.teardown(() => killer.end())
  const killed = await killer.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [`${run.schema}-listen`])
  t.equal(killed.rowCount, 1, "B's LISTEN backend terminated")
  await storeA.updateProject('acme', { plan: 'changed-while-deaf' }, 'alice')
  const ms = await propagation(() => b.directory.byId('acme')!.plan === 'changed-while-deaf')
  t.ok(ms < 5000, `seen after the reconnect, ${ms.toFixed(0)} ms`)
  t.comment(`re-read after the LISTEN connection was killed: ${ms.toFixed(0)} ms (reconnect after 1 s)`)
})

t.test('the periodic re-read catches a change whose notification never arrives', async (t) => {
  const run = await pgRun()
  const storeA = run.instance()
  // B listens on another channel: it never hears A. Only the version check (every 2 s) can help.
  const pool = new pg.Pool({ ...PG, max: 2, options: `-c search_path=${run.schema}` })
  const deaf = new PostgresSettings({
    pool,
    channel: `${run.channel}_elsewhere`,
    openListener: async () => {
      const client = new pg.Client(PG)
      await client.connect()
      return client
    },
  })
  const b = await instance(deaf, 2000)
  t.teardown(async () => {
    b.sync.stop()
    await deaf.close()
    await pool.end()
    await run.drop()
  })
  await storeA.updateProject('acme', { features: { tee: true } }, 'alice')
  const ms = await propagation(() => b.directory.byId('acme')!.features.tee)
  t.ok(ms < 5000, `seen by the backstop after ${ms.toFixed(0)} ms`)
  t.ok(ms > 50, 'not through a notification')
  t.comment(`backstop re-read: ${ms.toFixed(0)} ms (period 2 s)`)
})
