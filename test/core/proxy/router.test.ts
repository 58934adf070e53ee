import t from 'tap'
import { Router, normalisePath } from '../../../core/proxy/router.ts'
import { GatewayError } from '../../../core/proxy/errors.ts'

const router = new Router([
  { methods: ['POST'], path: '/privnet/zkpaas/:apiKey/prove-tx', value: 'prove-tx' },
  { methods: ['POST'], path: '/privnet/zkpaas/:apiKey/prove-batch', value: 'prove-batch' },
  { methods: ['GET', 'POST'], path: '/privnet/rpc/:apiKey', value: 'rpc' },
  { methods: ['GET'], path: '/ledger/mainnet/api/v1/accounts/:id', value: 'account' },
  { methods: ['GET'], path: '/ledger/mainnet/api/v1/accounts', value: 'accounts' },
  { methods: ['GET'], path: '/static/*rest', value: 'static' },
  { methods: ['GET'], path: '/static/special', value: 'special' },
])

const match = (method: string, path: string) => router.match(method, normalisePath(path))
function refusal(fn: () => unknown): GatewayError {
  try {
    fn()
  } catch (error) {
    return error as GatewayError
  }
  throw new Error('expected a refusal')
}

t.test('params, statics before params, catch-all', async (t) => {
  t.same(match('POST', '/privnet/zkpaas/k1/prove-tx'), { value: 'prove-tx', params: { apiKey: 'k1' } })
  t.same(match('GET', '/ledger/mainnet/api/v1/accounts/0.0.2'), { value: 'account', params: { id: '0.0.2' } })
  t.same(match('GET', '/ledger/mainnet/api/v1/accounts'), { value: 'accounts', params: {} })
  t.same(match('GET', '/static/special'), { value: 'special', params: {} })
  t.same(match('GET', '/static/a/b/c'), { value: 'static', params: { rest: 'a/b/c' } })
  t.same(match('GET', '/static'), { value: 'static', params: { rest: '' } })
  t.same(match('HEAD', '/privnet/rpc/k'), { value: 'rpc', params: { apiKey: 'k' } }, 'HEAD follows GET')
})

t.test('normalisation: duplicate and trailing slashes, dot segments, percent-decoding', async (t) => {
  t.same(match('POST', '//privnet//zkpaas/k1/prove-tx/'), { value: 'prove-tx', params: { apiKey: 'k1' } })
  t.same(match('POST', '/privnet/./zkpaas/k1/prove-tx'), { value: 'prove-tx', params: { apiKey: 'k1' } })
  t.same(match('POST', '/privnet/zkpaas/k%20y/prove-tx').params, { apiKey: 'k y' })
})

t.test('404, 405 with Allow, and 400 for traversal, encoded slashes, NUL and bad escapes', async (t) => {
  const notFound = refusal(() => match('GET', '/nope'))
  t.equal(notFound.status, 404)
  t.equal(notFound.code, 'route_not_found')
  const wrongMethod = refusal(() => match('DELETE', '/privnet/rpc/k'))
  t.equal(wrongMethod.status, 405)
  t.equal(wrongMethod.code, 'method_not_allowed')
  t.equal(wrongMethod.headers.allow, 'GET, HEAD, POST')
  for (const [path, message] of [
    ['/privnet/zkpaas/../prove-tx', '".."'],
    ['/privnet/zkpaas/%2e%2e/prove-tx', '".."'],
    ['/privnet/zkpaas/a%2Fb/prove-tx', 'encoded slash'],
    ['/privnet/zkpaas/a%5Cb/prove-tx', 'encoded slash'],
    ['/privnet/zkpaas/a%00b/prove-tx', 'NUL'],
    ['/privnet/zkpaas/%E0%A4%A/prove-tx', 'percent-encoding'],
    ['relative', 'must start with /'],
  ]) {
    const error = refusal(() => match('POST', path))
    t.equal(error.status, 400, path)
    t.equal(error.code, 'invalid_path', path)
    t.match(error.message, message, path)
  }
})

t.test('conflicting definitions fail at build time', async (t) => {
  t.throws(() => new Router([{ methods: ['GET'], path: '/a', value: 1 }, { methods: ['GET'], path: '/a', value: 2 }]), /defined twice/)
  t.throws(() => new Router([{ methods: ['GET'], path: '/a/:x', value: 1 }, { methods: ['GET'], path: '/a/:y/b', value: 2 }]), /conflicts/)
  t.throws(() => new Router([{ methods: ['GET'], path: '/a/*rest/b', value: 1 }]), /last segment/)
})

t.test('a method the most specific pattern lacks falls to a less specific one that has it', async (t) => {
  const mount = new Router([
    { methods: ['GET'], path: '/m/*rest', value: 'reads' },
    { methods: ['POST'], path: '/m/network/fees', value: 'estimate' },
    { methods: ['POST'], path: '/m/contracts/:id/call', value: 'call' },
  ])
  const at = (method: string, path: string) => mount.match(method, normalisePath(path))
  t.same(at('POST', '/m/network/fees'), { value: 'estimate', params: {} })
  t.same(at('GET', '/m/network/fees'), { value: 'reads', params: { rest: 'network/fees' } }, 'GET reaches the catch-all')
  t.same(at('HEAD', '/m/contracts/7/call'), { value: 'reads', params: { rest: 'contracts/7/call' } }, 'no param leaks from the POST route')
  const refused = refusal(() => at('PUT', '/m/network/fees'))
  t.equal(refused.status, 405, 'no pattern has the method: 405 names the most specific one')
  t.equal(refused.headers?.allow, 'POST')
})

t.test('matchOrPass: a route table sharing its path space passes on what is not its own', async (t) => {
  t.same(router.matchOrPass('GET', '/privnet/rpc/k1'), { value: 'rpc', params: { apiKey: 'k1' } }, 'a match is returned as match() returns it')
  t.equal(router.matchOrPass('GET', '/nowhere'), undefined, 'no such path: undefined, not a 404')
  t.equal(router.matchOrPass('DELETE', '/privnet/rpc/k1'), undefined, 'another method: undefined, not a 405')
})
