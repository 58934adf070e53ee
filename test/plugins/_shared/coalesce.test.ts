import t from 'tap'
import { InFlight } from '../../../plugins/_shared/coalesce.ts'

/** A piece of work the test finishes by hand, counting how often it was started. */
function manual() {
  let started = 0
  let finish!: (value: string) => void
  let fail!: (error: Error) => void
  let signal!: AbortSignal
  const work = (s: AbortSignal) => {
    started++
    signal = s
    return new Promise<string>((resolve, reject) => {
      finish = resolve
      fail = reject
    })
  }
  return { work, started: () => started, finish: (v: string) => finish(v), fail: (e: Error) => fail(e), signal: () => signal }
}
const tick = () => new Promise((resolve) => setImmediate(resolve))

t.test('identical keys share one run; every caller gets the value; a later call starts afresh', async (t) => {
  const inFlight = new InFlight<string>()
  const job = manual()
  const calls = Array.from({ length: 5 }, () => inFlight.run('k', new AbortController().signal, job.work))
  t.same(calls.map((c) => c.joined), [false, true, true, true, true])
  await tick()
  t.equal(job.started(), 1)
  t.equal(inFlight.size, 1)
  job.finish('v')
  t.same(await Promise.all(calls.map((c) => c.result)), ['v', 'v', 'v', 'v', 'v'])
  t.equal(inFlight.size, 0, 'forgotten once settled')
  const again = inFlight.run('k', new AbortController().signal, async () => 'w')
  t.equal(again.joined, false)
  t.equal(await again.result, 'w')
})

t.test('different keys do not share; an error reaches every caller', async (t) => {
  const inFlight = new InFlight<string>()
  const a = manual()
  const b = manual()
  const one = inFlight.run('a', new AbortController().signal, a.work)
  const other = inFlight.run('b', new AbortController().signal, b.work)
  const joined = inFlight.run('a', new AbortController().signal, a.work)
  await tick()
  t.same([a.started(), b.started(), other.joined, joined.joined], [1, 1, false, true])
  a.fail(new Error('down'))
  await t.rejects(one.result, /down/)
  await t.rejects(joined.result, /down/)
  b.finish('ok')
  t.equal(await other.result, 'ok')
})

t.test('a caller that goes away stops waiting; the run is aborted only when every caller has gone', async (t) => {
  const inFlight = new InFlight<string>()
  const job = manual()
  const first = new AbortController()
  const second = new AbortController()
  const a = inFlight.run('k', first.signal, job.work)
  const b = inFlight.run('k', second.signal, job.work)
  await tick()
  first.abort(new Error('client gone'))
  await t.rejects(a.result, /client gone/)
  t.equal(job.signal().aborted, false, 'still running for the other caller')
  second.abort(new Error('second gone'))
  await t.rejects(b.result, /second gone/)
  t.equal(job.signal().aborted, true, 'nobody waits: the run is aborted')
  t.equal(inFlight.size, 0, 'and forgotten, so the next caller starts a new one')
  const c = inFlight.run('k', new AbortController().signal, async () => 'fresh')
  t.same([c.joined, await c.result], [false, 'fresh'])
  const gone = new AbortController()
  gone.abort(new Error('already gone'))
  await t.rejects(inFlight.run('x', gone.signal, async () => 'never waited for').result, /already gone/)
})
