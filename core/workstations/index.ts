/**
 * Cloud workstations, assembled from gateway.yaml's `workstations` section: the service (state
 * machine over the Store, a driver), the public routes (sign-in and proxy) and the admin routes.
 * The gateway calls {@link startWorkstations} once at start and `close` when it stops; running
 * workstations outlive a restart (the next start finds them, see service.ts `recover`).
 */
import { resolve } from 'node:path'
import type { Logger } from 'pino'
import type { WorkstationsConfig } from '../config/types.ts'
import type { Project } from '../projects/projects.ts'
import type { Store } from '../store/types.ts'
import { IdentitySessions, projectSettingOwners, type OwnerIdentities } from './access.ts'
import { IdentityLinks } from './identity-links.ts'
import { OidcClient } from './oidc.ts'
import { DockerDriver } from './docker-driver.ts'
import { ProcessDriver } from './process-driver.ts'
import { WorkstationPublicRoutes } from './public-routes.ts'
import { WorkstationService } from './service.ts'

export { WorkstationPublicRoutes } from './public-routes.ts'
export { workstationAdminRoute, workstationPanelRoute } from './admin-routes.ts'
export { identityAdminRoute } from './identity-routes.ts'
export { IdentityLinks } from './identity-links.ts'

export interface Workstations {
  service: WorkstationService
  routes: WorkstationPublicRoutes
  /** IdP accounts linked to tollgate users (GET/POST/DELETE /admin/account/identity). */
  links: IdentityLinks
  publicUrl?: string
  close(): Promise<void>
}

export interface WorkstationsDeps {
  config: WorkstationsConfig
  /** Directory of gateway.yaml: `dir` resolves against it. */
  configDir: string
  store: Store
  project(projectId: string): Project | undefined
  log: Logger
  /** Who owns each workstation; default: the project's `settings.workstationOwner`. */
  owners?: OwnerIdentities
  /** A tollgate user's role and projects (the accounts store), for linked identities. */
  user(userId: string): Promise<{ role: string; projects: readonly string[] } | undefined>
}

export async function startWorkstations(deps: WorkstationsDeps): Promise<Workstations> {
  const { config } = deps
  const log = deps.log.child({ component: 'workstations' })
  if (config.driver === 'docker' && !config.docker) throw new Error('workstations.driver docker needs workstations.docker (image)')
  if (config.driver === 'docker' && config.ide) throw new Error('workstations.ide runs with the process driver only (the docker image does not carry code-server yet)')
  // Both drivers isolate the same way (own uid, disk image, unix socket, no network): see workspace.ts.
  const common = {
    root: resolve(deps.configDir, config.dir),
    runDir: config.sandbox.runDir,
    uidBase: config.sandbox.uidBase,
    uidCount: config.sandbox.uidCount,
    limits: config.limits,
    env: config.env,
    startTimeoutMs: config.startTimeoutSeconds * 1000,
  }
  const driver = config.driver === 'docker'
    ? new DockerDriver({ ...common, ...config.docker!, stopGraceSeconds: 10 })
    : new ProcessDriver({ ...common, ide: config.ide ? resolve(deps.configDir, config.ide.dir) : undefined, warn: (message) => log.warn(message) })
  const service = new WorkstationService({
    store: deps.store,
    driver,
    project: deps.project,
    log,
    creditsPerMinute: config.creditsPerMinute,
    idleStopMs: config.idleStopMinutes * 60_000,
    timeoutsMs: {
      provisioning: config.startTimeoutSeconds * 1000,
      starting: config.startTimeoutSeconds * 1000,
      stopping: config.stopTimeoutSeconds * 1000,
      deleting: config.stopTimeoutSeconds * 1000,
    },
  })
  await service.start()
  const links = new IdentityLinks(deps.store)
  const routes = new WorkstationPublicRoutes({
    service,
    oidc: config.oidc ? new OidcClient({ ...config.oidc, store: deps.store }) : undefined,
    sessions: new IdentitySessions(deps.store),
    owners: deps.owners ?? projectSettingOwners(deps.project),
    links,
    async userMayOpen(userId, projectId) {
      const user = await deps.user(userId)
      return user !== undefined && (user.role === 'operator' || user.projects.includes(projectId))
    },
    log,
    publicUrl: config.publicUrl,
  })
  return {
    service,
    routes,
    links,
    publicUrl: config.publicUrl,
    async close() {
      routes.close()
      await service.close()
      if (driver instanceof DockerDriver) await driver.close()
    },
  }
}
