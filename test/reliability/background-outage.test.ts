/**
 * Background work of the shared engine through a PostgreSQL outage, in one process (issue 26, "no
 * background loop can crash the process"): the store's own timers (heartbeat, reaper, usage flush),
 * the credit leases' upkeep ops (top-up ahead, fold, give-back, end: sent by no request) and the
 * dashboard's traffic tally flush run against a PostgreSQL cluster of the test's own that is stopped
 * under them. None may reach `unhandledRejection`; each failing task is counted in
 * tollgate_background_errors_total (core/proxy/resilience.ts) and logged once for the outage, and
 * its recovery once PostgreSQL is back.
 *
 * The gateway-level tasks (workstations tick, alerts, settings sync and LISTEN) meet the same outage
 * in test/reliability/chaos.test.ts, on the stock gateway.yaml, in separate processes.
 */
import t from 'tap'
import { backgroundErrorCounts } from '../../core/proxy/resilience.ts'
import { openSharedStore } from '../../core/store/shared/index.ts'
import { TrafficLog } from '../../core/dashboard/traffic.ts'
import { ownServersMissing, startOwnPostgres, startOwnRedis } from '../helpers/own-servers.ts'

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

t.test('a PostgreSQL outage under the store timers, the lease upkeep and the traffic flush: counted, logged once, never unhandled', async (t) => {
  const missing = ownServersMissing()
  if (missing !== undefined) {
    if (process.env.CI === 'true') t.fail(`this test needs its own PostgreSQL and Redis under CI: ${missing}`)
    else (t as unknown as { skip(reason: string): void }).skip(missing)
    return
  }
  const unhandled: unknown[] = []
  const onUnhandled = (reason: unknown) => unhandled.push(reason)
  process.on('unhandledRejection', onUnhandled)
  t.teardown(() => void process.off('unhandledRejection', onUnhandled))

  const postgres = await startOwnPostgres([55437, 55438, 55439])
  t.teardown(() => postgres.close())
  const redis = await startOwnRedis([56387, 56388, 56389])
  t.teardown(() => redis.close())

  const lines: { level: string; task?: string; message: string }[] = []
  const line = (level: string) => (object: object, message: string) => lines.push({ level, task: (object as { task?: string }).task, message })
  const log = { warn: line('warn'), info: line('info') }
  const store = await openSharedStore({ postgres: postgres.url, redis: redis.url, instanceTimeoutMs: 2000, usageFlushMs: 200, leaseCredits: 100, backgroundLog: log })
  t.teardown(() => store.close())
  const traffic = new TrafficLog(store, Date.now, log)
  t.teardown(() => traffic.close())

  // Warm: a lease of this instance holds credits (drawn from, so it has draws to fold), a tally and usage wait to be written.
  let sequence = 0
  const request = async () => {
    const id = `bg-${++sequence}`
    const { ok } = await store.reserveCredits({ id, projectId: 'bg', period: '2026-11', allocation: 1_000_000, amount: 1, apiType: 'PRIVNET_RPC' })
    if (!ok) throw new Error('refused')
    await store.commitCredits(id)
    await store.closeCredits(id)
    void store.recordUsage({ projectId: 'bg', apiType: 'PRIVNET_RPC', at: Date.now(), requests: 1, credits: 1, errors: 0 })
    traffic.record({ project: { id: 'bg' } } as never, 200)
  }
  for (let i = 0; i < 30; i++) await request()
  await traffic.flush()
  const before = backgroundErrorCounts()

  await postgres.stop('immediate')
  const downAt = Date.now()
  // Requests meet the outage too (their failures are theirs, answered 503): one reserves from the lease
  // in memory, then its draw fails, so the lease is closed and its end is re-sent every tick.
  const failures: string[] = []
  for (let i = 0; i < 5; i++) await request().catch((error: { code?: string; message?: string }) => failures.push(error.code ?? String(error.message)))
  // Their answers (503) are still counted: usage and the tally have something to write.
  void store.recordUsage({ projectId: 'bg', apiType: 'PRIVNET_RPC', at: Date.now(), requests: 5, credits: 0, errors: 5 })
  traffic.record({ project: { id: 'bg' } } as never, 503)
  await traffic.flush()
  await pause(2500)
  await traffic.flush()
  const during = backgroundErrorCounts()
  await postgres.start()
  const backAt = Date.now()

  const grew = (task: string) => (during[task] ?? 0) - (before[task] ?? 0)
  for (const task of ['store-heartbeat', 'store-reaper', 'usage-flush', 'credit-lease-upkeep', 'traffic-flush']) {
    t.ok(grew(task) >= 1, `${task}: ${grew(task)} failures counted while PostgreSQL was down`)
    const warned = lines.filter((l) => l.level === 'warn' && l.task === task).length
    t.equal(warned, 1, `${task}: logged once for the outage (${grew(task)} failures)`)
  }
  t.ok(failures.length >= 1, `requests during the outage failed as requests (${failures.slice(0, 2).join(', ')})`)

  // Back: the tasks recover (logged once each), requests are served again, nothing reached unhandledRejection.
  let served = false
  while (Date.now() - backAt < 20_000 && !served) {
    served = await request().then(() => true, () => false)
    if (!served) await pause(100)
  }
  t.ok(served, `a request is served again ${Date.now() - backAt} ms after PostgreSQL is back`)
  await traffic.flush()
  const deadline = Date.now() + 10_000
  const recovered = () => ['store-heartbeat', 'usage-flush', 'traffic-flush'].filter((task) => lines.some((l) => l.level === 'info' && l.task === task))
  while (Date.now() < deadline && recovered().length < 3) await pause(100)
  t.same(recovered(), ['store-heartbeat', 'usage-flush', 'traffic-flush'], 'each recovery logged')
  t.same(unhandled, [], `no unhandledRejection in ${backAt - downAt} ms of outage`)
})
