/**
 * The event settings service through a real gateway process: create each item kind, list, project
 * isolation, duplicates, persistence across SIGKILL, metering and every kind of bad input.
 */
import t from 'tap'
import { join } from 'node:path'
import { hashCredential } from '../../core/projects/projects.ts'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { tempDir } from '../helpers/temp.ts'

const alpha = { id: 'alpha', key: 'alpha-key-0123456789abcdef', secret: 'alpha-secret-0123456789' }
const beta = { id: 'beta', key: 'beta-key-0123456789abcdef', secret: 'beta-secret-0123456789' }
const poor = { id: 'poor', key: 'poor-key-0123456789abcdef', secret: 'poor-secret-0123456789' }

const project = (p: typeof alpha, allocation: number) => `
  - id: ${p.id}
    scopes: [events]
    credits: { allocation: ${allocation}, period: month }
    secretHash: ${hashCredential(p.secret)}
    keys:
      - { label: default, hash: ${hashCredential(p.key)} }`

const chain = `
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: events } }
      - { name: secret-check, config: { header: x-api-secret } }
      - { name: rate-limit, config: { by: project, capacity: 1000, refillPerSecond: 100 } }
      - { name: credit-meter, config: { apiType: EVENTS, cost: 1 } }`

const config = `version: 1
server: { listen: { host: 127.0.0.1, port: 0 } }
admin: { listen: { host: 127.0.0.1, port: 0 } }
store: { dataDir: '{{DIR}}/data' }
log: { level: info }
watch: false
projects:${project(alpha, 100000)}${project(beta, 100000)}${project(poor, 2)}
routes:
  - name: events-create
    methods: [POST]
    path: /events/ledger/create/:item/:apiKey
    apiType: EVENTS
    maxBodyBytes: 4096
    handler: { name: events, config: { operation: create } }${chain}
  - name: events-settings
    methods: [POST]
    path: /events/ledger/settings/:apiKey
    apiType: EVENTS
    maxBodyBytes: 1024
    handler: { name: events, config: { operation: list } }${chain}
`

const ITEM_FIELDS = [
  'created_at', 'enabled', 'id', 'item_id', 'job_health_timestamp', 'json_settings', 'network_id',
  'request_fetch_limit', 'status', 'type_id', 'updated_at', 'user_id',
]
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
const TOPIC = '0x' + 'ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef'

interface Call {
  status: number
  headers: Headers
  body: any
  text: string
}

type Who = { key: string; secret?: string }

const dir = tempDir('tollgate-events-')
let gateway: GatewayProcess
/** Output of processes already stopped. */
const earlierOutput: string[] = []

async function post(path: string, body: string | undefined, headers: Record<string, string>): Promise<Call> {
  const res = await fetch(gateway.url + path, { method: 'POST', headers, body })
  const text = await res.text()
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    parsed = undefined
  }
  return { status: res.status, headers: res.headers, body: parsed, text }
}

function authHeaders(who: Who, extra: Record<string, string> = {}): Record<string, string> {
  return { 'content-type': 'application/json', ...(who.secret === undefined ? {} : { 'x-api-secret': who.secret }), ...extra }
}

const create = (who: Who, kind: string, body: unknown, extra?: Record<string, string>) =>
  post(`/events/ledger/create/${kind}/${who.key}`, typeof body === 'string' ? body : JSON.stringify(body), authHeaders(who, extra))
const list = (who: Who, body: unknown = {}, extra?: Record<string, string>) =>
  post(`/events/ledger/settings/${who.key}`, typeof body === 'string' ? body : JSON.stringify(body), authHeaders(who, extra))
const scout = (itemId: string, networkId: unknown = 296) => ({ scoutSettings: { item_id: itemId, network_id: networkId } })

t.before(async () => {
  gateway = await startGatewayProcess(config, { dir })
})
t.teardown(async () => {
  await gateway?.stop('SIGTERM')
})

const created: Record<string, any> = {}

