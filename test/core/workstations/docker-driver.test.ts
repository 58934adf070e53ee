/**
 * The docker driver under the workstation service, against a stand-in that speaks the Docker
 * Engine API's wire format on a unix socket (examples/docker-engine-standin.ts): the lifecycle, the
 * calls the engine receives, files kept across stop/start, an image the engine lacks → failed with
 * the engine's message.
 */
import t from 'tap'
import pino from 'pino'
import { openSqliteStore } from '../../../core/store/sqlite.ts'
import type { Project } from '../../../core/projects.ts'
import { DockerDriver } from '../../../core/workstations/docker-driver.ts'
import { WorkstationService } from '../../../core/workstations/service.ts'
import { startDockerStandIn, STANDIN_IMAGE } from '../../../examples/docker-engine-standin.ts'
import { tempDir } from '../../helpers/temp.ts'

const project: Project = {
  id: 'p1', name: 'p1', plan: 'enterprise', scopes: new Set(), credits: { allocation: 1000, period: 'month' },
  features: { proveBatch: false, sponsoredWallet: false, relayToConfidentialSpace: false, tee: false, workstation: true }, keys: [], settings: {},
}

t.test('docker driver: provision, stop, start, delete through the Engine API', async (t) => {
  t.setTimeout(120_000)
  const engine = await startDockerStandIn(tempDir('tollgate-docker-'))
  t.teardown(() => engine.close())
  const store = openSqliteStore({ dataDir: tempDir('tollgate-docker-store-'), usageFlushMs: 0 })
  t.teardown(() => store.close())
  const driver = new DockerDriver({ socketPath: engine.socketPath, image: STANDIN_IMAGE, containerPort: 7681, stopGraceSeconds: 2 })
  t.teardown(() => driver.close())
  const service = new WorkstationService({ store, driver, log: pino({ level: 'silent' }), project: (id) => (id === 'p1' ? project : undefined), creditsPerMinute: 0 })
  t.teardown(() => service.close())
  const state = async () => ((await service.view('p1')).body as { state: string; reason?: string })

  await service.act('p1', 'provision')
  await service.settled('p1')
  t.equal((await state()).state, 'ready')
  const target = await service.target('p1')
  t.match(await (await fetch(`${target}/`)).text(), /xterm/, 'the container serves the terminal on the published port')
  t.same(engine.calls.slice(0, 3), ['POST /v1.43/volumes/create', 'POST /v1.43/containers/create?name=tollgate-ws-p1', 'POST /v1.43/containers/tollgate-ws-p1/start'])

  await service.act('p1', 'stop')
  await service.settled('p1')
  t.equal((await state()).state, 'stopped')
  t.ok(engine.calls.includes('POST /v1.43/containers/tollgate-ws-p1/stop?t=2'))
  await t.rejects(fetch(`${target}/`), 'nothing answers once stopped')

  await service.act('p1', 'start')
  await service.settled('p1')
  t.equal((await state()).state, 'ready', 'started again: create answers 409 (exists), start 204')
  t.ok(await driver.alive((await store.documents('workstations').get<any>('p1'))!.doc.handle))

  await service.act('p1', 'delete')
  await service.settled('p1')
  t.equal((await state()).state, 'absent')
  t.same(engine.calls.slice(-2), ['DELETE /v1.43/containers/tollgate-ws-p1?force=true', 'DELETE /v1.43/volumes/tollgate-ws-p1-home'])
})

t.test('docker driver: an image the engine does not have → failed with the engine\'s message', async (t) => {
  const engine = await startDockerStandIn(tempDir('tollgate-docker-'))
  t.teardown(() => engine.close())
  const store = openSqliteStore({ dataDir: tempDir('tollgate-docker-store-'), usageFlushMs: 0 })
  t.teardown(() => store.close())
  const driver = new DockerDriver({ socketPath: engine.socketPath, image: 'example/missing:1', containerPort: 7681 })
  t.teardown(() => driver.close())
  const service = new WorkstationService({ store, driver, log: pino({ level: 'silent' }), project: () => project })
  t.teardown(() => service.close())
  await service.act('p1', 'provision')
  await service.settled('p1')
  const view = (await service.view('p1')).body as { state: string; reason: string }
  t.equal(view.state, 'failed')
  t.match(view.reason, /provisioning failed: Docker POST \/containers\/create\?name=tollgate-ws-p1 answered 404: No such image: example\/missing:1/)
})
