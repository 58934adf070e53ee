import t from 'tap'
import { startMirror, type MirrorStandIn } from '../../../examples/upstreams/mirror.ts'

type Body = Record<string, any>

let mirror: MirrorStandIn
t.before(async () => {
  mirror = await startMirror()
})
t.teardown(() => mirror.close())

async function get(path: string, init: RequestInit = {}) {
  const res = await fetch(`${mirror.url}${path}`, init)
  const text = await res.text()
  return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : undefined) as Body }
}

/** Follows links.next from `path` until it is null; returns every page. */
async function follow(path: string, listKey: string) {
  const pages: Body[][] = []
  let next: string | null = path
  while (next !== null) {
    const { status, body } = await get(next)
    if (status !== 200) throw new Error(`${next} -> ${status}`)
    pages.push(body[listKey])
    next = body.links.next
    if (pages.length > 20) throw new Error('pagination does not end')
  }
  return pages
}

t.test('accounts: pages of 25 in ascending order until next is null', async (t) => {
  const pages = await follow('/api/v1/accounts', 'accounts')
  t.same(pages.map((p) => p.length), [25, 25, 10])
  const ids = pages.flat().map((a) => a.account)
  t.equal(new Set(ids).size, 60)
  t.equal(ids[0], '0.0.1001')
  t.equal(ids[59], '0.0.1060')
  const first = await get('/api/v1/accounts?limit=2')
  t.equal(first.body.links.next, '/api/v1/accounts?limit=2&account.id=gt:0.0.1002', 'relative, query echoed, cursor appended')
  t.equal(first.headers.get('link'), '</api/v1/accounts?limit=2&account.id=gt:0.0.1002>; rel="next"')
  const account = first.body.accounts[0]
  for (const field of ['account', 'alias', 'auto_renew_period', 'balance', 'created_timestamp', 'evm_address', 'expiry_timestamp', 'key', 'memo']) {
    t.ok(field in account, field)
  }
  t.same(Object.keys(account.balance), ['balance', 'timestamp', 'tokens'])
  t.match(account.key, { _type: 'ED25519', key: /^[0-9a-f]{64}$/ })
})

t.test('accounts: descending order, ranges, balances, keys', async (t) => {
  const desc = await follow('/api/v1/accounts?order=desc&limit=40', 'accounts')
  t.same(desc.map((p) => p.length), [40, 20])
  t.equal(desc[0][0].account, '0.0.1060')
  const range = await get('/api/v1/accounts?account.id=gte:0.0.1018&account.id=lt:0.0.1021&limit=2')
  t.same(range.body.accounts.map((a: Body) => a.account), ['0.0.1018', '0.0.1019'])
  t.equal(range.body.links.next, '/api/v1/accounts?account.id=lt:0.0.1021&account.id=gt:0.0.1019&limit=2', 'lower bound replaced in place')
  const rest = await get(range.body.links.next)
  t.same(rest.body.accounts.map((a: Body) => a.account), ['0.0.1020'])
  t.equal(rest.body.links.next, null)
  const rich = await get('/api/v1/accounts?account.balance=gte:5800000000')
  t.same(rich.body.accounts.map((a: Body) => a.account), ['0.0.1058', '0.0.1059', '0.0.1060'])
  const noBalance = await get('/api/v1/accounts?limit=1&balance=false')
  t.equal(noBalance.body.accounts[0].balance, null)
  const key = rich.body.accounts[0].key.key
  const byKey = await get(`/api/v1/accounts?account.publickey=0x${key}`)
  t.same(byKey.body.accounts.map((a: Body) => a.account), ['0.0.1058'])
})

t.test('accounts/{id}: every id form, embedded transactions, 404', async (t) => {
  const plain = await get('/api/v1/accounts/0.0.1010')
  t.equal(plain.status, 200)
  t.equal(plain.headers.get('cache-control'), 'public, max-age=2')
  for (const id of ['1010', '0.1010', plain.body.evm_address, plain.body.evm_address.slice(2), plain.body.alias, `0.0.${plain.body.alias}`]) {
    t.equal((await get(`/api/v1/accounts/${id}`)).body.account, '0.0.1010', id)
  }
  t.equal((await get('/api/v1/accounts/0x00000000000000000000000000000000000003f3')).body.account, '0.0.1011', 'long-zero address')
  t.ok(plain.body.transactions.length > 0)
  t.ok(plain.body.transactions.every((tx: Body) => tx.transfers.some((x: Body) => x.account === '0.0.1010')))
  const none = await get('/api/v1/accounts/0.0.1010?transactions=false')
  t.same([none.body.transactions, none.body.links], [[], { next: null }])
  t.same((await get('/api/v1/accounts/0.0.99')).body, { _status: { messages: [{ message: 'Not found' }] } })
  t.same((await get('/api/v1/accounts/AABBCC22')).body, { _status: { messages: [{ message: 'No account with a matching alias found' }] } })
})