t.test('creating each kind answers the item with every field of the spec', async (t) => {
  const cases = [
    { kind: 'contract', itemId: '0.0.1001', network: 296, typeId: 2, settings: { events: [] } },
    { kind: 'ethtopic', itemId: TOPIC, network: 295, typeId: 5, settings: { events: [] } },
    {
      kind: 'account', itemId: '0.0.5802863', network: 296, typeId: 1,
      settings: { metadata: { eventRules: [] }, balance: { eventRules: [] }, expiration: { eventRules: [] } },
    },
  ]
  for (const c of cases) {
    const before = Date.now()
    const res = await create(alpha, c.kind, scout(c.itemId, c.network))
    const after = Date.now()
    t.equal(res.status, 200, `${c.kind}: 200`)
    t.match(res.headers.get('content-type'), /^application\/json/)
    t.same(Object.keys(res.body).sort(), ['response', 'status'])
    t.equal(res.body.status, true)
    const item = res.body.response
    t.same(Object.keys(item).sort(), ITEM_FIELDS, `${c.kind}: exactly the spec's fields`)
    t.type(item.id, 'string')
    t.ok(item.id.length > 0)
    t.equal(item.item_id, c.itemId)
    t.equal(item.user_id, 'alpha')
    t.equal(item.network_id, c.network)
    t.equal(item.type_id, c.typeId, `${c.kind}: type_id`)
    t.equal(item.enabled, false)
    t.same(item.json_settings, c.settings, `${c.kind}: json_settings`)
    t.equal(item.status, 'QUEUED')
    t.match(item.created_at, ISO_UTC)
    t.equal(item.updated_at, item.created_at)
    t.ok(Date.parse(item.created_at) >= before - 1000 && Date.parse(item.created_at) <= after + 1000, 'created_at is the creation time')
    t.equal(item.job_health_timestamp, '1970-01-01T00:00:00.000Z')
    t.equal(item.request_fetch_limit, 100)
    created[c.kind] = item
  }
  t.not(created.contract.id, created.account.id, 'ids differ between items')
})

t.test('a duplicate create returns the existing item; concurrent duplicates make one item', async (t) => {
  const again = await create(alpha, 'contract', scout('0.0.1001'))
  t.equal(again.status, 200)
  t.equal(again.body.status, true)
  t.same(again.body.response, created.contract, 'the stored item, unchanged')

  const upper = await create(alpha, 'ethtopic', scout(TOPIC.toUpperCase().replace('0X', '0x'), 295))
  t.equal(upper.status, 200)
  t.equal(upper.body.response.id, created.ethtopic.id, 'topic ids compare case-insensitively')

  const otherNetwork = await create(alpha, 'contract', scout('0.0.1001', 295))
  t.not(otherNetwork.body.response.id, created.contract.id, 'another network is another item')
  created.contractMainnet = otherNetwork.body.response

  const racing = await Promise.all(Array.from({ length: 6 }, () => create(alpha, 'account', scout('0.0.42'))))
  t.same([...new Set(racing.map((r) => r.status))], [200])
  t.equal(new Set(racing.map((r) => r.body.response.id)).size, 1, 'all six answers name one item')
  created.race = racing[0].body.response
})

t.test('listing answers the project\'s items, oldest first', async (t) => {
  const res = await list(alpha)
  t.equal(res.status, 200)
  t.ok(Array.isArray(res.body))
  t.same(res.body, [created.contract, created.ethtopic, created.account, created.contractMainnet, created.race])
})

t.test('projects never see each other\'s items', async (t) => {
  const empty = await list(beta)
  t.equal(empty.status, 200)
  t.same(empty.body, [])

  const same = await create(beta, 'account', scout('0.0.5802863'))
  t.equal(same.status, 200)
  t.equal(same.body.response.user_id, 'beta')
  t.not(same.body.response.id, created.account.id, 'the same account is a separate item in another project')

  const betaList = await list(beta)
  t.same(betaList.body, [same.body.response])
  const alphaList = await list(alpha)
  t.equal(alphaList.body.length, 5, 'alpha\'s list did not change')
  t.notOk(alphaList.body.some((item: any) => item.user_id !== 'alpha'))

  const crossed = await list({ key: alpha.key, secret: beta.secret })
  t.equal(crossed.status, 403, 'another project\'s secret does not open this project')
  t.equal(crossed.body.error.code, 'invalid_api_secret')
})

