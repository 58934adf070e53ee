/**
 * The workstation service on the process driver with real processes and a real SQLite store:
 * the full lifecycle with measured timings, idempotent and refused transitions, a driver failure,
 * per-minute charges with an injected clock, credits running out, idle auto-stop, and a restart
 * that finds running servers again, marks dead ones stopped and leaves no process behind.
 */
import t from 'tap'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import pino from 'pino'
import WebSocket from 'ws'
import { openSqliteStore } from '../../../core/store/sqlite.ts'
import type { Store } from '../../../core/store/types.ts'
import type { Project } from '../../../core/projects/projects.ts'
import { ProcessDriver } from '../../../core/workstations/process-driver.ts'
import { WorkstationService, type WorkstationServiceOptions } from '../../../core/workstations/service.ts'
import { tempDir } from '../../helpers/temp.ts'
import { getFromTarget, serversUnder, wsUrlOf } from '../../helpers/terminal-servers.ts'
import { signalUid } from '../../../core/workstations/workspace.ts'

const log = pino({ level: 'silent' })

function project(id: string, workstation: boolean, allocation = 1_000): Project {
  return {
    id,
    name: id,
    plan: 'enterprise',
    scopes: new Set(['zkpaas']),
    credits: { allocation, period: 'month' },
    features: { proveBatch: false, sponsoredWallet: false, relayToConfidentialSpace: false, tee: false, workstation },
    keys: [],
    settings: {},
  }
}

interface Setup {
  store: Store
  root: string
  driver: ProcessDriver
  service: WorkstationService
  projects: Map<string, Project>
  now: { ms: number | undefined }
}

function setup(t: { teardown(fn: () => unknown): void }, overrides: Partial<WorkstationServiceOptions> = {}, shared?: Pick<Setup, 'store' | 'root' | 'projects'>): Setup {
  const store = shared?.store ?? openSqliteStore({ dataDir: tempDir('tollgate-ws-store-'), usageFlushMs: 0 })
  if (!shared) t.teardown(() => store.close())
  const root = shared?.root ?? tempDir('tollgate-ws-root-')
  const driver = new ProcessDriver({ root, stopGraceMs: 2_000 })
  const projects = shared?.projects ?? new Map([['p1', project('p1', true)], ['off', project('off', false)]])
  const now = { ms: undefined as number | undefined }
  const service = new WorkstationService({ store, driver, log, project: (id) => projects.get(id), clock: () => now.ms ?? Date.now(), ...overrides })
  t.teardown(() => service.close())
  return { store, root, driver, service, projects, now }
}

/** PIDs of terminal servers running for `root`. */

async function until<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

const stateOf = async (service: WorkstationService, id: string) => ((await service.view(id)).body as { state: string }).state

