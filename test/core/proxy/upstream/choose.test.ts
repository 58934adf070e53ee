/** The choice among targets: round-robin against least-loaded, the preferred zone, and a pool whose every target backs off after a 429. */
import t, { type Test } from 'tap'
import { normaliseUpstream } from '../../../../core/proxy/upstream/config.ts'
import { Target } from '../../../../core/proxy/upstream/target.ts'
import { chooseTarget, THROTTLED, type ChoicePolicy } from '../../../../core/proxy/upstream/choose.ts'

const config = normaliseUpstream({
  targets: [
    { url: 'http://127.0.0.1:9', name: 'a', zone: 'eu' },
    { url: 'http://127.0.0.1:10', name: 'b', zone: 'eu', weight: 2 },
    { url: 'http://127.0.0.1:11', name: 'c', zone: 'us' },
  ],
  connections: 1,
  timeouts: { connectMs: 100, headersMs: 100, bodyMs: 100 },
  keepAliveTimeoutMs: 100,
  breaker: { recoverMs: 1000 },
})
function make(t: Test): Target[] {
  const targets = config.targets.map((c) => new Target(c, config, config.health, config.breaker.recoverMs))
  t.teardown(() => Promise.all(targets.map((x) => x.pool.close())))
  return targets
}
const names = (picks: unknown[]) => picks.map((p) => (p as Target).name).join('')
function pick(targets: Target[], policy: ChoicePolicy, n: number, now = 0): string {
  const out: unknown[] = []
  for (let i = 0; i < n; i++) out.push(chooseTarget(targets, undefined, now, policy))
  return names(out)
}

t.test('round-robin: weighted turns, blind to load and latency; least-loaded steers away', async (t) => {
  const targets = make(t)
  const [a, b, c] = targets
  a.latencyMs = 400
  a.inFlight = 5
  t.equal(pick(targets, { maxConcurrent: 0, maxPending: 0, balance: 'round-robin' }, 8), 'bacbbacb', 'smooth weighted round-robin (b has weight 2), whatever a carries')
  const ll = pick(targets, { maxConcurrent: 0, maxPending: 0 }, 8)
  t.notMatch(ll, /a/, `least-loaded never picks the slow, loaded target (${ll})`)
  t.equal(chooseTarget(targets, b, 0, { maxConcurrent: 0, maxPending: 0, balance: 'round-robin' }) !== b, true, 'round-robin never picks the excluded target')
  void c
})

t.test('preferZone: local targets first, others only when no local one can take it', async (t) => {
  const targets = make(t)
  const [a, b, c] = targets
  const policy: ChoicePolicy = { maxConcurrent: 2, maxPending: 10, preferZone: 'eu' }
  c.latencyMs = 0
  a.latencyMs = 50
  b.latencyMs = 50
  t.notMatch(pick(targets, policy, 10), /c/, 'the remote target gets nothing while the local ones are healthy (even when faster)')
  t.notMatch(pick(targets, { ...policy, balance: 'round-robin' }, 10), /c/, 'also with round-robin')
  a.failed(0), a.failed(0), a.failed(0), a.failed(0), a.failed(0)
  t.equal(pick(targets, policy, 3, 10), 'bbb', 'a ejected: the other local target')
  b.inFlight = 2
  t.equal(pick(targets, policy, 2, 10), 'cc', 'local ones ejected or saturated (maxConcurrent): the remote zone')
  b.inFlight = 0
  b.throttle(5000, 10)
  t.equal(pick(targets, policy, 1, 20), 'c', 'local one backing off after a 429: the remote zone')
})

t.test('every target backing off after a 429: THROTTLED, then a climbing share', async (t) => {
  const targets = make(t)
  const policy: ChoicePolicy = { maxConcurrent: 0, maxPending: 0 }
  for (const x of targets) x.throttle(2000, 0)
  t.equal(chooseTarget(targets, undefined, 1000, policy), THROTTLED, 'all inside Retry-After: the gateway answers itself')
  t.equal(chooseTarget(targets, targets[0], 1000, policy), THROTTLED, 'also for a retry after the 429')
  let sent = 0
  for (let i = 0; i < 100; i++) if (chooseTarget(targets, undefined, 2100, policy) !== THROTTLED) sent++
  t.ok(sent > 0 && sent < 100, `just after Retry-After some requests pass (${sent}/100)`)
  sent = 0
  for (let i = 0; i < 100; i++) if (chooseTarget(targets, undefined, 3100, policy) !== THROTTLED) sent++
  t.equal(sent, 100, 'after the ramp all pass')
  const [a, b] = targets
  a.throttle(2000, 5000)
  b.failed(5000), b.failed(5000), b.failed(5000), b.failed(5000), b.failed(5000)
  targets[2].throttle(2000, 5000)
  t.not(chooseTarget(targets, undefined, 5001, policy), THROTTLED, 'one ejected, others throttled: panic mode still sends (health alone never refuses)')
  const lone = [new Target(config.targets[0], config, config.health, 1000)]
  t.teardown(() => lone[0].pool.close())
  lone[0].throttle(1000, 0)
  t.equal(chooseTarget(lone, undefined, 500, policy), THROTTLED, 'a lone target inside Retry-After: THROTTLED')
  t.equal(chooseTarget(lone, undefined, 2500, policy), lone[0], 'after the ramp: sent')
  lone[0].throttle(undefined, 3000)
  t.equal(chooseTarget(lone, undefined, 3500, policy), lone[0], 'a 429 without Retry-After (maybe about one caller) never stops a lone target')
  for (const x of targets) x.throttle(undefined, 10_000)
  t.not(chooseTarget(targets, undefined, 10_500, policy), THROTTLED, 'nor a whole pool')
})
