import t from 'tap'
import {
  checkMirrorRequest, mirrorErrorBody, normaliseQuery, validateMirrorRequest, type MirrorRouteName,
} from '../../../plugins/mirror-validate/rules.ts'
import { TRANSACTION_TYPES } from '../../../plugins/mirror-validate/transaction-types.ts'
import { INVALID_TRANSACTION_ID } from '../../../plugins/mirror-validate/transaction-id.ts'
import { encodeBase32, parseEntityId } from '../../../plugins/mirror-validate/entity-id.ts'

/** Messages for a route; `id` is the path id (ignored by list routes). */
const check = (route: MirrorRouteName, query: string, id?: string) =>
  validateMirrorRequest(route, id === undefined ? {} : { id }, new URLSearchParams(query))
const invalid = (key: string) => `Invalid parameter: ${key}`
const unknown = (key: string) => `Unknown query parameter: ${key}`
const EVM_LONG_ZERO = '0x00000000000000000000000000000000000003e9'
const EVM_OPAQUE = '0xac384c53f03855fa1b3616052f8ba32c6c2a2fec'
const KEY_64 = '3c3d546321ff6f63d701d2ec5c277095874e19f4a235bee1e6bb19258bf362be'

t.test('limit: an integer 1-100, the spec range; the node itself caps instead', async (t) => {
  for (const value of ['0', '-1', 'a', '', '1.5', '101', '9223372036854775808', 'gt:lt:']) {
    t.same(check('accounts.list', `limit=${value}`), [invalid('limit')], `limit=${value}`)
  }
  for (const value of ['1', '25', '100', 'eq:5']) t.same(check('transactions.list', `limit=${value}`), [], `limit=${value}`)
  const capped = new URLSearchParams('limit=500')
  t.same(validateMirrorRequest('tokens.list', {}, capped, { limitAboveMax: 'cap' }), [])
  t.same(validateMirrorRequest('tokens.list', {}, new URLSearchParams('limit=51'), { maxLimit: 50 }), [invalid('limit')])
})

t.test('order, unknown parameters, key case and repeats', async (t) => {
  t.same(check('accounts.list', 'order=asc&order=DESC'), [])
  t.same(check('topics.messages', 'order=any', '0.0.7'), [invalid('order')])
  t.same(check('accounts.list', 'consensus=hashgraph'), [unknown('consensus')])
  t.same(check('transactions.list', 'transactionType=invalid&Limit=0'), [invalid('transactiontype'), invalid('limit')])
  t.same(check('accounts.list', 'constructor=1&toString=x'), [], 'names qs drops are never seen')
  t.same(check('accounts.list', 'Constructor=1'), [unknown('constructor')])
  t.same(check('accounts.list', 'limit[]=5'), [], 'qs array syntax is the same parameter')
  t.same(check('transactions.list', 'limit=0&limit=x&limit=5'), [invalid('limit'), invalid('limit')], 'one message per bad value')
  t.same(check('transactions.list', 'foo=1&foo=2'), [unknown('foo'), unknown('foo')], 'one per value outside /accounts')
  t.same(check('accounts.list', 'foo=1&foo=2'), [unknown('foo')], 'once per key on /accounts')
  t.same(check('accounts.list', '9=x&limit=0&3=y'), [unknown('3'), unknown('9'), invalid('limit')], 'index-like keys sort first')
})

t.test('repeated-value and parameter-count limits', async (t) => {
  const many = (key: string, n: number) => Array.from({ length: n }, () => `${key}=1`).join('&')
  t.same(check('transactions.list', many('limit', 100)), [])
  t.same(check('transactions.list', many('limit', 101)), ['Array limit exceeded. Only 100 elements allowed in an array.'])
  t.same(check('transactions.list', `${many('limit', 60)}&${many('LIMIT', 60)}&order=x`), [
    'Parameter values count exceeds maximum number allowed: limit count: 120 max: 100', invalid('order'),
  ])
  t.same(check('accounts.list', `order=x&${many('limit', 60)}&${many('Limit', 41)}`), [
    invalid('order'), 'Parameter values count exceeds maximum number allowed: limit count: 101 max: 100',
  ], 'in place on /accounts')
  const keys = Array.from({ length: 1001 }, (_, i) => `k${i}=1`).join('&')
  t.same(check('accounts.list', keys), ['Parameter limit exceeded. Only 1000 parameters allowed.'])
})

