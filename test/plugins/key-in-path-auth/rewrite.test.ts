/** The load-time check that a route's rewrite does not put the key param upstream. */
import t from 'tap'
import { rewriteUsesParam } from '../../../plugins/key-in-path-auth/rewrite.ts'

t.test('rewriteUsesParam finds the param as a whole rewrite segment', async (t) => {
  t.equal(rewriteUsesParam('/keys/:apiKey/prove', 'apiKey'), true)
  t.equal(rewriteUsesParam('/files/*apiKey', 'apiKey'), true, 'a rest param too')
  t.equal(rewriteUsesParam('/prove-tx', 'apiKey'), false)
  t.equal(rewriteUsesParam('/:apiKeyId', 'apiKey'), false, 'another param whose name starts the same is fine')
  t.equal(rewriteUsesParam('/apiKey', 'apiKey'), false, 'a static segment with the same text is fine')
})
