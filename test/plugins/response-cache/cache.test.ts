import t from 'tap'
import { declaredSeconds, freshSeconds, isShareable } from '../../../plugins/response-cache/freshness.ts'
import { ageOf, storedAnswer } from '../../../plugins/response-cache/entry.ts'
import { acquireStore } from '../../../plugins/response-cache/store.ts'

t.test('freshSeconds: s-maxage over max-age, minus Age, capped; 0 means not stored', async (t) => {
  t.equal(freshSeconds({ 'cache-control': 'public, max-age=10' }, 60), 10)
  t.equal(freshSeconds({ 'cache-control': 'public, max-age=600' }, 60), 60, 'capped')
  t.equal(freshSeconds({ 'cache-control': 'max-age=10, s-maxage=3' }, 60), 3, 's-maxage wins in a shared cache')
  t.equal(freshSeconds({ 'cache-control': 'max-age=10', age: '4' }, 60), 6)
  t.equal(freshSeconds({ 'cache-control': 'max-age=10', age: '40' }, 60), 0)
  for (const control of ['no-store', 'private, max-age=10', 'no-cache, max-age=10', 'max-age=0', 'public', 'max-age=abc', '']) {
    t.equal(freshSeconds({ 'cache-control': control }, 60), 0, JSON.stringify(control))
  }
  t.equal(freshSeconds({}, 60), 0, 'no cache-control')
  t.equal(freshSeconds({ 'cache-control': 'MAX-AGE=5' }, 60), 5, 'directive names are case-insensitive')
})

t.test('declaredSeconds: what the upstream declares, uncapped; undefined when it declares nothing', async (t) => {
  t.equal(declaredSeconds({ 'cache-control': 'public, max-age=600' }), 600)
  t.equal(declaredSeconds({ 'cache-control': 'max-age=600, s-maxage=2' }), 2, 's-maxage for a shared cache')
  t.equal(declaredSeconds({ 'cache-control': 'max-age=10', age: '4' }), 6, 'minus Age')
  t.equal(declaredSeconds({ 'cache-control': 'max-age=10', age: '40' }), 0)
  t.equal(declaredSeconds({ 'cache-control': 'max-age=abc' }), 0, 'unreadable: stale')
  t.equal(declaredSeconds({ 'cache-control': 'public' }), undefined, 'no freshness declared: the caller falls back')
  t.equal(declaredSeconds({}), undefined)
})

t.test('isShareable: no private answers, cookies or unknown Vary', async (t) => {
  t.ok(isShareable({ 'cache-control': 'public, max-age=2' }))
  t.ok(isShareable({}), 'no cache-control: may be shared with concurrent requests, not stored')
  t.ok(isShareable({ vary: 'Accept-Encoding' }))
  t.notOk(isShareable({ vary: 'Accept-Encoding, Authorization' }))
  t.notOk(isShareable({ vary: '*' }))
  t.notOk(isShareable({ 'set-cookie': 'a=b' }))
  t.notOk(isShareable({ 'cache-control': ['public', 'private'] }))
})

t.test('storedAnswer and ageOf: per-exchange headers dropped, Age computed', async (t) => {
  const stored = storedAnswer({
    status: 200,
    headers: { 'content-type': 'application/json', 'content-length': '2', 'x-request-id': 'r1', 'set-cookie': 'a=b', link: ['<a>', '<b>'], age: '3', 'ratelimit-limit': '5' },
    body: Buffer.from('{}'),
  }, 'key')
  t.same(stored.headers, { 'content-type': 'application/json', link: '<a>, <b>' })
  t.equal(stored.ageAtStore, 3)
  t.ok(stored.size > 2 + 'key'.length)
  t.equal(ageOf(stored), '3')
  t.equal(ageOf({ ...stored, storedAt: Date.now() - 5500 }), '8')
})

t.test('acquireStore: shared by identity, dropped with its last holder; flights settle once', async (t) => {
  const options = { maxBytes: 1000, maxEntryBytes: 1000, onEvict: () => {} }
  const a = acquireStore('route-a', options)
  const b = acquireStore('route-a', options)
  t.equal(a.store, b.store, 'a reload with the same identity gets the same store')
  a.store.entries.set('k', storedAnswer({ status: 200, headers: {}, body: Buffer.from('x') }, 'k'))
  a.release()
  a.release()
  t.ok(b.store.entries.has('k'), 'kept while one holder remains (release is idempotent)')
  const flight = b.store.lead('f')
  t.equal(b.store.flight('f'), flight)
  b.release()
  t.equal(b.store.entries.size, 0, 'cleared with its last holder')
  t.same(await flight.promise, { kind: 'retry' }, 'waiting requests start over')
  t.equal(b.store.flight('f'), undefined)
  const c = acquireStore('route-a', options)
  t.not(c.store, a.store, 'a new store after the last release')
  c.release()
})

t.test('byte bound: entries over maxEntryBytes are not stored; LRU eviction past maxBytes', async (t) => {
  let evicted = 0
  const { store, release } = acquireStore('route-bytes', { maxBytes: 1200, maxEntryBytes: 700, onEvict: () => evicted++ })
  t.teardown(release)
  const entry = (n: number) => storedAnswer({ status: 200, headers: {}, body: Buffer.alloc(n) }, 'k')
  store.entries.set('big', entry(800))
  t.notOk(store.entries.has('big'), 'bigger than maxEntryBytes')
  store.entries.set('a', entry(400))
  store.entries.set('b', entry(400))
  store.entries.get('a')
  store.entries.set('c', entry(400))
  t.same([store.entries.has('a'), store.entries.has('b'), store.entries.has('c')], [true, false, true], 'the least recently used went')
  t.equal(evicted, 1)
  t.ok(store.entries.calculatedSize <= 1200)
})