t.test('accounts.list: query order, strict op:value, ids, balance, keys', async (t) => {
  t.same(check('accounts.list', 'account.id=lte:0.1.2.3&account.balance=gt:-2&account.publickey=abcdef&timestamp=-1.2&order=any&balance=1&token.id=0.0.45678'), [
    invalid('account.id'), invalid('account.balance'), invalid('account.publickey'), unknown('timestamp'),
    invalid('order'), invalid('balance'), unknown('token.id'),
  ])
  for (const value of ['0.0.1001', '1001', '0.1001', 'gt:0.0.5', 'gte:5', 'lt:5', 'lte:5', 'ne:5', 'eq:5', EVM_LONG_ZERO, EVM_OPAQUE, `0.0.${EVM_OPAQUE.slice(2)}`]) {
    t.same(check('accounts.list', `account.id=${value}`), [], `account.id=${value}`)
  }
  for (const value of ['abc', 'gt:lt:5', 'GT:5', 'foo:5', '0.0.0.5', '']) t.same(check('accounts.list', `account.id=${value}`), [invalid('account.id')], value)
  t.same(check('accounts.list', 'account.id=0.0.274877906944'), ['Invalid entity ID "0.0.274877906944"'], 'num over 38 bits')
  t.same(check('accounts.list', 'account.id=-5'), ['Invalid entity ID "0.0.-5"'])
  t.same(check('accounts.list', 'account.id=5000.0.1'), ['Invalid entity ID "5000.0.1"'], 'shard over 10 bits')
  t.same(check('accounts.list', 'account.id=99999.1'), ['Invalid entity ID "0.99999.1"'], 'realm over 16 bits')
  t.same(check('accounts.list', 'account.id=1.0.' + EVM_OPAQUE.slice(2)), [`Invalid entity ID "1.0.${EVM_OPAQUE.slice(2)}"`])
  t.same(check('accounts.list', 'account.balance=gt:100&account.balance=ne:5&account.balance=0'), [])
  t.same(check('accounts.list', 'account.balance=9223372036854775808'), [invalid('account.balance')])
  t.same(check('accounts.list', `account.publickey=0x${KEY_64}&balance=FALSE`), [])
  t.same(check('accounts.list', 'balance=gt:true'), [invalid('balance')], 'booleans take eq only')
})

t.test('accounts.get: query first, then the path id, then timestamp rules', async (t) => {
  for (const id of ['0.0.1001', '1001', '0.1001', EVM_LONG_ZERO, EVM_OPAQUE.slice(2), 'AABBCC22', '0.0.AABBCC22', '0.AABBCC22']) {
    t.same(check('accounts.get', '', id), [], id)
  }
  for (const id of ['0.5.6.7', 'A', 'AAA', 'AB', '1.0.AABBCC22', 'aabbcc22', `9.2.${'0'.repeat(38)}13`, '0.0.274877906944', 'KGNABD5L3ZGSRVUCSPD0']) {
    t.same(check('accounts.get', '', id), [invalid('idOrAliasOrEvmAddress')], id)
  }
  t.same(check('accounts.get', 'transactionType=invalid', 'bad!'), [invalid('transactiontype')], 'query errors win')
  t.same(check('accounts.get', 'token.id=1&limit=0', '0.0.8'), [invalid('limit'), unknown('token.id')], 'unknown last')
  t.same(check('accounts.get', 'timestamp=gt:1&timestamp=gte:2', '0.0.8'), ['Multiple gt or gte operators not permitted for timestamp param'])
  t.same(check('accounts.get', 'timestamp=lt:1&timestamp=lte:2', '0.0.8'), ['Multiple lt or lte operators not permitted for timestamp param'])
  t.same(check('accounts.get', 'timestamp=1&timestamp=ne:2', '0.0.8'), ['Cannot combine eq with ne, gt, gte, lt, or lte for timestamp param'])
  t.same(check('accounts.get', 'timestamp=gt:1&timestamp=gt:2', 'bad!'), [invalid('idOrAliasOrEvmAddress')], 'path before timestamp rules')
  t.same(check('accounts.get', 'timestamp=ne:1&timestamp=ne:2&timestamp=gt:1&timestamp=lt:9&transactions=false', '0.0.8'), [])
})

t.test('transactions.list: the filter validator, right-split op:value, timestamp rules', async (t) => {
  t.same(check('transactions.list', 'timestamp=-1&account.id=0.x&type=good&result=best&transactionType=invalid&account.publickey=' + KEY_64), [
    invalid('timestamp'), invalid('account.id'), invalid('type'), invalid('result'), invalid('transactiontype'), unknown('account.publickey'),
  ])
  for (const name of TRANSACTION_TYPES) t.same(check('transactions.list', `transactiontype=${name.toLowerCase()}`), [], name)
  t.equal(TRANSACTION_TYPES.length, 69)
  t.same(check('transactions.list', 'transactiontype=UNKNOWN'), [invalid('transactiontype')])
  t.same(check('transactions.list', 'result=SUCCESS&result=fail&type=CREDIT&type=debit'), [])
  t.same(check('transactions.list', 'account.id=gt:lt:5'), [], 'only the last op counts here')
  for (const ts of ['1234567890', '1234567890.123456789', 'gte:1.1', 'ne:5']) t.same(check('transactions.list', `timestamp=${ts}`), [], ts)
  for (const ts of ['12345678901', '1.1234567890', '1.', 'x', 'gt:', 'GT:1']) t.same(check('transactions.list', `timestamp=${ts}`), [invalid('timestamp')], ts)
  t.same(check('transactions.list', 'account.id=0.0.274877906944&timestamp=gt:1&timestamp=gt:2'), ['Invalid entity ID "0.0.274877906944"'])
  t.same(check('transactions.list', 'timestamp=gt:1&timestamp=gt:2'), ['Multiple gt or gte operators not permitted for timestamp param'])
  t.same(check('transactions.list', 'timestamp=5&timestamp=lte:9'), ['Cannot combine eq with ne, gt, gte, lt, or lte for timestamp param'])
})

