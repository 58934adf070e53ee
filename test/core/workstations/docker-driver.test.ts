/**
 * The docker driver's wire detail against a stand-in that speaks the Docker Engine API on a unix
 * socket (examples/docker-engine-standin.ts): an image the engine lacks → failed with the engine's
 * message. The lifecycle runs against a real engine in docker-engine.test.ts.
 */
import t from 'tap'
import pino from 'pino'
import { openSqliteStore } from '../../../core/store/sqlite.ts'
import type { Project } from '../../../core/projects/projects.ts'
import { DockerDriver } from '../../../core/workstations/docker-driver.ts'
import { WorkstationService } from '../../../core/workstations/service.ts'
import { startDockerStandIn } from '../../../examples/docker-engine-standin.ts'
import { tempDir } from '../../helpers/temp.ts'

const project: Project = {
  id: 'p1', name: 'p1', plan: 'enterprise', scopes: new Set(), credits: { allocation: 1000, period: 'month' },
  features: { proveBatch: false, sponsoredWallet: false, relayToConfidentialSpace: false, tee: false, workstation: true }, keys: [], settings: {},
}

t.test('docker driver: an image the engine does not have → failed with the engine\'s message', async (t) => {
  const engine = await startDockerStandIn(tempDir('tollgate-docker-'))
  t.teardown(() => engine.close())
  const store = openSqliteStore({ dataDir: tempDir('tollgate-docker-store-'), usageFlushMs: 0 })
  t.teardown(() => store.close())
  const root = tempDir('tollgate-docker-root-')
  const driver = new DockerDriver({ socketPath: engine.socketPath, image: 'example/missing:1', root, runDir: `${root}/run` })
  t.teardown(() => driver.workspaces.remove('p1'))
  t.teardown(() => driver.close())
  const service = new WorkstationService({ store, driver, log: pino({ level: 'silent' }), project: () => project })
  t.teardown(() => service.close())
  await service.act('p1', 'provision')
  await service.settled('p1')
  const view = (await service.view('p1')).body as { state: string; reason: string }
  t.equal(view.state, 'failed')
  t.match(view.reason, /provisioning failed: Docker POST \/containers\/create\?name=tollgate-ws-[0-9a-f]{16} answered 404: No such image: example\/missing:1/)
  t.match(driver.containerOf('p1'), /^tollgate-ws-[0-9a-f]{16}$/)
})