t.test('full lifecycle on real processes, timed; WebSocket shell in the workstation', async (t) => {
  t.setTimeout(180_000)
  const { service, root, driver } = setup(t)
  t.teardown(async () => { await driver.reap([]) })
  t.same((await service.view('p1')).body, { projectId: 'p1', state: 'absent', creditsCharged: 0, history: [] }, 'no workstation at first')

  const provisionAt = performance.now()
  const accepted = await service.act('p1', 'provision')
  t.equal(accepted.status, 202)
  t.equal((accepted.body as { state: string }).state, 'provisioning')
  const again = await service.act('p1', 'provision')
  t.equal(again.status, 202, 'a second provision while provisioning is accepted...')
  t.equal((again.body as { state: string }).state, 'provisioning', '...and answers the current state')
  t.equal((await service.act('p1', 'start')).status, 202, 'start while provisioning: already under way')
  await until('ready', async () => (await stateOf(service, 'p1')) === 'ready' || ((await service.view('p1')).body as { state: string }).state === 'failed')
  t.equal(await stateOf(service, 'p1'), 'ready', JSON.stringify((await service.view('p1')).body))
  const provisionMs = performance.now() - provisionAt
  t.comment(`provision → ready: ${provisionMs.toFixed(0)} ms (spec: typically within 90 s)`)
  t.ok(provisionMs < 90_000, 'ready within the spec\'s 90 s')

  const target = await service.target('p1')
  t.match(target, /^unix:\/.+\/server\.sock$/, 'a unix socket, no TCP port')
  const page = await getFromTarget(target!, '/')
  t.match(page.text, /xterm\.js/, 'the workstation serves its terminal page')
  t.ok(existsSync(join(driver.dirOf('p1'), 'README.txt')), 'the home was provisioned')

  const socket = new WebSocket(wsUrlOf(target!, '/pty'))
  let output = ''
  socket.on('message', (data) => (output += String(data)))
  await new Promise((resolve, reject) => { socket.once('open', resolve); socket.once('error', reject) })
  socket.send(Buffer.from('echo made-$((6*7)) > proof.txt; cat proof.txt; pwd\n')) // keystrokes are binary frames
  await until('shell output', async () => output.includes('made-42') && output.includes('/home/workstation'), 20_000)
  t.pass('a real shell answered over the WebSocket, in the working directory')
  socket.close()

  t.equal((await service.act('p1', 'stop')).status, 202)
  await until('stopped', async () => (await stateOf(service, 'p1')) === 'stopped')
  t.same(serversUnder(root), [], 'no server runs once stopped')
  t.equal(await service.target('p1'), undefined, 'nothing to proxy to')
  const stopAgain = await service.act('p1', 'stop')
  t.equal(stopAgain.status, 202, 'stop while stopped: nothing to do')
  const badProvision = await service.act('p1', 'provision')
  t.equal(badProvision.status, 409)
  t.equal((badProvision.body as { error: { code: string } }).error.code, 'workstation_exists')
  t.equal(await stateOf(service, 'p1'), 'stopped', 'the refused action changed nothing')

  const startAt = performance.now()
  t.equal((await service.act('p1', 'start')).status, 202)
  await until('ready again', async () => (await stateOf(service, 'p1')) === 'ready')
  t.comment(`stopped → ready: ${(performance.now() - startAt).toFixed(0)} ms`)
  t.equal(readFileSync(join(driver.dirOf('p1'), 'proof.txt'), 'utf8'), 'made-42\n', 'files survive stop and start')

  const deleteAt = performance.now()
  t.equal((await service.act('p1', 'delete')).status, 202)
  await until('gone', async () => (await stateOf(service, 'p1')) === 'absent')
  const deleteMs = performance.now() - deleteAt
  t.comment(`delete → gone: ${deleteMs.toFixed(0)} ms (spec: typically within 60 s)`)
  t.ok(deleteMs < 60_000)
  t.notOk(existsSync(join(root, 'p1')), 'the working directory is removed')
  t.same(serversUnder(root), [], 'no process left')

  const view = await service.view('p1')
  t.equal((view.body as { state: string }).state, 'absent')
  const stopAbsent = await service.act('p1', 'stop')
  t.same([stopAbsent.status, (stopAbsent.body as { error: { code: string } }).error.code], [409, 'workstation_not_provisioned'])
})

t.test('bad input: unknown project, feature off; history of transitions', async (t) => {
  const { service } = setup(t)
  const unknown = await service.act('nope', 'provision')
  t.same([unknown.status, (unknown.body as { error: { code: string } }).error.code], [404, 'project_not_found'])
  const off = await service.act('off', 'provision')
  t.same([off.status, (off.body as { error: { code: string } }).error.code], [403, 'workstation_not_enabled'])
  t.match((off.body as { error: { message: string } }).error.message, /features\.workstation/)
  t.equal((await service.view('off')).status, 403)
})

t.test('a driver failure ends in failed with the reason; a start that hangs times out', async (t) => {
  t.setTimeout(60_000)
  const store = openSqliteStore({ dataDir: tempDir('tollgate-ws-store-'), usageFlushMs: 0 })
  t.teardown(() => store.close())
  const root = tempDir('tollgate-ws-root-')
  const projects = new Map([['p1', project('p1', true)]])
  const crashing = new ProcessDriver({ root, command: () => ({ file: process.execPath, args: ['-e', 'process.exit(3)'] }) })
  const service = new WorkstationService({ store, driver: crashing, log, project: (id) => projects.get(id) })
  t.teardown(() => service.close())
  await service.act('p1', 'provision')
  await service.settled('p1')
  const view = (await service.view('p1')).body as { state: string; reason: string; history: { to: string; by: string }[] }
  t.equal(view.state, 'failed')
  t.match(view.reason, /provisioning failed: the workstation server exited during start \(exit code 3\)/)
  t.same(view.history.map((h) => `${h.to}:${h.by}`), ['provisioning:api:provision', 'failed:driver'])

  let now = Date.now()
  const hanging = new ProcessDriver({ root, command: () => ({ file: process.execPath, args: ['-e', 'setTimeout(() => {}, 60000)'] }), startTimeoutMs: 3_000, stopGraceMs: 500 })
  const slow = new WorkstationService({ store, driver: hanging, log, project: (id) => projects.get(id), clock: () => now, timeoutsMs: { starting: 1_000 } })
  t.teardown(() => slow.close())
  t.equal((await slow.act('p1', 'start')).status, 202, 'a failed workstation can be started again')
  now += 1_500
  await slow.tick()
  const timedOut = (await slow.view('p1')).body as { state: string; reason: string }
  t.same([timedOut.state, timedOut.reason], ['failed', 'starting did not finish within 1 s'])
  await slow.settled('p1')
  t.equal(((await slow.view('p1')).body as { state: string }).state, 'failed', 'the late driver answer does not overwrite the timeout')
})

