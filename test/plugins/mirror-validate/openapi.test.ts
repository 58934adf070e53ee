/**
 * The mirror API table against the pinned OpenAPI document: no drift, every path routed, and per
 * path one valid and one invalid request answered as the node answers them; the handler corners
 * where the node is stricter or looser than its document; contracts/call bodies.
 */
import t from 'tap'
import { readFileSync } from 'node:fs'
import { compileMirrorOpenApi } from '../../../plugins/mirror-validate/openapi-compile.ts'
import { FACT_IDS, MIRROR_OPERATIONS, matchOperation } from '../../../plugins/mirror-validate/openapi-routes.ts'
import { checkMirrorOperation } from '../../../plugins/mirror-validate/operation-check.ts'
import { checkContractCall } from '../../../plugins/mirror-validate/contract-call.ts'
import { buildExamples } from '../../../examples/upstreams/mirror-examples.ts'
import { openApiDocument, pathCases } from '../../helpers/mirror-api-cases.ts'

const doc = openApiDocument()
const check = (method: string, pathAndQuery: string) => {
  const [path, query = ''] = pathAndQuery.split('?')
  return checkMirrorOperation(method, path.split('/').slice(1).map(decodeURIComponent), new URLSearchParams(query))
}
const messages = (pathAndQuery: string, method = 'GET') => check(method, pathAndQuery).rejection?.messages.map((m) => m.message) ?? []

t.test('the shipped tables are what the pinned document compiles to', async (t) => {
  const shipped = JSON.parse(readFileSync(new URL('../../../plugins/mirror-validate/openapi-operations.json', import.meta.url), 'utf8'))
  t.same(compileMirrorOpenApi(doc), shipped, 'openapi-operations.json: regenerate with openapi-generate.ts')
  const examples = JSON.parse(readFileSync(new URL('../../../examples/upstreams/mirror-examples.json', import.meta.url), 'utf8'))
  t.same(buildExamples(doc), examples, 'mirror-examples.json: regenerate with mirror-examples.ts')
  t.same([...FACT_IDS].sort(), MIRROR_OPERATIONS.map((o) => o.operationId).sort(), 'every operation has handler facts, and no fact is stale')
  t.equal(MIRROR_OPERATIONS.length, 48)
})

t.test('every GET path of the document: routed, one valid and one invalid request as the node answers them', async (t) => {
  const cases = pathCases(doc)
  t.equal(cases.length, 46, 'the document lists 46 GET paths')
  for (const c of cases) {
    const segments = c.valid.split('?')[0].split('/').slice(1)
    t.equal(matchOperation('get', segments)?.operation.operationId, c.operationId, `${c.template}: routed to its operation`)
    t.equal(check('GET', c.valid).rejection, null, `${c.valid}: accepted`)
    const refused = check('GET', c.invalid).rejection
    t.same(refused && [refused.status, refused.messages], [c.status, c.messages], `${c.invalid}: refused as the node does`)
  }
  t.same(check('GET', '/no-such-resource').rejection, { status: 404, messages: [{ message: 'Not found' }] }, 'a path the API does not have')
  t.same(messages('/accounts', 'POST'), ['Not found'], 'POST where the API has only GET')
})

t.test('handlers stricter or looser than the document', async (t) => {
  // The document allows limit up to 100 only; the node caps larger values, the gateway refuses by default.
  t.same(messages('/blocks?limit=101'), ['Invalid parameter: limit'])
  // The document's EntityId pattern has no EVM form; the handler accepts one for contract.id, with eq only.
  t.same(messages('/contracts?contract.id=0x' + 'ab'.repeat(20)), [])
  t.same(messages('/contracts?contract.id=gt:0x' + 'ab'.repeat(20)), ['Invalid parameter: contract.id'])
  // sequencenumber: the document says minimum 0, the handler wants a positive long.
  t.same(messages('/topics/0.0.3001/messages/0'), ['Invalid parameter: sequencenumber'])
  // block.number accepts hex in the handler.
  t.same(messages('/blocks?block.number=gte:0x10'), [])
  t.same(messages('/blocks?block.number=ne:5'), ['Invalid parameter: block.number'])
  // rest-java ignores keys it does not declare; the REST module reports them.
  t.same(messages('/network/supply?foo=1'), [])
  t.same(messages('/blocks?foo=1&limit=0'), ['Invalid parameter: limit', 'Unknown query parameter: foo'])
  t.same(messages('/network/nodes?node.id=x&limit=0'), ['Invalid parameter: node.id', 'Invalid parameter: limit'])
  // transaction.index needs a block filter beside it.
  t.same(messages('/contracts/results?transaction.index=1'), ['Invalid parameter usage: transaction.index - transaction.index requires block.number or block.hash filter to be specified'])
  t.same(messages('/contracts/results?transaction.index=1&block.number=5'), [])
  // Topic filters are eq only.
  t.same(messages('/contracts/results/logs?topic0=gt:0xab'), ['Invalid parameter: topic0'])
})

