/**
 * The dashboard's answers tally (core/dashboard/traffic.ts) on real stores: refusals by status and
 * reason per hour, per key requests/refusals/last use, two instances on one shared store adding up
 * (compare-and-set, not last-writer-wins), old hours dropped; the window view and the exports.
 */
import t, { type Test } from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openSqliteStore } from '../../../core/store/sqlite.ts'
import { openSharedStore } from '../../../core/store/shared/index.ts'
import { TrafficLog, UNATTRIBUTED, answerOf, unattributedLabel } from '../../../core/dashboard/traffic.ts'
import { trafficExport } from '../../../core/dashboard/export.ts'
import { balanceView, chartOf, trafficOf } from '../../../core/dashboard/data.ts'
import type { Project } from '../../../core/projects/projects.ts'
import { GatewayError } from '../../../core/proxy/errors.ts'
import { freshPrefix, freshSchema, needServers, PG_URL, REDIS_URL } from '../../helpers/shared-servers.ts'

const project = { id: 'acme', plan: 'standard', scopes: new Set(['rpc']) } as unknown as Project
const key = { label: 'app', hash: 'x', disabled: false } as any
const NOW = Date.UTC(2026, 10, 27, 15, 20)

t.test('answers: a refusal keeps its reason, a success its status', async (t) => {
  t.equal(answerOf({ refused: { project, key, reason: 'wrong_plan' }, error: new GatewayError(403, 'forbidden', 'x') }, 403), '403 wrong_plan')
  t.equal(answerOf({ error: new GatewayError(402, 'credits_exhausted', 'x') }, 402), '402 credits_exhausted')
  t.equal(answerOf({}, 404), '404')
  t.equal(answerOf({ error: new GatewayError(502, 'upstream_unavailable', 'x') }, 502), '502', '5xx keep their status only')
})

t.test('balance in the ledger terms: pending apart, percent of allocation + granted', async (t) => {
  const view = balanceView({ projectId: 'acme', period: '2026-11', allocation: 1000, granted: 500, used: 30, remaining: 1470 }, [
    { kind: 'allocation', amount: 1000 },
    { kind: 'pending', amount: -5 },
  ])
  t.match(view, { allocation: 1000, granted: 500, used: 25, pending: 5, remaining: 1470, total: 1500 })
  t.equal(view.allocation + view.granted - view.used - view.pending!, view.remaining, 'the terms add up')
  t.equal(Math.round(view.percentLeft), 98)
  t.notOk('pending' in balanceView({ projectId: 'a', period: 'p', allocation: 0, granted: 0, used: 0, remaining: 0 }), 'no ledger read: no pending claimed')
})

t.test('chart: workstation minutes are their own series, never requests', async (t) => {
  const chart = chartOf([
    { bucket: '2026-11-27T15:00:00.000Z', apiType: 'workstation', requests: 42, credits: 42, errors: 0 },
    { bucket: '2026-11-27T15:00:00.000Z', apiType: 'PRIVNET_RPC', requests: 5, credits: 5, errors: 0 },
  ], NOW)
  t.same(chart.series.map((s) => s.apiType), ['PRIVNET_RPC'])
  t.equal(chart.workstationMinutes.at(-1), 42)
})

