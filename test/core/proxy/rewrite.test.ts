/**
 * A route's `rewrite` template turned into the upstream path: fixed templates as they are, params
 * percent-encoded (a `:param` as one segment, a `*rest` segment by segment).
 */
import t from 'tap'
import { compileRewrite } from '../../../core/proxy/table.ts'

t.test('fixed templates give their text, whatever the params', async (t) => {
  t.equal(compileRewrite('/prove-tx')({ apiKey: 'secret' }), '/prove-tx', 'the key param is not in it')
  t.equal(compileRewrite('/a/b/')({}), '/a/b/')
  t.equal(compileRewrite('/')({}), '/')
  t.equal(compileRewrite('')({}), '/')
})

t.test('params are encoded into their segments; a missing one is empty', async (t) => {
  const one = compileRewrite('/x/:id/y')
  t.equal(one({ id: 'a/b c' }), '/x/a%2Fb%20c/y', 'a :param stays one segment')
  t.equal(one({}), '/x//y')
  t.equal(one({ id: '42' }), '/x/42/y', 'the same function, another request')
  const rest = compileRewrite('/up/*rest')
  t.equal(rest({ rest: 'a/b c/%' }), '/up/a/b%20c/%25', 'a *rest keeps its slashes')
  t.equal(rest({ rest: '' }), '/up/')
  t.equal(compileRewrite('/:a/:b')({ a: '1', b: '2' }), '/1/2')
})