t.test('running time is charged per minute (injected clock); out of credits → stopped with the reason', async (t) => {
  t.setTimeout(120_000)
  const projects = new Map([['p1', project('p1', true, 3)]])
  const { service, store, now, root, driver } = setup(t, { creditsPerMinute: 1 }, { store: openSqliteStore({ dataDir: tempDir('tollgate-ws-store-'), usageFlushMs: 0 }), root: tempDir('tollgate-ws-root-'), projects })
  t.teardown(async () => { await driver.reap([]); await store.close() })
  now.ms = Date.UTC(2026, 10, 24, 12, 0, 0)
  await service.act('p1', 'provision')
  await service.settled('p1')
  t.equal(await stateOf(service, 'p1'), 'ready')
  const balance = () => store.balance('p1', '2026-11', 3)
  t.equal((await balance()).used, 1, 'the first minute is charged when it becomes ready')
  now.ms += 30_000
  await service.tick()
  t.equal((await balance()).used, 1, 'nothing more within the paid minute')
  now.ms += 30_000
  await service.tick()
  t.equal((await balance()).used, 2, 'the second minute at 60 s')
  now.ms += 60_000
  await service.tick()
  t.equal((await balance()).used, 3, 'the third at 120 s: the allocation is spent')
  const usage = await store.queryUsage('p1', Date.UTC(2026, 10, 24), Date.UTC(2026, 10, 25), 'day')
  t.same(usage, [{ bucket: '2026-11-24T00:00:00.000Z', apiType: 'workstation', requests: 3, credits: 3, errors: 0 }], 'usage under api type workstation')
  now.ms += 60_000
  await service.tick()
  await service.settled('p1')
  const view = (await service.view('p1')).body as { state: string; reason: string; creditsCharged: number }
  t.equal(view.state, 'stopped', 'a minute the credits cannot cover stops it')
  t.match(view.reason, /credits ran out: 0 left, a minute costs 1/)
  t.equal(view.creditsCharged, 3)
  t.equal((await balance()).used, 3, 'nothing charged past the allocation')
  t.same(serversUnder(root), [])
})

t.test('idle auto-stop after the configured time without traffic', async (t) => {
  t.setTimeout(120_000)
  const { service, now, driver } = setup(t, { idleStopMs: 10 * 60_000, creditsPerMinute: 0 })
  t.teardown(async () => { await driver.reap([]) })
  now.ms = Date.now()
  await service.act('p1', 'provision')
  await service.settled('p1')
  now.ms += 6 * 60_000
  await service.touch('p1')
  now.ms += 6 * 60_000
  await service.tick()
  t.equal(await stateOf(service, 'p1'), 'ready', 'traffic 6 min ago keeps it running')
  now.ms += 5 * 60_000
  await service.tick()
  await service.settled('p1')
  const view = (await service.view('p1')).body as { state: string; reason: string; history: { by: string }[] }
  t.same([view.state, view.reason], ['stopped', 'stopped after 600 s without use'])
  t.equal(view.history.at(-2)?.by, 'idle')
})

t.test('restart: a running workstation is found again, a dead one marked stopped, an unclaimed server killed', async (t) => {
  t.setTimeout(120_000)
  const first = setup(t, { creditsPerMinute: 0 })
  first.projects.set('p2', project('p2', true))
  t.teardown(async () => { await first.driver.reap([]) })
  await first.service.act('p1', 'provision')
  await first.service.act('p2', 'provision')
  await first.service.settled('p1')
  await first.service.settled('p2')
  await first.service.close()
  const [p1Target, p2Target] = [await first.service.target('p1'), await first.service.target('p2')]
  t.ok(p1Target && p2Target)
  // p2's server dies while no gateway runs; a stray server appears that no record names.
  while (signalUid(first.driver.workspaces.uidOf('p2')!, 'SIGKILL')) await new Promise((resolve) => setTimeout(resolve, 20))
  await first.driver.provision('stray')
  const stray = await first.driver.start('stray')
  t.equal(serversUnder(first.root).length, 2, 'p1 and the stray run')

  const second = setup(t, { creditsPerMinute: 0 }, first)
  await second.service.recover()
  t.equal(await stateOf(second.service, 'p1'), 'ready', 'p1 found running')
  t.equal(await second.service.target('p1'), p1Target, 'at the same address')
  const p2 = (await second.service.view('p2')).body as { state: string; reason: string }
  t.same([p2.state, p2.reason], ['stopped', 'the workstation server was not running after a gateway restart'])
  t.same(serversUnder(first.root).length, 1, 'the stray server was stopped')
  t.notOk(await first.driver.alive(stray))
  await second.service.act('p1', 'delete')
  await second.service.settled('p1')
  t.same(serversUnder(first.root), [], 'no leaked process')
})