async function tallies(t: Test, open: () => Promise<any>) {
  let now = NOW
  const clock = () => now
  const a = new TrafficLog(await open(), clock)
  const b = new TrafficLog(await open(), clock)
  for (let i = 0; i < 3; i++) a.record({ refused: { project, key, reason: 'wrong_plan' } }, 403)
  a.record({ project, apiKey: key }, 200)
  b.record({ refused: { project, key, reason: 'wrong_scope' } }, 403)
  b.record({ project, apiKey: key }, 200)
  b.record({}, 401) // no key at all: nothing to book it on
  // A disabled key still belongs to its project: counted there, on the key.
  b.record({ refused: { project, key, reason: 'disabled_key' }, routeName: 'rpc' }, 401)
  // A key no project has: counted under no project, by route.
  a.record({ refused: { reason: 'unknown_key' }, routeName: 'rpc' }, 401)
  b.record({ refused: { reason: 'unknown_key' }, routeName: 'rpc' }, 401)
  t.same((await a.read('acme')).hours, { '2026-11-27T15:00:00.000Z': { '403 wrong_plan': 3, '200': 1 } }, 'unflushed counts are read at once')
  await Promise.all([a.flush(), b.flush()])
  const merged = await a.read('acme')
  t.same(merged.hours['2026-11-27T15:00:00.000Z'], { '403 wrong_plan': 3, '200': 2, '403 wrong_scope': 1, '401 disabled_key': 1 }, 'two instances add up')
  t.match(merged.keys.app, { requests: 7, refusals: 5, lastUsed: NOW })
  const unattributed = await b.read(UNATTRIBUTED)
  t.same(unattributed.hours, { '2026-11-27T15:00:00.000Z': { '401 unknown_key': 2 } }, 'unknown keys: a tally of their own')
  t.same(Object.keys(unattributed.keys), ['route:rpc 401 unknown_key'], 'by route and answer, never by the presented key')
  t.same(unattributedLabel('route:rpc 401 unknown_key'), { route: 'rpc', answer: '401 unknown_key' })
  t.same(unattributedLabel('route:rpc'), { route: 'rpc', answer: '' }, 'a label of an older tally still reads')
  // Two days later an old hour is dropped at the next merge.
  now += 49 * 3_600_000
  a.record({ project, apiKey: key }, 200)
  await a.flush()
  const later = await b.read('acme')
  t.same(Object.keys(later.hours), ['2026-11-29T16:00:00.000Z'])
  t.equal(later.keys.app!.requests, 8, 'key totals are kept')
  const chart = chartOf([], now)
  const view = trafficOf(later, chart).view
  t.equal(view.total, 1)
}

t.test('answers on both sides of an hour boundary, not flushed between, count in their own hours', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-traffic-hours-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const store = openSqliteStore({ dataDir: dir })
  t.teardown(() => store.close())
  let now = Date.UTC(2026, 10, 27, 15, 59, 59)
  const log = new TrafficLog(store, () => now)
  log.record({ project, apiKey: key }, 200)
  log.record({ project, apiKey: key }, 502)
  now += 2000
  log.record({ project, apiKey: key }, 200)
  log.record({ refused: { project, key, reason: 'wrong_scope' } }, 403)
  const expected = {
    '2026-11-27T15:00:00.000Z': { '200': 1, '502': 1 },
    '2026-11-27T16:00:00.000Z': { '200': 1, '403 wrong_scope': 1 },
  }
  t.same((await log.read('acme')).hours, expected, 'read before the flush')
  t.same((await log.read('acme')).keys.app, { requests: 4, refusals: 1, lastUsed: now }, 'read twice: counted once')
  await log.flush()
  t.same((await log.read('acme')).hours, expected, 'and after it')
  await log.close()
})

t.test('the tally on the embedded store', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-traffic-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const store = openSqliteStore({ dataDir: dir })
  t.teardown(() => store.close())
  await tallies(t, async () => store)
})

t.test('the tally on the shared store (two instances)', async (t) => {
  if (!(await needServers(t))) return
  const schema = freshSchema(t)
  const keyPrefix = freshPrefix(t)
  await tallies(t, async () => {
    const store = await openSharedStore({ postgres: PG_URL, redis: REDIS_URL, schema, keyPrefix, poolSize: 2 })
    t.teardown(() => store.close())
    return store
  })
})

t.test('exports: refusals by reason per hour, keys; CSV cells neutralised', async (t) => {
  const tally = { hours: { '2026-11-27T15:00:00.000Z': { '403 wrong_plan': 4, '200': 3 } }, keys: { '=cmd': { requests: 7, refusals: 4, lastUsed: NOW } } }
  const csv = trafficExport(project, tally, 'traffic.csv')!
  t.equal(csv.body, 'hour,status,code,refusal,count\n2026-11-27T15:00:00.000Z,200,,false,3\n2026-11-27T15:00:00.000Z,403,wrong_plan,true,4\n')
  const nd = trafficExport(project, tally, 'traffic.ndjson')!
  t.same(nd.body.trim().split('\n').map((line) => JSON.parse(line)).find((r) => r.code === 'wrong_plan'), { hour: '2026-11-27T15:00:00.000Z', status: 403, code: 'wrong_plan', refusal: true, count: 4 })
  t.match(trafficExport(project, tally, 'keys.csv')!.body, /^label,requests,refusals,lastUsed\n'=cmd,7,4,2026-11-27T15:20:00.000Z\n$/, 'a leading = is neutralised')
  t.equal(trafficExport(project, tally, 'other.csv'), undefined)
})
