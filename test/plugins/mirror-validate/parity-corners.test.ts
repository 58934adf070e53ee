/**
 * Mirror parity corners (issue 30, item 6), checked against the Hiero mirror node's REST source:
 * - `rest/transactions.js` (getTransactions) and `rest/accounts.js` (getOneAccount) call
 *   `utils.parseTimestampFilters(filters, false, true, true, false, false)`: no strict override, so
 *   the "Multiple gt or gte" / "Multiple lt or lte" / "Cannot combine eq" checks run only when
 *   `config.query.strictTimestampParam` is true, which is the node's shipped default
 *   (`rest/config/application.yml`). `strictTimestamp` follows that setting.
 * - `limit` is a positive long and values above `response.limit.max` (100) are capped, on list
 *   routes and on single-entity routes that list (an account pages its transactions):
 *   `limitAboveMax: cap` follows the node there too.
 */
import t from 'tap'
import { validateMirrorRequest } from '../../../plugins/mirror-validate/rules.ts'
import { checkMirrorOperation } from '../../../plugins/mirror-validate/operation-check.ts'
import type { MirrorValidationOptions } from '../../../plugins/mirror-validate/rules.ts'

const REPEATED = [
  'timestamp=gt:1700000000&timestamp=gte:1700000001',
  'timestamp=lt:1700000009&timestamp=lte:1700000008',
  'timestamp=1700000005&timestamp=gt:1700000001',
  'timestamp=gte:1700000000&timestamp=gt:1700000001&timestamp=lt:1700000009&timestamp=lte:1700000008',
]
const TEXTS = [
  'Multiple gt or gte operators not permitted for timestamp param',
  'Multiple lt or lte operators not permitted for timestamp param',
  'Cannot combine eq with ne, gt, gte, lt, or lte for timestamp param',
  'Multiple gt or gte operators not permitted for timestamp param',
]
const auto = (path: string, query: string, options: MirrorValidationOptions = {}) =>
  checkMirrorOperation('GET', path.split('/').filter(Boolean), new URLSearchParams(query), options).rejection?.messages.map((m) => m.message) ?? []

t.test('strictTimestamp (default true, as the node ships): repeated range operators refused on /transactions and /accounts/{id}', async (t) => {
  REPEATED.forEach((query, i) => {
    t.same(validateMirrorRequest('transactions.list', {}, new URLSearchParams(query)), [TEXTS[i]], `transactions ${query}`)
    t.same(validateMirrorRequest('accounts.get', { id: '0.0.1001' }, new URLSearchParams(query)), [TEXTS[i]], `account ${query}`)
    t.same(auto('/transactions', query), [TEXTS[i]], 'route auto too')
    t.same(auto('/accounts/0.0.1001', query), [TEXTS[i]], 'route auto too')
  })
})

t.test('strictTimestamp: false accepts them, as a node with strictTimestampParam: false', async (t) => {
  const lax = { strictTimestamp: false }
  for (const query of REPEATED) {
    t.same(validateMirrorRequest('transactions.list', {}, new URLSearchParams(query), lax), [], `transactions ${query}`)
    t.same(validateMirrorRequest('accounts.get', { id: '0.0.1001' }, new URLSearchParams(query), lax), [], `account ${query}`)
    t.same(auto('/transactions', query, lax), [])
    t.same(auto('/accounts/0.0.1001', query, lax), [])
  }
  // Only the operator rules are lifted: bad values are still refused.
  t.same(validateMirrorRequest('transactions.list', {}, new URLSearchParams('timestamp=gt:x&timestamp=gt:1'), lax), ['Invalid parameter: timestamp'])
  t.same(validateMirrorRequest('accounts.get', { id: 'x!' }, new URLSearchParams('timestamp=gt:1&timestamp=gt:2'), lax), ['Invalid parameter: idOrAliasOrEvmAddress'])
  // Routes whose handlers parse timestamp as bounds of their own are unchanged (contract logs).
  t.same(auto('/contracts/results/logs', 'timestamp=gt:1&timestamp=gte:2', lax), ['Only one gt/gte operator is allowed for timestamp'])
})

t.test('limit above the maximum: refused by default; capped with limitAboveMax: cap on list and single-entity-that-list routes', async (t) => {
  const lists = ['/transactions', '/accounts', '/tokens', '/blocks', '/accounts/0.0.1001', '/accounts/0.0.1001/nfts', '/accounts/0.0.1001/tokens',
    '/tokens/0.0.2001/balances', '/tokens/0.0.2001/nfts', '/topics/0.0.3001/messages', '/contracts/0.0.1001/results']
  for (const path of lists) {
    t.same(auto(path, 'limit=500'), ['Invalid parameter: limit'], `${path}: reject by default (the spec's 1-100)`)
    t.same(auto(path, 'limit=500', { limitAboveMax: 'cap' }), [], `${path}: capped, as the node`)
    t.same(auto(path, 'limit=0', { limitAboveMax: 'cap' }), ['Invalid parameter: limit'], `${path}: 0 is still refused`)
  }
  t.same(validateMirrorRequest('accounts.get', { id: '0.0.1001' }, new URLSearchParams('limit=101'), { limitAboveMax: 'cap' }), [])
})