t.test('transactions: newest first, timestamp cursor, filters', async (t) => {
  const pages = await follow('/api/v1/transactions', 'transactions')
  t.same(pages.map((p) => p.length), [25, 25, 10])
  const stamps = pages.flat().map((tx) => tx.consensus_timestamp)
  t.same(stamps, [...stamps].sort().reverse())
  const two = await get('/api/v1/transactions?limit=2')
  t.equal(two.body.links.next, `/api/v1/transactions?limit=2&timestamp=lt:${stamps[1]}`)
  t.equal(two.headers.get('cache-control'), 'public, max-age=2')
  const asc = await follow('/api/v1/transactions?order=asc&limit=50', 'transactions')
  t.same(asc.flat().map((tx) => tx.consensus_timestamp), [...stamps].reverse())
  const failed = await get('/api/v1/transactions?result=fail')
  t.ok(failed.body.transactions.length > 0 && failed.body.transactions.every((tx: Body) => tx.result !== 'SUCCESS'))
  const typed = await get('/api/v1/transactions?transactiontype=consensusSubmitMessage')
  t.ok(typed.body.transactions.length > 0 && typed.body.transactions.every((tx: Body) => tx.name === 'CONSENSUSSUBMITMESSAGE'))
  const window = await get(`/api/v1/transactions?timestamp=gte:${stamps[5]}&timestamp=lte:${stamps[2]}`)
  t.same(window.body.transactions.map((tx: Body) => tx.consensus_timestamp), stamps.slice(2, 6))
  const credited = await get('/api/v1/transactions?account.id=0.0.1005&type=credit')
  t.ok(credited.body.transactions.every((tx: Body) => tx.transfers.some((x: Body) => x.account === '0.0.1005' && x.amount > 0)))
})

t.test('transactions/{id}: by id and by hash', async (t) => {
  const [tx] = (await get('/api/v1/transactions?limit=1')).body.transactions
  const byId = await get(`/api/v1/transactions/${tx.transaction_id}`)
  t.equal(byId.headers.get('cache-control'), 'public, max-age=600')
  t.equal(byId.body.transactions[0].consensus_timestamp, tx.consensus_timestamp)
  t.notOk('links' in byId.body)
  const hex = Buffer.from(tx.transaction_hash, 'base64').toString('hex')
  t.equal((await get(`/api/v1/transactions/0x${hex}`)).body.transactions[0].transaction_id, tx.transaction_id)
  t.equal((await get(`/api/v1/transactions/0.0.1001-1-0`)).status, 404)
  t.equal((await get(`/api/v1/transactions/${tx.transaction_id}?scheduled=true`)).status, 404)
  const bad = await get('/api/v1/transactions/0.0.1001-1.0')
  t.equal(bad.status, 400)
  t.match(bad.body._status.messages[0].message, /^Invalid Transaction id/)
})

t.test('tokens: pages by token.id, filters, name search, one token', async (t) => {
  const pages = await follow('/api/v1/tokens?limit=10', 'tokens')
  t.same(pages.map((p) => p.length), [10, 10, 10, 0], 'a full last page still links to an empty one, as upstream')
  const nfts = await get('/api/v1/tokens?type=NON_FUNGIBLE_UNIQUE&limit=3')
  t.same(nfts.body.tokens.map((x: Body) => x.token_id), ['0.0.2003', '0.0.2006', '0.0.2009'])
  t.equal(nfts.body.links.next, '/api/v1/tokens?type=NON_FUNGIBLE_UNIQUE&limit=3&token.id=gt:0.0.2009')
  const held = await get('/api/v1/tokens?account.id=0.0.1001')
  t.same(held.body.tokens.map((x: Body) => x.token_id), ['0.0.2001', '0.0.2011', '0.0.2021'])
  const named = await get('/api/v1/tokens?name=token%2012&limit=1')
  t.same([named.body.tokens.map((x: Body) => x.name), named.body.links.next], [['Tollgate testnet token 12'], null])
  const one = await get('/api/v1/tokens/0x00000000000000000000000000000000000007d1')
  t.equal(one.headers.get('cache-control'), 'public, max-age=5')
  t.match(one.body, { token_id: '0.0.2001', type: 'FUNGIBLE_COMMON', decimals: '2', custom_fees: { fixed_fees: [] } })
  t.equal((await get('/api/v1/tokens/0.0.2001?timestamp=lt:1')).status, 404, 'before the token existed')
  t.equal((await get('/api/v1/tokens/0.0.2999')).status, 404)
})