t.test('transactions.get: nonce and scheduled, then the id or hash', async (t) => {
  const hex = 'ab'.repeat(48)
  for (const id of ['0.0.10-1234567890-000000000', '0.0.10-1234567890-7', hex, '0x' + hex, 'izUDXqZ8gOhKlL5vbFInnw2VObTXzNWEH2QOg7XOUQwl9Mp2SVil8lufZIU6xJEE']) {
    t.same(check('transactions.get', 'nonce=0&scheduled=true', id), [], id)
  }
  for (const id of ['0.1.10-1234567891.000000000', '0.0.10-1-1234567890', 'x', hex.slice(2), '0.0.10-9223372036854775808-0']) {
    t.same(check('transactions.get', '', id), [INVALID_TRANSACTION_ID], id)
  }
  t.same(check('transactions.get', '', '0.0.274877906944-1-1'), ['Invalid entity ID "0.0.274877906944"'])
  t.same(check('transactions.get', 'scheduled=ne:true&scheduled=1&nonce=-1&nonce=2147483648&nonce=lt:10&token.id=1', 'x'), [
    invalid('scheduled'), invalid('scheduled'), invalid('nonce'), invalid('nonce'), invalid('nonce'), unknown('token.id'),
  ], 'query errors first, path unchecked')
})

t.test('tokens.list: name rules, token checks, account.id re-read', async (t) => {
  t.same(check('tokens.list', 'token.id=5&name=validname'), ['token.id and name can not be used together. Use a more specific name instead.'])
  t.same(check('tokens.list', 'account.id=gt:5&name=validname&limit=0'), ['account.id and name cannot be used together'])
  t.same(check('tokens.list', 'token.id=5&name='), [invalid('name')], 'an empty name is not a name')
  t.same(check('tokens.list', 'limit=-2&publickey=-2&order=any&block.number=3&name=ab'), [
    invalid('limit'), invalid('publickey'), invalid('order'), invalid('name'), unknown('block.number'),
  ])
  t.same(check('tokens.list', `name=abc&name=${'x'.repeat(100)}`), [])
  for (const name of ['x'.repeat(101), 'ne:bar', 'gt:bar', 'é']) t.same(check('tokens.list', `name=${encodeURIComponent(name)}`), [invalid('name')], name)
  t.same(check('tokens.list', 'type=all&type=FUNGIBLE_COMMON&type=non_fungible_unique'), [])
  t.same(check('tokens.list', 'type=credit'), [invalid('type')])
  t.same(check('tokens.list', `token.id=gte:${EVM_LONG_ZERO}&token.id=lt:0.0.50000&publickey=${KEY_64}`), [])
  t.same(check('tokens.list', `token.id=${EVM_OPAQUE}`), [invalid('token.id')], 'tokens take long-zero addresses only')
  t.same(check('tokens.list', 'account.id=0.0.1001'), [])
  t.same(check('tokens.list', 'account.id=gt:0.0.1001'), [invalid('account.id')], 'no operator on /tokens account.id')
  t.same(check('tokens.list', 'account.id=1&account.id=2'), ['Entity ID "1,2" is not a string'])
  t.same(check('tokens.list', 'token.id=0.0.274877906944&account.id=gt:1'), ['Invalid entity ID "0.0.274877906944"'])
})

t.test('tokens.get: path first, then timestamp eq/lt/lte', async (t) => {
  for (const id of ['0.0.2001', '2001', '0.2001', EVM_LONG_ZERO, EVM_LONG_ZERO.slice(2)]) t.same(check('tokens.get', '', id), [], id)
  for (const id of ['abc', EVM_OPAQUE, `0.0.0x${'0'.repeat(37)}46F`]) t.same(check('tokens.get', 'timestamp=x', id), [invalid('tokenid')], id)
  t.same(check('tokens.get', 'timestamp=1&timestamp=lt:2&timestamp=lte:3', '2001'), [])
  t.same(check('tokens.get', 'timestamp=-1&account.id=1001&timestamp=gt:1&timestamp=gte:1&timestamp=ne:1&balance=5', '1135'), [
    invalid('timestamp'), invalid('timestamp'), invalid('timestamp'), invalid('timestamp'), unknown('account.id'), unknown('balance'),
  ])
})

