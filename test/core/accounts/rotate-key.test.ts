/**
 * Key rotation and secret rotation in the settings store, on both engines: one transaction moves the
 * old hash to the grace key and gives the label the new one; the merged project accepts the old key
 * until the grace's end and the old secret until `previousSecret.until`; the audit has no hash.
 */
import t from 'tap'
import { hashCredential, ProjectDirectory } from '../../../core/projects/projects.ts'
import { blankProject, mergeProjects } from '../../../core/projects/project-settings.ts'
import { openSqliteStore } from '../../../core/store/sqlite.ts'
import { openSharedStore } from '../../../core/store/shared/index.ts'
import { SettingsConflict } from '../../../core/store/settings/types.ts'
import type { Store } from '../../../core/store/types.ts'
import { tempDir } from '../../helpers/temp.ts'
import { freshPrefix, freshSchema, needServers, PG_URL, REDIS_URL } from '../../helpers/shared-servers.ts'

const engines = [
  { name: 'sqlite', available: async () => true, open: async (): Promise<Store> => openSqliteStore({ dataDir: tempDir('tollgate-rotate-') }) },
  {
    name: 'shared',
    available: (t: Parameters<typeof needServers>[0]) => needServers(t),
    open: async (t: Parameters<typeof freshSchema>[0]): Promise<Store> => openSharedStore({ postgres: PG_URL, redis: REDIS_URL, schema: freshSchema(t), keyPrefix: freshPrefix(t) }),
  },
]

for (const engine of engines) {
  t.test(`rotation on the ${engine.name} engine`, async (t) => {
    if (!(await engine.available(t))) return
    const store = await engine.open(t)
    t.teardown(() => store.close())
    const seed = { ...blankProject('p'), keys: [{ label: 'main', hash: hashCredential('old-key'), disabled: false }] }
    const now = Date.now()
    await store.settings.rotateKey('p', 'main', { hash: hashCredential('new-key'), prefix: 'new-key' }, { label: 'main.rotated-x', hash: hashCredential('old-key'), expiresAt: now + 1000 }, 'ops')
    const directory = new ProjectDirectory(mergeProjects([seed], (await store.settings.read()).projects))
    t.equal(directory.lookupKey('new-key', now).ok, true)
    t.equal(directory.lookupKey('old-key', now).ok, true, 'during the grace')
    t.match(directory.lookupKey('old-key', now + 1000), { ok: false, reason: 'expired_key' }, 'after it')
    t.equal(directory.byId('p')!.keys.find((k) => k.label === 'main')!.prefix, 'new-key')
    await t.rejects(
      store.settings.rotateKey('p', 'main', { hash: hashCredential('new-key') }, { label: 'other', hash: hashCredential('x'), expiresAt: now }, 'ops'),
      SettingsConflict,
      'a hash already stored is refused, and nothing changes',
    )
    // Rotating again: the rotated run-time row moves its hash to the new grace key.
    await store.settings.rotateKey('p', 'main', { hash: hashCredential('newer-key') }, { label: 'main.rotated-y', hash: hashCredential('new-key'), expiresAt: now + 1000 }, 'ops')
    const again = new ProjectDirectory(mergeProjects([seed], (await store.settings.read()).projects))
    t.same(['newer-key', 'new-key', 'old-key'].map((k) => again.lookupKey(k, now).ok), [true, true, true])

    await store.settings.updateProject('p', { secretHash: hashCredential('s2'), previousSecret: { hash: hashCredential('s1'), until: now + 1000 } }, 'ops')
    const withSecret = new ProjectDirectory(mergeProjects([seed], (await store.settings.read()).projects))
    const project = withSecret.byId('p')!
    t.same(['s2', 's1', 's0'].map((s) => withSecret.secretMatches(project, s, now)), [true, true, false])
    t.same(['s2', 's1'].map((s) => withSecret.secretMatches(project, s, now + 1000)), [true, false], 'the old secret ends with the grace')
    const audit = JSON.stringify(await store.settings.audit({ projectId: 'p' }))
    t.notMatch(audit, /sha256:/, 'no hash in the audit trail')
    t.match(audit, /key\.rotate/)
    t.match(audit, /previousSecretUntil/)
  })
}