t.test('topics and their messages', async (t) => {
  const topic = await get('/api/v1/topics/0.0.3002')
  t.equal(topic.headers.get('cache-control'), 'public, max-age=5')
  t.match(topic.body, { topic_id: '0.0.3002', memo: 'testnet topic 2', timestamp: { to: null } })
  t.same((await get('/api/v1/topics/0.0.3999')).body, { _status: { messages: [{ message: 'Not Found', detail: 'Topic not found' }] } })
  const pages = await follow('/api/v1/topics/0.0.3001/messages', 'messages')
  t.same(pages.map((p) => p.length), [25, 15])
  t.same(pages.flat().map((m) => m.sequence_number), Array.from({ length: 40 }, (_, i) => i + 1))
  const text = await get('/api/v1/topics/3001/messages?encoding=utf-8&sequencenumber=gt:38')
  t.same(text.body.messages.map((m: Body) => m.message), ['testnet topic 3001 message 39', 'testnet topic 3001 message 40'])
  t.equal(text.headers.get('cache-control'), 'public, max-age=1')
  t.same((await get('/api/v1/topics/0.0.3999/messages')).body, { messages: [], links: { next: null } }, 'no existence check upstream')
})

t.test('errors: mirror shape, no cache-control', async (t) => {
  const bad = await get('/api/v1/accounts?limit=0&foo=1')
  t.equal(bad.status, 400)
  t.same(bad.body, { _status: { messages: [{ message: 'Invalid parameter: limit' }, { message: 'Unknown query parameter: foo' }] } })
  t.equal(bad.headers.get('cache-control'), null)
  t.equal(bad.headers.get('content-type'), 'application/json; charset=utf-8')
  const capped = await get('/api/v1/accounts?limit=500')
  t.equal(capped.body.accounts.length, 60, 'the real node caps limit rather than refusing it')
  for (const path of ['/api/v1/unknown', '/api/v1/accounts/0.0.1001/nope', '/other']) {
    t.same((await get(path)).body, { _status: { messages: [{ message: 'Not found' }] } }, path)
  }
  // The rest of the API is served too (issue 19), with the node's validation first.
  const nfts = await get('/api/v1/accounts/0.0.1001/nfts')
  t.equal(nfts.status, 200)
  t.ok(Array.isArray(nfts.body.nfts), 'an NFT list in the node\'s shape')
  t.same((await get('/api/v1/accounts/0.0.1001/nfts?token.id=ne:1')).body, { _status: { messages: [{ message: 'Not equal (ne) operator is not supported for token.id' }] } })
  t.equal((await get('/api/v1/accounts', { method: 'POST', body: '{}' })).status, 404)
  const head = await fetch(`${mirror.url}/api/v1/tokens`, { method: 'HEAD' })
  t.equal(head.status, 200)
})

t.test('records every request and tells networks apart', async (t) => {
  mirror.reset()
  await get('/api/v1/tokens?limit=1', { headers: { 'x-api-key': 'seen-by-upstream' } })
  await get('/api/v1/topics/3001')
  t.same(mirror.requests.map((r) => [r.method, r.path]), [['GET', '/api/v1/tokens?limit=1'], ['GET', '/api/v1/topics/3001']])
  t.equal(mirror.requests[0].headers['x-api-key'], 'seen-by-upstream')
  mirror.reset()
  t.same(mirror.requests, [])
  const mainnet = await startMirror({ network: 'mainnet' })
  t.teardown(() => mainnet.close())
  const res = await fetch(`${mainnet.url}/api/v1/accounts/0.0.1001`)
  t.equal(((await res.json()) as Body).memo, 'mainnet account 1001')
  t.equal(mainnet.network, 'mainnet')
})
