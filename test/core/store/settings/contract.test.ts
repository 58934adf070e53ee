/**
 * The SettingsStore contract, run against both engines: SQLite on disk and PostgreSQL (a fresh
 * schema). Same calls, same answers; only the notification path differs (in-process vs NOTIFY).
 */
import t from 'tap'
import { join } from 'node:path'
import { openSqliteStore } from '../../../../core/store/sqlite.ts'
import { SettingsConflict, type SettingsListener, type SettingsStore } from '../../../../core/store/settings/types.ts'
import type { PostgresSettings } from '../../../../core/store/settings/postgres.ts'
import { hashCredential } from '../../../../core/projects/projects.ts'
import { tempDir } from '../../../helpers/temp.ts'
import { pgRun } from './pg-harness.ts'

const HASH_A = hashCredential('key-a')
const HASH_B = hashCredential('key-b')
const SECRET = hashCredential('secret')

async function waitUntil(check: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out')
    await new Promise((r) => setTimeout(r, 5))
  }
}

function contract(name: string, open: () => Promise<{ settings: SettingsStore; ready?: () => Promise<void>; close: () => Promise<void> }>) {
  t.test(name, async (t) => {
    const { settings, ready, close } = await open()
    t.teardown(close)
    const heard: Parameters<SettingsListener>[0][] = []
    const unsubscribe = settings.subscribe((change) => heard.push(change))
    await ready?.()

    t.same(await settings.read(), { version: 0, projects: [] }, 'empty at first')
    t.equal(await settings.version(), 0)

    const first = await settings.updateProject('acme', { features: { proveBatch: true }, credits: { allocation: 10 } }, 'alice')
    t.equal(first.seq, 1)
    t.same([first.action, first.actor, first.projectId], ['project.update', 'alice', 'acme'])
    await settings.updateProject('acme', { features: { tee: true }, credits: { period: 'day' }, plan: 'enterprise', secretHash: SECRET }, 'bob')
    let snapshot = await settings.read()
    t.equal(snapshot.version, 2)
    t.match(snapshot.projects, [
      { id: 'acme', created: false, plan: 'enterprise', features: { proveBatch: true, tee: true }, credits: { allocation: 10, period: 'day' }, secretHash: SECRET, keys: [], updatedBy: 'bob' },
    ])
    t.same(Object.keys(snapshot.projects[0].features!).sort(), ['proveBatch', 'tee'], 'only the features changed are overridden')

    const created = await settings.createProject('newco', { scopes: ['zkpaas'] }, 'alice')
    t.equal(created.action, 'project.create')
    await t.rejects(settings.createProject('newco', {}, 'alice'), SettingsConflict, 'a project the store has cannot be created again')
    t.equal(await settings.version(), 3, 'a refused change leaves no trace')

    await settings.addKey('newco', { label: 'main', hash: HASH_A }, 'alice')
    await t.rejects(settings.addKey('newco', { label: 'main', hash: HASH_B }, 'alice'), { code: 'key_exists' }, 'same label')
    await t.rejects(settings.addKey('acme', { label: 'other', hash: HASH_A }, 'alice'), { code: 'key_exists' }, 'same hash in another project')
    await settings.addKey('acme', { label: 'expiring', hash: HASH_B, expiresAt: Date.parse('2030-01-01T00:00:00Z') }, 'alice')
    await settings.updateKey('newco', 'main', { disabled: true }, 'carol')
    await settings.updateKey('acme', 'seed-key', { disabled: true, expiresAt: null }, 'carol')
    await settings.updateProject('acme', { secretHash: null }, 'carol')
    snapshot = await settings.read()
    t.equal(snapshot.version, 8)
    const acme = snapshot.projects.find((p) => p.id === 'acme')!
    const newco = snapshot.projects.find((p) => p.id === 'newco')!
    t.equal(acme.secretHash, null, 'the secret is removed, not merely unset')
    t.match(acme.keys, [
      { label: 'expiring', hash: HASH_B, disabled: false, expiresAt: Date.parse('2030-01-01T00:00:00Z') },
      { label: 'seed-key', disabled: true, expiresAt: null },
    ])
    t.equal(acme.keys[1].hash, undefined, 'a seed key state carries no hash')
    t.match(newco, { created: true, scopes: ['zkpaas'], keys: [{ label: 'main', hash: HASH_A, disabled: true, updatedBy: 'carol' }] })

    const audit = await settings.audit({ projectId: 'acme' })
    t.same(
      audit.map((c) => [c.seq, c.action, c.actor]),
      [
        [8, 'project.update', 'carol'],
        [7, 'key.update', 'carol'],
        [5, 'key.add', 'alice'],
        [2, 'project.update', 'bob'],
        [1, 'project.update', 'alice'],
      ],
    )
    t.same(audit[3].detail, { features: { tee: true }, credits: { period: 'day' }, plan: 'enterprise', secret: 'set' }, 'the audit names the secret change, not the hash')
    t.notOk(JSON.stringify(await settings.audit({ limit: 1000 })).includes(HASH_A), 'no key hash in the audit')
    t.equal((await settings.audit({ limit: 2 })).length, 2)

    await settings.resetProject('newco', 'dave')
    snapshot = await settings.read()
    t.same(snapshot.projects.map((p) => p.id), ['acme'], 'reset drops every override of the project')
    await settings.addKey('newco', { label: 'again', hash: HASH_A }, 'dave')
    t.pass('its key hash is free again')

    await waitUntil(() => heard.length >= 10)
    t.same(
      heard.map((c) => c.seq),
      [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
      'every change was announced, in order, refused ones excepted',
    )
    unsubscribe()
    await settings.updateProject('acme', { plan: 'x' }, 'eve')
    await new Promise((r) => setTimeout(r, 100))
    t.equal(heard.length, 10, 'an unsubscribed listener hears nothing')

    const before = await settings.read()
    const topUp = await settings.recordAction('acme', 'credits.top_up', { grant: 'topup:acme:k1', amount: 5 }, 'frank')
    t.same([topUp.seq, topUp.action, topUp.actor, topUp.detail], [12, 'credits.top_up', 'frank', { grant: 'topup:acme:k1', amount: 5 }])
    t.same((await settings.audit({ projectId: 'acme', limit: 1 }))[0], topUp, 'an action is in the audit trail')
    t.same((await settings.read()).projects, before.projects, 'and changes no setting')
  })
}

contract('sqlite engine', async () => {
  const store = openSqliteStore({ dataDir: join(tempDir('tollgate-settings-'), 'data') })
  return { settings: store.settings, close: () => store.close() }
})

contract('postgres engine', async () => {
  const run = await pgRun()
  const settings = run.instance()
  return { settings, ready: () => (settings as PostgresSettings).listening(), close: () => run.drop() }
})

t.test('sqlite settings survive a reopen', async (t) => {
  const dataDir = join(tempDir('tollgate-settings-'), 'data')
  const first = openSqliteStore({ dataDir })
  await first.settings.updateProject('acme', { plan: 'enterprise' }, 'alice')
  await first.close()
  const second = openSqliteStore({ dataDir })
  t.teardown(() => second.close())
  const snapshot = await second.settings.read()
  t.equal(snapshot.version, 1)
  t.equal(snapshot.projects[0].plan, 'enterprise')
})