t.test('issue 18: query keys with brackets are read as the node’s qs (depth 1, arrayLimit 100)', async (t) => {
  t.same(messages('/transactions?limit[]=5&limit[1]=6'), [], 'array syntax is the key itself')
  t.same(messages('/transactions?limit[x]=5'), ['Invalid parameter: limit'], 'an object value: a 400 naming the key (the node fails with 500)')
  t.same(messages('/transactions?limit[101]=5'), ['Invalid parameter: limit'], 'an index above arrayLimit makes an object too')
  t.same(messages('/accounts?Account.Balance[x]=1'), ['Invalid parameter: account.balance'], 'the older validator, key lower-cased')
  t.same(messages('/transactions?a[b][c]=1&limit=0'), ['Input depth exceeded depth option of 1 and strictDepth is true'], 'deeper than 1: the qs refusal, before any value check')
  t.same(messages('/network/stake?x[y][z]=1'), ['Input depth exceeded depth option of 1 and strictDepth is true'], 'rest-java routes too')
})

t.test('issue 18: repeated range operators on one parameter', async (t) => {
  t.same(messages('/accounts/0.0.1001/nfts?token.id=gt:0.0.1&token.id=gte:0.0.2'), ['Only one gt/gte operator is allowed for token.id'])
  t.same(messages('/accounts/0.0.1001/nfts?serialnumber=lt:5&serialnumber=lte:9'), ['Only one lt/lte operator is allowed for serialnumber'])
  t.same(messages('/accounts/0.0.1001/nfts?token.id=0.0.1&token.id=0.0.2'), ['Only one equal (eq) operator is allowed for token.id'])
  t.same(messages('/accounts/0.0.1001/nfts?token.id=ne:0.0.1'), ['Not equal (ne) operator is not supported for token.id'])
  t.same(messages('/accounts/0.0.1001/nfts?token.id=gt:0.0.1&token.id=lt:0.0.9'), [], 'one lower and one upper bound is a range')
  t.same(messages('/accounts/0.0.1001/allowances/tokens?spender.id=gt:0.0.1&spender.id=gt:0.0.2'), ['Only one gt/gte operator is allowed for spender.id'])
  t.same(messages('/contracts/results/logs?timestamp=gt:1&timestamp=gt:2'), ['Only one gt/gte operator is allowed for timestamp'])
  t.same(messages('/transactions?timestamp=gt:1&timestamp=gte:2'), ['Multiple gt or gte operators not permitted for timestamp param'], 'the older timestamp rule where the node uses it')
  t.same(messages('/topics/0.0.3001/messages?timestamp=gt:1&timestamp=gt:2'), [], 'topic messages intersect repeated bounds')
  t.same(messages('/accounts/0.0.1001/nfts?token.id=gt:x&token.id=gt:0.0.2'), ['Invalid parameter: token.id'], 'bad values are reported before bounds')
})

t.test('issue 18: limit on single-entity routes', async (t) => {
  t.same(messages('/blocks/12?limit=5'), ['Unknown query parameter: limit'], 'a block accepts no query')
  t.same(messages('/blocks/x!?limit=5'), ['Unknown query parameter: limit'], 'the query is checked before the path there')
  t.same(messages('/schedules/0.0.1001?limit=5'), ['Unknown query parameter: limit'])
  t.same(messages('/tokens/0.0.2001/nfts/1?limit=5'), ['Unknown query parameter: limit'])
  t.same(messages('/topics/messages/1700000000.000000001?limit=5'), ['Unknown query parameter: limit'])
  t.same(messages('/transactions/0.0.1001-1700099999-000000000?limit=5'), ['Unknown query parameter: limit'])
  t.same(messages('/tokens/0.0.2001?limit=5'), ['Unknown query parameter: limit'])
  t.same(messages('/contracts/results/0.0.1001-1700099999-000000000?limit=5'), ['Unknown query parameter: limit'])
  t.same(messages('/contracts/0.0.1001/results/1700000000.000000001?limit=0'), [], 'this handler never reads its query')
  t.same(messages('/accounts/0.0.1001?limit=0'), ['Invalid parameter: limit'], 'an account pages its transactions: limit is checked')
  t.same(messages('/topics/0.0.3001?limit=0'), [], 'rest-java ignores a key it does not declare')
})

t.test('contracts/call bodies, as web3 binds and validates them', async (t) => {
  const to = '0x' + '00'.repeat(19) + '67'
  t.equal(checkContractCall({ to, data: '0x70a08231', block: 'latest', estimate: false }), null)
  t.equal(checkContractCall({ to, block: '0x1a' }), null)
  const bad = (body: unknown) => checkContractCall(body)?.messages.map((m) => m.detail)
  t.same(bad({ to: '0x12', gas: 5 }), ['gas field must be greater than or equal to 21000', 'to field invalid hexadecimal string'])
  t.same(bad({ to, value: 5 }), ['from field must not be empty'])
  t.same(bad({ to, data: 'zz' }), ['data field invalid hexadecimal string'])
  t.same(bad({ to, gas: 'lots' }), ['Unable to read the request body: field gas has the wrong type'])
  t.same(bad({ to, block: 'yesterday' }), ['Invalid block value'])
  t.same(bad([1]), ['Unable to read the request body: a JSON object is expected'])
  t.same(checkContractCall({ to: 5 })?.messages[0], { message: 'Bad Request', detail: 'Unable to read the request body: field to has the wrong type', data: '' }, "web3's message shape")
})
