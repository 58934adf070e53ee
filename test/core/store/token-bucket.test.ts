import t from 'tap'
import { TokenBuckets } from '../../../core/store/token-bucket.ts'

function bucketsAt(start = 1_000_000) {
  const clock = { now: start }
  const buckets = new TokenBuckets({ clock: () => clock.now, maxBuckets: 3 })
  return { clock, buckets }
}

t.test('a full bucket allows a burst of its capacity, then refuses with retry-after', async (t) => {
  const { buckets } = bucketsAt()
  for (let i = 4; i >= 0; i--) t.same(buckets.take('k', 5, 1), { allowed: true, limit: 5, remaining: i, resetSeconds: 5 - i, retryAfterSeconds: 0 })
  t.same(buckets.take('k', 5, 1), { allowed: false, limit: 5, remaining: 0, resetSeconds: 5, retryAfterSeconds: 1 })
})

t.test('tokens refill continuously at the configured rate, up to the capacity', async (t) => {
  const { clock, buckets } = bucketsAt()
  for (let i = 0; i < 10; i++) buckets.take('k', 10, 4)
  t.notOk(buckets.take('k', 10, 4).allowed)
  clock.now += 250
  t.ok(buckets.take('k', 10, 4).allowed, 'one token after 250 ms at 4/s')
  t.notOk(buckets.take('k', 10, 4).allowed)
  clock.now += 60_000
  t.equal(buckets.take('k', 10, 4).remaining, 9, 'never more than the capacity')
})

t.test('a cost takes several tokens; a cost above the capacity never passes', async (t) => {
  const { clock, buckets } = bucketsAt()
  t.match(buckets.take('k', 10, 2, 7), { allowed: true, remaining: 3 })
  t.match(buckets.take('k', 10, 2, 7), { allowed: false, remaining: 3, retryAfterSeconds: 2 })
  clock.now += 2000
  t.match(buckets.take('k', 10, 2, 7), { allowed: true, remaining: 0 })
  t.match(buckets.take('fresh', 10, 2, 11), { allowed: false, remaining: 10, retryAfterSeconds: 1 })
  t.match(buckets.take('k', 10, 2, 0), { allowed: true }, 'a zero cost always passes')
})

t.test('keys are independent, and a clock stepping back mints nothing', async (t) => {
  const { clock, buckets } = bucketsAt()
  t.ok(buckets.take('a', 1, 1).allowed)
  t.ok(buckets.take('b', 1, 1).allowed)
  t.notOk(buckets.take('a', 1, 1).allowed)
  clock.now -= 10_000
  t.notOk(buckets.take('a', 1, 1).allowed)
  clock.now += 10_500
  t.notOk(buckets.take('a', 1, 1).allowed, 'the lost 10 s are not credited back')
  clock.now += 500
  t.ok(buckets.take('a', 1, 1).allowed)
})

t.test('memory is bounded: the least recently used bucket is forgotten (as full)', async (t) => {
  const { buckets } = bucketsAt()
  for (const key of ['a', 'b', 'c', 'd']) buckets.take(key, 1, 0.001)
  t.equal(buckets.size, 3)
  t.ok(buckets.take('a', 1, 0.001).allowed, 'the evicted bucket starts over full')
  t.notOk(buckets.take('d', 1, 0.001).allowed, 'recent buckets are kept')
})

t.test('a bucket used again is kept over one used less recently', async (t) => {
  const { buckets } = bucketsAt()
  for (const key of ['a', 'b', 'c']) buckets.take(key, 2, 0.001)
  buckets.take('a', 2, 0.001) // a is now the most recent: b is the least
  buckets.take('c', 2, 0.001)
  buckets.take('d', 2, 0.001) // evicts b
  t.equal(buckets.size, 3)
  t.notOk(buckets.take('a', 2, 0.001).allowed, 'a kept its two takes')
  t.notOk(buckets.take('c', 2, 0.001).allowed, 'c kept its two takes')
  t.equal(buckets.take('b', 2, 0.001).remaining, 1, 'b was forgotten and starts over full')
})

t.test('bad limits are programming errors', async (t) => {
  const { buckets } = bucketsAt()
  t.throws(() => buckets.take('k', 0, 1), RangeError)
  t.throws(() => buckets.take('k', 1, 0), RangeError)
  t.throws(() => buckets.take('k', 1, 1, -1), RangeError)
  t.throws(() => buckets.take('k', Number.NaN, 1), RangeError)
})