t.test('bad input answers a 4xx with a stable code naming the problem', async (t) => {
  const noSecret = await create({ key: alpha.key }, 'account', scout('0.0.7'))
  t.equal(noSecret.status, 401)
  t.equal(noSecret.body.error.code, 'missing_api_secret')

  const wrongSecret = await create({ key: alpha.key, secret: 'nope' }, 'account', scout('0.0.7'))
  t.equal(wrongSecret.status, 403)
  t.equal(wrongSecret.body.error.code, 'invalid_api_secret')

  const unknownKey = await list({ key: 'no-such-key', secret: alpha.secret })
  t.equal(unknownKey.status, 401)
  t.equal(unknownKey.body.error.code, 'invalid_api_key')

  const kind = await create(alpha, 'foo', scout('0.0.7'))
  t.equal(kind.status, 404)
  t.same(kind.body.error, { code: 'unknown_item_kind', message: 'unknown item kind "foo"; expected contract, ethtopic or account' })

  const notJson = await create(alpha, 'account', '{"scoutSettings":')
  t.equal(notJson.status, 400)
  t.equal(notJson.body.error.code, 'invalid_json')

  const wrongType = await post(`/events/ledger/create/account/${alpha.key}`, 'item_id=0.0.7', authHeaders(alpha, { 'content-type': 'application/x-www-form-urlencoded' }))
  t.equal(wrongType.status, 415)
  t.equal(wrongType.body.error.code, 'unsupported_media_type')

  const fields: [string, unknown, string][] = [
    ['account', scout('0.0.7', 297), 'scoutSettings.network_id must be 295 or 296'],
    ['account', scout('0.0.7', '296'), 'scoutSettings.network_id must be 295 or 296'],
    ['contract', scout('0x1234'), 'scoutSettings.item_id must be a ledger entity id 0.0.<number> for a contract item'],
    ['account', scout('1.2.3'), 'scoutSettings.item_id must be a ledger entity id 0.0.<number> for an account item'],
    ['ethtopic', scout('0.0.7'), 'scoutSettings.item_id must be 0x followed by 64 hex digits for an ethtopic item'],
    ['account', { scoutSettings: { network_id: 296 } }, 'scoutSettings.item_id is required'],
    ['account', {}, 'scoutSettings is required'],
    ['account', { scoutSettings: { item_id: '0.0.7', network_id: 296, extra: 1 } }, 'scoutSettings.extra is not an accepted field'],
    ['account', { ...scout('0.0.7'), other: true }, 'other is not an accepted field'],
    ['account', [], 'body must be a JSON object'],
    ['account', '', 'a request body is required'],
  ]
  for (const [k, body, message] of fields) {
    const res = await create(alpha, k, body)
    t.equal(res.status, 400, `400 for ${JSON.stringify(body)}`)
    t.equal(res.body.error.code, 'invalid_body')
    t.match(res.body.error.message, message)
  }

  const listField = await list(alpha, { page: 2 })
  t.equal(listField.status, 400)
  t.equal(listField.body.error.code, 'invalid_body')
  t.match(listField.body.error.message, /^page is not an accepted field; body must be an empty JSON object \{\}/)
  const listArray = await list(alpha, [])
  t.equal(listArray.status, 400)
  t.match(listArray.body.error.message, 'body must be an empty JSON object')

  const after = await list(alpha)
  t.equal(after.body.length, 5, 'no bad request created anything')
})

t.test('the routes are metered and rate limited', async (t) => {
  const refused = await list(poor, { page: 1 })
  t.equal(refused.status, 400, 'a refused request is not charged')
  const first = await list(poor)
  t.equal(first.status, 200)
  t.ok(first.headers.get('ratelimit-limit') ?? first.headers.get('ratelimit'), 'rate-limit headers on the answer')
  await list(poor)
  const third = await list(poor)
  t.equal(third.status, 402, 'a project out of credits is refused')
  t.equal(third.body.error.code, 'credits_exhausted')
})

t.test('items survive a SIGKILL and a restart on the same data dir', async (t) => {
  const fresh = await create(alpha, 'contract', scout('0.0.777'))
  t.equal(fresh.status, 200)
  const before = await list(alpha)
  t.equal(await gateway.stop('SIGKILL'), null)
  earlierOutput.push(...gateway.output)
  gateway = await startGatewayProcess(config, { dir })
  const after = await list(alpha)
  t.equal(after.status, 200)
  t.same(after.body, before.body, 'the same items, fields unchanged')
  t.equal(after.body.at(-1).id, fresh.body.response.id, 'the last item answered before the kill is there')
  const again = await create(alpha, 'contract', scout('0.0.777'))
  t.same(again.body.response, fresh.body.response, 'duplicates still find the stored item')
  t.same((await list(beta)).body.length, 1)
})

t.test('keys and secrets never reach the logs', async (t) => {
  const log = [...earlierOutput, ...gateway.output].join('\n')
  t.ok(log.includes('"route":"events-create"'), 'the access log was captured')
  for (const credential of [alpha.key, alpha.secret, beta.key, beta.secret]) t.notOk(log.includes(credential))
})
