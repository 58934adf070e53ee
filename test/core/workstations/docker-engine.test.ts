/**
 * The docker driver under the workstation service against a real engine (test/helpers/dockerd.ts:
 * its own dockerd, no network, the image built from host files): provision → ready timed, a shell
 * over the container's unix socket, stop, start with the files kept, delete → gone timed, nothing
 * left (no container, no process of the workstation's uid), and how the container is confined.
 */
import t from 'tap'
import pino from 'pino'
import { spawnSync } from 'node:child_process'
import WebSocket from 'ws'
import { openSqliteStore } from '../../../core/store/sqlite.ts'
import type { Project } from '../../../core/projects/projects.ts'
import { DockerDriver } from '../../../core/workstations/docker-driver.ts'
import { WorkstationService } from '../../../core/workstations/service.ts'
import { processesOf } from '../../../core/workstations/workspace.ts'
import { dockerdUnavailable, startDockerd } from '../../helpers/dockerd.ts'
import { getFromTarget, wsUrlOf } from '../../helpers/terminal-servers.ts'
import { tempDir } from '../../helpers/temp.ts'

const project: Project = {
  id: 'p1', name: 'p1', plan: 'enterprise', scopes: new Set(), credits: { allocation: 1000, period: 'month' },
  features: { proveBatch: false, sponsoredWallet: false, relayToConfidentialSpace: false, tee: false, workstation: true }, keys: [], settings: {},
}

async function until(what: string, probe: () => Promise<boolean>, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

async function shell(target: string, command: string, expect: RegExp): Promise<RegExpMatchArray> {
  const socket = new WebSocket(wsUrlOf(target, '/pty'))
  let output = ''
  socket.on('message', (data) => (output += String(data)))
  await new Promise((resolve, reject) => { socket.once('open', resolve); socket.once('error', reject) })
  socket.send(Buffer.from(`${command}\n`))
  try {
    await until(`shell output ${expect}`, async () => expect.test(output), 20_000)
  } finally {
    socket.close()
  }
  return output.match(expect)!
}

const unavailable = dockerdUnavailable()
t.test('docker driver on a real engine: provision, open, stop, start, delete', { skip: unavailable && !process.env.CI ? unavailable : false }, async (t) => {
  t.setTimeout(300_000)
  const engine = await startDockerd()
  t.teardown(() => engine.stop())
  const store = openSqliteStore({ dataDir: tempDir('tollgate-docker-store-'), usageFlushMs: 0 })
  t.teardown(() => store.close())
  const root = tempDir('tollgate-docker-root-')
  const driver = new DockerDriver({ socketPath: engine.socketPath, image: engine.image, root, stopGraceSeconds: 2, limits: { memoryMb: 256, processes: 64, diskMb: 64, tmpMb: 16 }, env: { EDITOR: 'vi' } })
  t.teardown(() => driver.close())
  const service = new WorkstationService({ store, driver, log: pino({ level: 'silent' }), project: (id) => (id === 'p1' ? project : undefined), creditsPerMinute: 0 })
  t.teardown(() => service.close())
  const state = async () => ((await service.view('p1')).body as { state: string; reason?: string })
  const docker = (...args: string[]) => spawnSync('docker', ['-H', `unix://${engine.socketPath}`, ...args], { encoding: 'utf8' })

  const provisionAt = performance.now()
  await service.act('p1', 'provision')
  await service.settled('p1')
  t.equal((await state()).state, 'ready', JSON.stringify(await state()))
  t.comment(`docker provision → ready: ${(performance.now() - provisionAt).toFixed(0)} ms (spec 90 s)`)
  const target = (await service.target('p1'))!
  t.match(target, /^unix:\/.+\/server\.sock$/, 'reached over the bind-mounted unix socket')
  t.match((await getFromTarget(target, '/')).text, /xterm/, 'the container serves the terminal')

  const container = driver.containerOf('p1')
  const inspect = JSON.parse(docker('inspect', container).stdout)[0]
  const uid = driver.workspaces.uidOf('p1')!
  t.equal(inspect.Config.User, `${uid}:${uid}`, 'runs as the workstation uid')
  t.equal(inspect.HostConfig.NetworkMode, 'none')
  t.equal(inspect.HostConfig.ReadonlyRootfs, true)
  t.equal(inspect.HostConfig.PidsLimit, 64)
  t.equal(inspect.HostConfig.Memory, 256 * 1024 * 1024)
  t.same(inspect.HostConfig.CapDrop, ['ALL'])
  t.same(inspect.NetworkSettings.Ports ?? {}, {}, 'no port published')
  const env = inspect.Config.Env.filter((line: string) => !/^(PATH|HOME|USER|SHELL|TERM|LANG)=/.test(line))
  t.same(env, ['EDITOR=vi'], 'the environment is the allow-list')

  const made = await shell(target, 'echo made-$((6*7)) > proof.txt; echo "id=$(id -u)="; cat proof.txt', /id=(\d+)=[\s\S]*made-42/)
  t.equal(Number(made[1]), uid, 'the shell runs as the workstation uid')

  await service.act('p1', 'stop')
  await service.settled('p1')
  t.equal((await state()).state, 'stopped')
  t.same(processesOf(uid), [], 'no process of the workstation runs once stopped')

  const startAt = performance.now()
  await service.act('p1', 'start')
  await service.settled('p1')
  t.equal((await state()).state, 'ready')
  t.comment(`docker stopped → ready: ${(performance.now() - startAt).toFixed(0)} ms`)
  await shell((await service.target('p1'))!, 'cat proof.txt', /made-42/)
  t.pass('files survive stop and start')

  const deleteAt = performance.now()
  await service.act('p1', 'delete')
  await service.settled('p1')
  t.equal((await state()).state, 'absent')
  t.comment(`docker delete → gone: ${(performance.now() - deleteAt).toFixed(0)} ms (spec 60 s)`)
  t.equal(docker('ps', '-aq', '--filter', `name=${container}`).stdout.trim(), '', 'no container left')
  t.same(processesOf(uid), [], 'no process left')
})
