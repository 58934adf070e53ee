/**
 * A running gateway: public and admin listeners, the current route table, the store and the
 * upstream pools. Reloads build a new table beside the current one and swap it in atomically;
 * requests keep the table they started with.
 *
 * @example
 * ```ts
 * const gateway = await Gateway.start({ configFile: 'gateway.yaml' })
 * console.log(gateway.address)   // http://127.0.0.1:8080
 * await gateway.stop()
 * ```
 */
import { createServer, type Server } from 'node:http'
import { watch, type FSWatcher } from 'node:fs'
import { basename, dirname, resolve } from 'node:path'
import type { AddressInfo, Socket } from 'node:net'
import type { Logger } from 'pino'
import { loadConfig } from '../config/load.ts'
import { formatIssue } from '../config/source.ts'
import type { GatewayConfig } from '../config/types.ts'
import { buildTable, closeTable, type Table } from '../proxy/table.ts'
import { handleRequest, type PipelineDeps } from '../proxy/pipeline.ts'
import { reconcileUpstreams, type UpstreamHandle } from '../proxy/http/upstreams.ts'
import { registerUpstreamMetrics } from '../proxy/upstream/metrics.ts'
import { answerParserRefusal } from '../proxy/http/parser-refusal.ts'
import { proxyTrust } from '../proxy/http/client-address.ts'
import { carryOnReload } from '../projects/credit-carry.ts'
import { backgroundFailed, runInBackground } from '../proxy/resilience.ts'
import { CoreMetrics, RouteMetrics, type ProjectCredits } from '../proxy/metrics.ts'
import { currentSchedulePeriod } from '../store/periods.ts'
import { createLogger, flushLogger } from '../proxy/log.ts'
import { createAdminServer } from '../admin/admin.ts'
import { openStore } from '../store/open.ts'
import type { Store } from '../store/types.ts'
import { ProjectSettingsSync } from '../projects/project-settings.ts'
import { settingsAdmin } from '../admin/settings-admin.ts'
import { creditsAdmin } from '../admin/credits-admin.ts'
import type { Workstations } from '../workstations/index.ts'
import { Accounts } from '../accounts/authenticate.ts'
import { userRoutes } from '../accounts/user-routes.ts'
import { LowBalanceMonitor } from '../alerts/low-balance.ts'
import { alertsAdmin } from '../alerts/admin.ts'
import { dashboard, type DashboardAuth } from '../dashboard/index.ts'
import { sessionAuth } from '../dashboard/session.ts'
import { TrafficLog } from '../dashboard/traffic.ts'
import { trafficAdmin } from '../admin/traffic-admin.ts'
import { ConfigError, listen, type ReloadResult, type StartOptions } from './start-options.ts'

export { ConfigError, type ReloadResult, type StartOptions }

export class Gateway {
  readonly log: Logger
  readonly metrics: CoreMetrics
  readonly store: Store
  /** Keeps the table's projects equal to gateway.yaml + the store's run-time settings. */
  readonly settingsSync: ProjectSettingsSync
  /** Admin users and sessions: resolves who calls the admin API (core/accounts/authenticate.ts). */
  readonly accounts: Accounts
  /** Low-balance webhooks of the projects that configure them (core/alerts). */
  readonly alerts: LowBalanceMonitor
  /** Answers and refusals per project and key, for the dashboard. */
  readonly traffic: TrafficLog
  /** Reads the dashboard session of a request (the accounts' session cookie). */
  readonly dashboardAuth: DashboardAuth
  readonly #options: StartOptions
  #table: Table
  #upstreams: Map<string, UpstreamHandle>
  #server!: Server
  #admin!: Server
  #watchers: FSWatcher[] = []
  #draining = false
  #reloading: Promise<ReloadResult> | undefined
  #debounce: NodeJS.Timeout | undefined
  /** Cloud workstations, when gateway.yaml has a `workstations` section (a restart applies changes to it). */
  #workstations: Workstations | undefined
  /** core/workstations, imported only when configured: its OIDC, JWT and WebSocket modules stay out of every other gateway's heap. */
  #workstationCode: typeof import('../workstations/index.ts') | undefined
  readonly #deps: PipelineDeps