t.test('topics.get: the rest-java service behind nginx', async (t) => {
  for (const id of ['0.0.3001', '3001', '0.3001', '1023.65535.274877906943']) {
    t.equal(checkMirrorRequest('topics.get', { topicId: id }, new URLSearchParams('anything=goes')), null, id)
  }
  for (const id of ['abc', '0.0.0.1', '-1', EVM_LONG_ZERO]) {
    t.same(checkMirrorRequest('topics.get', { topicId: id }, new URLSearchParams()), { status: 404, messages: [{ message: 'Not found' }] }, id)
  }
  for (const id of ['9223372036854775807', '1024.0.1', '0.65536.1', '0.0.274877906944', '12345.0.1']) {
    t.same(checkMirrorRequest('topics.get', { topicId: id }, new URLSearchParams()), {
      status: 400, messages: [{ message: 'Bad Request', detail: "Failed to convert 'id'" }],
    }, id)
  }
  t.same(check('topics.get', '', '1024.0.1'), ['Bad Request'])
})

t.test('topics.messages: path, then query, then id range', async (t) => {
  t.same(check('topics.messages', 'topic.id=7&sequencenumber=2_2&timestamp=18:34&limit=-1', '7'), [
    invalid('sequencenumber'), invalid('timestamp'), invalid('limit'), unknown('topic.id'),
  ])
  t.same(check('topics.messages', 'limit=0', '92233720368547758080'), [invalid('topic.id')])
  t.same(check('topics.messages', '', EVM_LONG_ZERO), [invalid('topic.id')], 'no EVM forms for topics')
  t.same(check('topics.messages', 'sequencenumber=gt:2&sequencenumber=ne:5&encoding=UTF-8&encoding=utf8&encoding=base64&timestamp=ne:1', '0.0.7'), [])
  t.same(check('topics.messages', 'sequencenumber=0&encoding=hex', '7'), [invalid('sequencenumber'), invalid('encoding')])
  t.same(check('topics.messages', '', '0.0.274877906944'), ['Invalid entity ID "0.0.274877906944"'])
  t.same(check('topics.messages', 'limit=0', '0.0.274877906944'), [invalid('limit')])
})

t.test('path ids are read from the names gateway routes use', async (t) => {
  const q = new URLSearchParams()
  t.same(validateMirrorRequest('transactions.get', { transactionId: 'x' }, q), [INVALID_TRANSACTION_ID])
  t.same(validateMirrorRequest('tokens.get', { tokenId: 'x' }, q), [invalid('tokenid')])
  t.same(validateMirrorRequest('accounts.get', { whatever: 'x' }, q), [invalid('idOrAliasOrEvmAddress')], 'falls back to the last param')
})

t.test('ids and aliases', async (t) => {
  t.same(parseEntityId('1001'), { shard: 0, realm: 0, num: 1001, evmAddress: null })
  t.same(parseEntityId(EVM_LONG_ZERO), { shard: 0, realm: 0, num: 1001, evmAddress: null })
  t.same(parseEntityId(EVM_OPAQUE), { shard: 0, realm: 0, num: null, evmAddress: EVM_OPAQUE.slice(2) })
  const bytes = Buffer.from('00112233445566778899aabbccddeeff01020304', 'hex')
  t.equal(encodeBase32(bytes).length, 32)
  t.same(check('accounts.get', '', encodeBase32(bytes)), [])
})

t.test('error body and canonical query', async (t) => {
  t.same(mirrorErrorBody(['Not found']), { _status: { messages: [{ message: 'Not found' }] } })
  t.same(mirrorErrorBody([{ message: 'Bad Request', detail: 'd' }]), { _status: { messages: [{ message: 'Bad Request', detail: 'd' }] } })
  const n = (query: string) => normaliseQuery(new URLSearchParams(query))
  t.equal(n(''), '')
  t.equal(n('order=DESC&Account.id=2&account.id=1'), 'account.id=1&account.id=2&order=desc')
  t.equal(n('timestamp=lt:9&limit=5&timestamp=gt:1'), n('limit=5&timestamp=gt:1&timestamp=lt:9'))
  t.not(n('limit=5&limit=10'), n('limit=10&limit=5'), 'the last limit wins upstream, so order is kept')
  t.not(n('transactiontype=cryptotransfer'), n('transactiontype=CRYPTOTRANSFER'), 'values are kept as sent')
  t.equal(n('name=a b&x=é'), 'name=a%20b&x=%C3%A9')
  t.equal(n('constructor=1&limit[]=2'), 'limit=2')
})
