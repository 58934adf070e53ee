/**
 * Which wins when gateway.yaml and run-time settings disagree, and the live directory swap.
 */
import t from 'tap'
import { hashCredential, ProjectDirectory, type Project } from '../../../core/projects/projects.ts'
import { mergeProjects } from '../../../core/projects/project-settings.ts'
import type { ProjectOverride } from '../../../core/store/settings/types.ts'

const base: Project = {
  id: 'acme',
  name: 'Acme',
  plan: 'standard',
  scopes: new Set(['zkpaas']),
  credits: { allocation: 100, period: 'month' },
  features: { proveBatch: false, sponsoredWallet: true, relayToConfidentialSpace: false, tee: false, workstation: false },
  secretHash: hashCredential('s'),
  keys: [
    { label: 'main', hash: hashCredential('k-main'), disabled: false },
    { label: 'old', hash: hashCredential('k-old'), disabled: false, expiresAt: 1000 },
  ],
  settings: { colour: 'red' },
}
const override = (o: Partial<ProjectOverride>): ProjectOverride => ({ id: 'acme', created: false, keys: [], updatedAt: 0, updatedBy: 'x', ...o })

t.test('run-time fields win over the yaml; unset fields keep the yaml values', async (t) => {
  const [merged] = mergeProjects([base], [override({ plan: 'enterprise', features: { proveBatch: true }, credits: { allocation: 5 } })])
  t.equal(merged.plan, 'enterprise')
  t.same(merged.features, { proveBatch: true, sponsoredWallet: true, relayToConfidentialSpace: false, tee: false, workstation: false }, 'features merge one by one')
  t.same(merged.credits, { allocation: 5, period: 'month' })
  t.same([...merged.scopes], ['zkpaas'])
  t.equal(merged.secretHash, base.secretHash)
  t.same(merged.settings, { colour: 'red' })
  t.equal(merged.name, 'Acme')
  t.same(mergeProjects([base], []), [base], 'no override: the yaml project as is')
})

t.test('keys: added, seed key disabled, expiry cleared; secret removed', async (t) => {
  const [merged] = mergeProjects(
    [base],
    [
      override({
        secretHash: null,
        keys: [
          { label: 'ci', hash: hashCredential('k-ci'), disabled: false, updatedAt: 0, updatedBy: 'x' },
          { label: 'main', disabled: true, updatedAt: 0, updatedBy: 'x' },
          { label: 'old', expiresAt: null, updatedAt: 0, updatedBy: 'x' },
          { label: 'ghost', disabled: true, updatedAt: 0, updatedBy: 'x' },
        ],
      }),
    ],
  )
  t.equal(merged.secretHash, undefined)
  t.same(
    merged.keys.map((k) => [k.label, k.disabled, k.expiresAt]),
    [
      ['main', true, undefined],
      ['old', false, undefined],
      ['ci', false, undefined],
    ],
    'a state change for a label the yaml lacks is ignored',
  )
  t.equal(base.keys[0].disabled, false, 'the seed is not mutated')
  const directory = new ProjectDirectory([base])
  t.equal(directory.lookupKey('k-old', 2000).ok, false, 'expired in the yaml')
  directory.replace([merged])
  t.match(directory.lookupKey('k-main'), { ok: false, reason: 'disabled_key', key: { disabled: true } })
  t.equal(directory.lookupKey('k-old', 2000).ok, true, 'expiry cleared at run time')
  t.equal(directory.lookupKey('k-ci').ok, true)
  t.same(directory.ownerOfHash(hashCredential('k-ci')), { projectId: 'acme', label: 'ci' })
})

t.test('created projects exist only in the store; orphan overrides are ignored', async (t) => {
  const merged = mergeProjects([base], [override({ id: 'gone', plan: 'x' }), override({ id: 'newco', created: true, scopes: ['rpc', 'warp'] })])
  t.same(merged.map((p) => p.id), ['acme', 'newco'])
  const newco = merged[1]
  t.same([newco.name, newco.plan, [...newco.scopes], newco.credits], ['newco', 'standard', ['rpc'], { allocation: 0, period: 'month' }], 'defaults as in the yaml schema; unknown scopes dropped')
})
