import t, { type Test } from 'tap'
import { assertValidBody, compileBodyValidators, isLedgerEntityId } from '../../../plugins/events/schema.ts'
import { DEFAULT_TYPE_IDS, itemKey, newEventItem } from '../../../plugins/events/items.ts'
import { GatewayError } from '../../../core/proxy/errors.ts'

const validators = compileBodyValidators()

function messageOf(t: Test, run: () => void): string | undefined {
  try {
    run()
    return undefined
  } catch (error) {
    if (!(error instanceof GatewayError)) throw error
    t.equal(error.status, 400)
    t.equal(error.code, 'invalid_body')
    return error.message
  }
}

t.test('ledger entity ids: shard and realm 0, canonical, num within 38 bits', async (t) => {
  for (const ok of ['0.0.0', '0.0.1001', '0.0.274877906943']) t.ok(isLedgerEntityId(ok), ok)
  for (const bad of ['0.0.274877906944', '0.0.007', '1.0.5', '0.0', '0.0.-1', '0.0.1 ', '0x1234']) t.notOk(isLedgerEntityId(bad), bad)
})

t.test('create bodies: the message names the field and its expectation', async (t) => {
  const topic = '0x' + 'Ab'.repeat(32)
  t.equal(messageOf(t, () => assertValidBody(validators.create.ethtopic, { scoutSettings: { item_id: topic, network_id: 295 } })), undefined)
  t.equal(messageOf(t, () => assertValidBody(validators.create.account, { scoutSettings: { item_id: '0.0.1', network_id: 296 } })), undefined)
  t.equal(
    messageOf(t, () => assertValidBody(validators.create.account, { scoutSettings: { item_id: '0.0.1', network_id: 1 } })),
    'scoutSettings.network_id must be 295 or 296',
  )
  t.equal(
    messageOf(t, () => assertValidBody(validators.create.contract, { scoutSettings: { item_id: topic, network_id: 296 } })),
    'scoutSettings.item_id must be a ledger entity id 0.0.<number> for a contract item',
  )
  t.equal(
    messageOf(t, () => assertValidBody(validators.create.ethtopic, { scoutSettings: { item_id: '0x12', network_id: 296 } })),
    'scoutSettings.item_id must be 0x followed by 64 hex digits for an ethtopic item',
  )
  t.equal(
    messageOf(t, () => assertValidBody(validators.create.account, { scoutSettings: 'x' })),
    'scoutSettings must be an object with item_id and network_id',
  )
  t.equal(messageOf(t, () => assertValidBody(validators.create.account, null)), 'body must be a JSON object {"scoutSettings":{"item_id":...,"network_id":...}}')
})

t.test('list bodies: only an empty object', async (t) => {
  t.equal(messageOf(t, () => assertValidBody(validators.list, {})), undefined)
  t.equal(messageOf(t, () => assertValidBody(validators.list, { a: 1 })), 'a is not an accepted field; body must be an empty JSON object {}')
  t.equal(messageOf(t, () => assertValidBody(validators.list, 'x')), 'body must be an empty JSON object {}')
  t.equal(messageOf(t, () => assertValidBody(validators.list, undefined)), 'a request body is required: body must be an empty JSON object {}')
})

t.test('items: new ones are queued and disabled; keys are one per project, kind, network and item', async (t) => {
  const now = new Date('2026-01-02T03:04:05.678Z')
  const item = newEventItem({ kind: 'ethtopic', projectId: 'p', itemId: '0x' + 'AB'.repeat(32), networkId: 295, typeIds: DEFAULT_TYPE_IDS, requestFetchLimit: 100, now })
  t.match(item, {
    item_id: '0x' + 'ab'.repeat(32),
    user_id: 'p',
    network_id: 295,
    type_id: 5,
    enabled: false,
    json_settings: { events: [] },
    status: 'QUEUED',
    created_at: '2026-01-02T03:04:05.678Z',
    updated_at: '2026-01-02T03:04:05.678Z',
    job_health_timestamp: '1970-01-01T00:00:00.000Z',
    request_fetch_limit: 100,
  })
  t.equal(itemKey('p', 'ethtopic', 295, '0x' + 'AB'.repeat(32)), itemKey('p', 'ethtopic', 295, '0x' + 'ab'.repeat(32)))
  t.not(itemKey('p', 'account', 295, '0.0.1'), itemKey('p', 'contract', 295, '0.0.1'))
  t.not(itemKey('p', 'account', 295, '0.0.1'), itemKey('p', 'account', 296, '0.0.1'))
  t.not(itemKey('p', 'account', 295, '0.0.1'), itemKey('q', 'account', 295, '0.0.1'))
})