  /** Allocation and balance of every metered project in its current period, for the credit gauges. */
  async #projectCredits(): Promise<ProjectCredits[]> {
    const now = Date.now()
    const metered = this.#table.projects.all().filter((project) => project.credits.allocation > 0)
    return Promise.all(
      metered.map(async (project) => {
        const balance = await this.store.balance(project.id, currentSchedulePeriod(project.credits, now), project.credits.allocation)
        return { project: project.id, allocation: balance.allocation, balance: balance.remaining }
      }),
    )
  }

  private constructor(options: StartOptions, config: GatewayConfig, table: Table, upstreams: Map<string, UpstreamHandle>, store: Store, log: Logger, metrics: CoreMetrics, settingsSync: ProjectSettingsSync) {
    this.#options = options
    this.settingsSync = settingsSync
    this.#table = table
    this.#upstreams = upstreams
    this.store = store
    this.accounts = new Accounts({ store, sessions: () => this.#table.config.admin.sessions, tokenHash: () => this.#table.config.admin.tokenHash })
    this.log = log
    this.metrics = metrics
    registerUpstreamMetrics(metrics.registry, () => this.#upstreams.values())
    this.dashboardAuth = sessionAuth(this.accounts)
    this.alerts = new LowBalanceMonitor({
      store,
      log: log.child({ component: 'alerts' }),
      projectConfigs: () => this.#table.config.projects,
      projects: () => this.#table.projects,
      checkIntervalMs: () => this.#table.config.alerts.checkIntervalMs,
    })
    this.traffic = new TrafficLog(store, Date.now, log)
    this.#deps = {
      answered: (ctx, status) => this.traffic.record(ctx, status),
      log,
      accessLog: config.log.access,
      metrics,
      unmatched: new RouteMetrics(metrics, '__unmatched__'),
      upstreams,
      trustProxy: proxyTrust(config.server.trustProxy),
      draining: () => this.#draining,
      inFlight: metrics.inFlightRequests,
      tableIdle: (retired) => void closeTable(retired),
    }
  }

  static async start(options: StartOptions): Promise<Gateway> {
    const env = options.env ?? process.env
    const loaded = await loadConfig(options.configFile, env)
    if (!loaded.config) throw new ConfigError(loaded.issues.map(formatIssue))
    const config = loaded.config
    const log = createLogger({ level: config.log.level, destination: options.logDestination })
    const metrics = new CoreMetrics()
    const store = options.store ?? await openStore(config.store, {
      dir: config.dir,
      onBackgroundError: (error) => log.warn({ err: error }, 'store background work failed'),
      backgroundLog: log.child({ component: 'store' }),
    })
    const recovered = await store.recoverPendingReservations()
    if (recovered) log.warn({ recovered }, 'released credit reservations left pending by an earlier crash')
    // The sync follows whichever table is in service; until the gateway exists that is the first one.
    let inService: (() => Table) | undefined
    const settingsSync = new ProjectSettingsSync(store.settings, log, () => inService?.())
    try {
      await settingsSync.start()
    } catch (error) {
      await store.close()
      throw error
    }
    const { current: upstreams } = reconcileUpstreams(new Map(), config.upstreams)
    const built = await buildTable(config, { log, metrics, store, upstreams, plugins: loaded.plugins, locate: loaded.locate, projectOverrides: settingsSync.snapshot.projects })
    if (!built.table) {
      settingsSync.stop()
      await Promise.allSettled([...upstreams.values()].map((u) => u.pool.close()))
      await store.close()
      throw new ConfigError(built.issues.map(formatIssue))
    }
    const gateway = new Gateway(options, config, built.table, upstreams, store, log, metrics, settingsSync)
    inService = () => gateway.#table
    // A change that landed while the table was being built.
    settingsSync.apply(built.table.projects, built.table.seedProjects)
    metrics.configLoaded(config.hash)
    metrics.reloads.inc({ result: 'success' })
    metrics.trackCredits(() => gateway.#projectCredits())
    if (config.workstations) {
      gateway.#workstationCode = await import('../workstations/index.ts')
      gateway.#workstations = await gateway.#workstationCode.startWorkstations({
        config: config.workstations,
        configDir: config.dir,
        store,
        project: (id) => gateway.#table.projects.byId(id),
        user: (userId) => store.accounts.userById(userId),
        log,
      })
    }
    await gateway.#listen(config)
    gateway.alerts.start()
    if (options.watch ?? config.watch) gateway.#watch(config)
    log.info(
      { address: gateway.address, admin: gateway.adminAddress, routes: built.table.routes.length, hash: config.hash.slice(0, 16) },
      options.worker ? 'tollgate worker started' : 'tollgate started',
    )
    return gateway
  }

  get config(): GatewayConfig {
    return this.#table.config
  }

  get table(): Table {
    return this.#table
  }

  get address(): string {
    const a = this.#server.address() as AddressInfo
    return `http://${a.address.includes(':') ? `[${a.address}]` : a.address}:${a.port}`
  }

  get adminAddress(): string {
    const a = this.#admin.address() as AddressInfo
    return `http://${a.address.includes(':') ? `[${a.address}]` : a.address}:${a.port}`
  }

  async #listen(config: GatewayConfig): Promise<void> {
    const limits = config.server.limits
    this.#server = createServer(
      {
        maxHeaderSize: limits.maxHeaderBytes,
        headersTimeout: limits.headersTimeoutMs,
        requestTimeout: limits.requestTimeoutMs,
        keepAliveTimeout: limits.keepAliveTimeoutMs,
        connectionsCheckingInterval: 1000,
      },
      (req, res) => {
        // Workstations are not routes of the table: their own sign-in, identity check and proxy.
        if (this.#workstations && this.#workstationCode!.WorkstationPublicRoutes.owns(req.url)) return void this.#workstations.routes.handle(req, res)
        handleRequest(this.#deps, this.#table, req, res)
      },
    )
    this.#server.on('upgrade', (req, socket, head) => {
      if (this.#workstations && this.#workstationCode!.WorkstationPublicRoutes.owns(req.url) && !this.#draining) return void this.#workstations.routes.upgrade(req, socket, head)
      socket.end('HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n')
    })
    this.#server.maxRequestsPerSocket = limits.maxRequestsPerSocket
    this.#server.on('clientError', (error: NodeJS.ErrnoException, socket) => answerParserRefusal(this.#deps, error, socket as Socket))
    this.#admin = createAdminServer({
      table: () => this.#table,
      ready: () => !this.#draining,
      storeHealth: () => this.store.health(),
      metricsText: async () => ({ contentType: this.metrics.registry.contentType, body: await this.metrics.registry.metrics() }),
      reload: () => this.reload(),
      tokenHash: () => this.#table.config.admin.tokenHash,
      protectMetrics: () => this.#table.config.admin.protectMetrics,
      accounts: this.accounts,
      settingsRoutes: settingsAdmin(
        { settings: this.store.settings, sync: this.settingsSync, projects: () => this.#table.projects, accounts: this.accounts, store: this.store },
        () => this.#table.seedProjects,
      ),
      creditsRoutes: creditsAdmin({ store: this.store, projects: () => this.#table.projects, accounts: this.accounts }),
      publicPages: async (req, url) => (this.#workstations ? this.#workstationCode!.workstationPanelRoute(req, url, this.#workstations.publicUrl) : undefined),
      extraRoutes: async (req, url, principal) => {
        if (!this.#workstations) return undefined
        const code = this.#workstationCode!
        const identity = await code.identityAdminRoute({ links: this.#workstations.links, routes: this.#workstations.routes, publicBase: () => this.address }, req, url, principal)
        if (identity) return identity
        return code.workstationAdminRoute(this.#workstations.service, req, url, (projectId) => this.accounts.canAccessProject(principal, projectId))
      },
      coreRoutes: [
        alertsAdmin(this.alerts, () => this.#table.projects, (principal, projectId) => this.accounts.canAccessProject(principal, projectId), {
          settings: this.store.settings,
          sync: this.settingsSync,
          projectConfigs: () => this.#table.config.projects,
        }),
        userRoutes({ accounts: this.accounts, settings: this.store.settings, projects: () => this.#table.projects }),
        trafficAdmin({ traffic: this.traffic, projects: () => this.#table.projects, accounts: this.accounts }),
      ],
      dashboard: dashboard({ store: this.store, alerts: this.alerts, traffic: this.traffic, projects: () => this.#table.projects, auth: (req) => this.dashboardAuth(req),
        workstationBase: () => (this.#workstations ? this.#workstations.publicUrl ?? this.address : undefined),
        alertConfig: (projectId) => this.#table.config.projects.find((p) => p.id === projectId)?.alerts,
        upstreams: () => this.#upstreams.values(),
      }),
    })
    const host = this.#options.host ?? config.server.listen.host
    await listen(this.#server, this.#options.port ?? config.server.listen.port, host)
    await listen(this.#admin, this.#options.adminPort ?? config.admin.listen.port, this.#options.adminHost ?? this.#options.host ?? config.admin.listen.host, this.#options.worker)
  }

  #watch(config: GatewayConfig): void {
    const files = new Set([basename(config.file)])
    const dir = dirname(config.file)
    try {
      const watcher = watch(dir, (_event, name) => {
        if (!name || !files.has(String(name))) return
        clearTimeout(this.#debounce)
        this.#debounce = setTimeout(() => this.reloadInBackground('file change'), 250)
      })
      watcher.on('error', (error) => this.log.warn({ err: error }, 'config watch stopped'))
      this.#watchers.push(watcher)
    } catch (error) {
      this.log.warn({ err: error }, 'cannot watch the config directory; reload with SIGHUP')
    }
  }

  /** Loads and builds the config again; swaps it in only if everything is valid. */
  /**
   * A reload nobody awaits (file change, SIGHUP): one that throws (a config it refuses resolves
   * instead) is counted in tollgate_background_errors_total{task="config-reload"} and logged once per
   * outage, never an unhandled rejection.
   */
  reloadInBackground(reason: string): void {
    this.reload(reason).catch((error) => backgroundFailed('config-reload', error, this.log))
  }

  reload(reason = 'request'): Promise<ReloadResult> {
    // Serialise reloads: a burst of file events must not build tables concurrently.
    const run = async (): Promise<ReloadResult> => {
      const loaded = await loadConfig(this.#options.configFile, this.#options.env ?? process.env)
      if (!loaded.config) return this.#reloadFailed(loaded.issues.map(formatIssue), reason)
      if (loaded.config.hash === this.#table.config.hash) return { ok: true, issues: [] }
      const { current, retired } = reconcileUpstreams(this.#upstreams, loaded.config.upstreams)
      const built = await buildTable(loaded.config, {
        log: this.log,
        metrics: this.metrics,
        store: this.store,
        upstreams: current,
        plugins: loaded.plugins,
        locate: loaded.locate,
        projectOverrides: this.settingsSync.snapshot.projects,
      })
      if (!built.table) {
        for (const handle of current.values()) if (this.#upstreams.get(handle.name) !== handle) void handle.pool.close()
        return this.#reloadFailed(built.issues.map(formatIssue), reason)
      }
      const previous = this.#table
      const projectsBefore = previous.projects.all()
      // Swap: the map object is shared with in-flight requests' deps, so mutate it in place.
      this.#upstreams.clear()
      for (const [name, handle] of current) this.#upstreams.set(name, handle)
      this.#table = built.table
      // Settings read while the new table was being built.
      this.settingsSync.apply(built.table.projects, built.table.seedProjects)
      // A schedule changed in the file never drops grants (core/projects/credit-carry.ts); a store outage
      // is counted and logged, never a failed reload.
      void runInBackground('reload-carry', async () => {
        const carried = await carryOnReload(this.store, projectsBefore, built.table!.projects, loaded.config!.hash, Date.now())
        for (const carry of carried) this.log.info({ from: carry.from.period, to: carry.to.period, amount: carry.amount }, 'unspent grants carried into the new period')
      }, this.log)
      previous.retired = true
      if (previous.inFlight === 0) void closeTable(previous)
      setTimeout(() => retired.forEach((handle) => void handle.pool.close()), previous.config.server.drainTimeoutMs).unref()
      this.metrics.configLoaded(loaded.config.hash)
      this.metrics.reloads.inc({ result: 'success' })
      this.log.info({ reason, hash: loaded.config.hash.slice(0, 16), routes: built.table.routes.length }, 'config reloaded')
      return { ok: true, issues: [] }
    }
    const next = (this.#reloading ?? Promise.resolve()).then(run, run)
    this.#reloading = next
    return next
  }

  #reloadFailed(issues: string[], reason: string): ReloadResult {
    this.metrics.reloads.inc({ result: 'failure' })
    this.log.error({ reason, issues }, 'config reload failed; keeping the config in service')
    return { ok: false, issues }
  }

  /** Stops accepting, drains in-flight requests up to the deadline, then closes everything. */
  async stop(): Promise<void> {
    if (this.#draining) return
    this.#draining = true
    clearTimeout(this.#debounce)
    for (const watcher of this.#watchers) watcher.close()
    const closed = new Promise<void>((done) => this.#server.close(() => done()))
    this.#server.closeIdleConnections()
    const deadline = Date.now() + this.#table.config.server.drainTimeoutMs
    while (this.#table.inFlight > 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20))
      this.#server.closeIdleConnections()
    }
    this.#server.closeAllConnections()
    await closed
    this.settingsSync.stop()
    await this.#workstations?.close()
    this.alerts.stop()
    await closeTable(this.#table)
    await Promise.allSettled([...this.#upstreams.values()].map((u) => u.pool.close()))
    await new Promise<void>((done) => {
      this.#admin.close(() => done())
      this.#admin.closeAllConnections()
    })
    await this.traffic.close().catch(() => {})
    await this.store.close()
    this.log.info('tollgate stopped')
    flushLogger(this.log)
  }
}
