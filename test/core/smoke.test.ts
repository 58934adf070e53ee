import t from 'tap'
import { hashCredential, credentialMatches } from '../../core/projects.ts'
t.test('hash round trip', async (t) => {
  const h = hashCredential('k')
  t.ok(credentialMatches('k', h))
  t.notOk(credentialMatches('x', h))
})
