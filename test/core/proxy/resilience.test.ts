/**
 * core/proxy/resilience.ts: a background task's failures are counted each time, logged once per outage
 * (the first failure, then its recovery), and never thrown.
 */
import t from 'tap'
import { backgroundErrorCounts, backgroundFailed, runInBackground } from '../../../core/proxy/resilience.ts'

function recordingLog() {
  const lines: { level: string; message: string; task?: string }[] = []
  const line = (level: string) => (object: object, message: string) => lines.push({ level, message, task: (object as { task?: string }).task })
  return { lines, log: { warn: line('warn'), info: line('info') } }
}

t.test('an outage is logged once, counted every time, and its recovery logged', async (t) => {
  const { lines, log } = recordingLog()
  const task = `test-task-${Math.random()}`
  let failing = true
  const pass = async () => {
    if (failing) throw new Error('store_unavailable')
  }
  for (let i = 0; i < 5; i++) await runInBackground(task, pass, log)
  t.equal(backgroundErrorCounts()[task], 5, 'five failures counted')
  t.same(lines.map((l) => l.level), ['warn'], 'one warning for the outage')
  failing = false
  await runInBackground(task, pass, log)
  await runInBackground(task, pass, log)
  t.same(lines.map((l) => l.level), ['warn', 'info'], 'the recovery logged once')
  failing = true
  await runInBackground(task, pass, log)
  t.same(lines.map((l) => l.level), ['warn', 'info', 'warn'], 'a new outage logs again')
  t.ok(lines.every((l) => l.task === task))
})

t.test('a pass that throws synchronously is caught too', async (t) => {
  const { lines, log } = recordingLog()
  await t.resolves(runInBackground('sync-throw', () => { throw new Error('boom') }, log))
  t.equal(lines.length, 1)
})

t.test('event-like failures (no success to report) log again after a quiet spell only', async (t) => {
  const { lines, log } = recordingLog()
  const task = `events-${Math.random()}`
  backgroundFailed(task, new Error('reset'), log)
  backgroundFailed(task, new Error('reset'), log)
  t.equal(lines.length, 1)
})
