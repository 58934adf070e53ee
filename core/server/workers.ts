/**
 * `tollgate start --workers N|auto`: N gateway processes (node:cluster) sharing the public
 * listener. The primary process:
 *
 * - forks the workers and forks a replacement for one that dies unexpectedly (after a back-off
 *   when they die young, so a crash loop does not spin);
 * - forwards SIGTERM/SIGINT (each worker drains gracefully, then the primary exits) and SIGHUP
 *   (each worker reloads gateway.yaml);
 * - owns the admin listener: `/healthz`, `/readyz` (ready while at least one worker is and no
 *   drain started), `/metrics` (every worker's registry summed with prom-client's
 *   `AggregatorRegistry.aggregate`, plus the primary's worker gauges), and `/admin/*` proxied to
 *   one ready worker's private loopback admin listener (round robin). Workers do not share the
 *   admin port, so one scrape is one consistent answer, never one worker's share;
 * - with the embedded engine, owns the SQLite store: workers use it through the IPC proxy of
 *   store/primary-store.ts, so the ledger, reservations and rate limits stay exact (one ledger).
 *   With a shared engine, each worker opens the store itself.
 */
import cluster, { type Worker } from 'node:cluster'
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { availableParallelism } from 'node:os'
import { resolve } from 'node:path'
import { AggregatorRegistry, Counter, Gauge, Registry } from 'prom-client'
import type { Logger } from 'pino'
import { loadConfig } from '../config/load.ts'
import { formatIssue } from '../config/source.ts'
import type { GatewayConfig } from '../config/types.ts'
import { ConfigError, Gateway } from './gateway.ts'
import { createLogger, flushLogger } from '../proxy/log.ts'
import { credentialMatches } from '../projects/projects.ts'
import { openSqliteStore } from '../store/sqlite.ts'
import { PrimaryStore, serveStoreToWorkers } from '../store/primary-store.ts'
import type { Store } from '../store/types.ts'

type metric = Awaited<ReturnType<Registry['getMetricsAsJSON']>>[number]

/** Upper bound of `--workers`: more processes than this on one host is a typo, not a plan. */
export const MAX_WORKERS = 64
const STORE_MODE_ENV = 'TOLLGATE_WORKER_STORE'
/** A worker that lived less than this is restarted after a growing delay. */
const YOUNG_DEATH_MS = 5000
const MAX_RESTART_DELAY_MS = 5000
const METRICS_TIMEOUT_MS = 2000

/** `N` (1..64) or `auto` (the host's available parallelism); an Error naming the flag otherwise. */
export function parseWorkerCount(value: string): number | Error {
  if (value === 'auto') return Math.min(MAX_WORKERS, Math.max(1, availableParallelism()))
  const count = /^\d+$/.test(value) ? Number(value) : NaN
  if (!Number.isInteger(count) || count < 1 || count > MAX_WORKERS) return new Error(`--workers must be a whole number from 1 to ${MAX_WORKERS}, or auto (got "${value}")`)
  return count
}

/** True in a process forked by {@link runPrimary}. */
export function isWorker(): boolean {
  return cluster.isWorker && process.env[STORE_MODE_ENV] !== undefined
}

interface ReadyMessage {
  tg: 'worker.ready'
  address: string
  admin: string
}

/** Runs the primary until SIGTERM/SIGINT and the workers' drain; returns the exit code. */
export async function runPrimary(file: string, count: number): Promise<number> {
  const loaded = await loadConfig(file)
  if (!loaded.config) {
    for (const issue of loaded.issues) console.error(formatIssue(issue))
    return 1
  }
  let config: GatewayConfig = loaded.config
  const log = createLogger({ level: config.log.level }).child({ role: 'primary' })
  const embedded = config.store.engine === 'sqlite'
  let store: Store | undefined
  let serving: ReturnType<typeof serveStoreToWorkers> | undefined
  if (embedded) {
    try {
      store = openSqliteStore({ dataDir: resolve(config.dir, config.store.dataDir) })
    } catch (error) {
      console.error(`tollgate: ${(error as Error).message}`)
      return 1
    }
    const recovered = await store.recoverPendingReservations()
    if (recovered) log.warn({ recovered }, 'released credit reservations left pending by an earlier crash')
    serving = serveStoreToWorkers(store, () => liveWorkers())
  }

  const registry = new Registry()
  const readyGauge = new Gauge({ name: 'tollgate_workers_ready', help: 'Worker processes ready to serve.', registers: [registry] })
  const wantedGauge = new Gauge({ name: 'tollgate_workers_configured', help: 'Worker processes the primary keeps running (--workers).', registers: [registry] })
  const restarts = new Counter({ name: 'tollgate_worker_restarts_total', help: 'Workers forked again after an unexpected exit.', registers: [registry] })
  wantedGauge.set(count)

  const ready = new Map<number, ReadyMessage>()
  let stopping = false
  let startedLogged = false
  let youngDeaths = 0
  let next = 0
  const bornAt = new Map<number, number>()
  const liveWorkers = (): Worker[] => Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined)

  let failStartup: (error: Error) => void = () => {}
  let checkStartup = () => {}
  const allReady = new Promise<void>((resolveReady, reject) => {
    failStartup = reject
    checkStartup = () => {
      if (ready.size >= count) resolveReady()
    }
  })

  const fork = (): Worker => {
    const worker = cluster.fork({ [STORE_MODE_ENV]: embedded ? 'primary' : 'own' })
    bornAt.set(worker.id, Date.now())
    serving?.attach(worker)
    worker.on('message', (message: ReadyMessage) => {
      if (message?.tg !== 'worker.ready') return
      ready.set(worker.id, message)
      readyGauge.set(ready.size)
      log.info({ worker: worker.id, workerPid: worker.process.pid }, 'worker ready')
      checkStartup()
    })
    worker.on('exit', (code, signal) => {
      ready.delete(worker.id)
      readyGauge.set(ready.size)
      const lived = Date.now() - (bornAt.get(worker.id) ?? Date.now())
      bornAt.delete(worker.id)
      if (stopping) return
      if (!startedLogged) {
        failStartup(new Error(`worker ${worker.process.pid} exited (code ${code}, signal ${signal}) before the gateway was up`))
        return
      }
      youngDeaths = lived < YOUNG_DEATH_MS ? youngDeaths + 1 : 0
      const delay = youngDeaths === 0 ? 0 : Math.min(MAX_RESTART_DELAY_MS, 100 * 2 ** youngDeaths)
      log.warn({ workerPid: worker.process.pid, code, signal, restartInMs: delay }, 'worker exited unexpectedly; forking a replacement')
      restarts.inc()
      setTimeout(() => {
        if (!stopping) fork()
      }, delay).unref()
    })
    return worker
  }

  const admin = createServer((req, res) => {
    handleAdmin(req, res).catch((error) => {
      log.error({ err: error }, 'admin request failed')
      if (!res.headersSent) sendJson(res, 500, { error: { code: 'internal_error', message: 'internal admin error' } })
      else res.destroy()
    })
  })
  const handleAdmin = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = new URL(req.url ?? '/', 'http://admin').pathname
    if (req.method === 'GET' && path === '/healthz') return sendJson(res, 200, { status: 'ok', workers: ready.size })
    if (req.method === 'GET' && path === '/readyz') {
      const up = !stopping && ready.size > 0
      return sendJson(res, up ? 200 : 503, { status: up ? 'ready' : 'not_ready', workers: ready.size })
    }
    if (path === '/metrics' && (req.method === 'GET' || req.method === 'HEAD')) {
      if (config.admin.protectMetrics && !authorised(req, config.admin.tokenHash)) {
        return sendJson(res, 401, { error: { code: 'admin_unauthorized', message: 'a valid admin bearer token is required' } })
      }
      const merged = AggregatorRegistry.aggregate([...(await workerMetrics()), await registry.getMetricsAsJSON()])
      res.writeHead(200, { 'content-type': merged.contentType })
      return void res.end(req.method === 'HEAD' ? undefined : await merged.metrics())
    }
    const target = pickWorker()
    if (!target) return sendJson(res, 503, { error: { code: 'no_worker', message: 'no worker is ready' } })
    proxy(req, res, target.admin)
  }
  let turn = 0
  const pickWorker = (): ReadyMessage | undefined => {
    const all = [...ready.values()]
    return all.length ? all[turn++ % all.length] : undefined
  }
  const workerMetrics = async (): Promise<metric[][]> => {
    const asked = liveWorkers().filter((w) => ready.has(w.id) && w.isConnected())
    return (
      await Promise.all(
        asked.map(
          (worker) =>
            new Promise<metric[] | undefined>((resolveMetrics) => {
              const id = ++next
              const timer = setTimeout(() => done(undefined), METRICS_TIMEOUT_MS)
              const onMessage = (message: { tg?: string; id?: number; json?: metric[] }) => {
                if (message?.tg === 'metrics.reply' && message.id === id) done(message.json)
              }
              const done = (json: metric[] | undefined) => {
                clearTimeout(timer)
                worker.off('message', onMessage)
                resolveMetrics(json)
              }
              worker.on('message', onMessage)
              worker.send({ tg: 'metrics.get', id })
            }),
        ),
      )
    ).filter((json): json is metric[] => json !== undefined)
  }

  for (let i = 0; i < count; i++) fork()
  try {
    await allReady
  } catch (error) {
    stopping = true
    console.error(`tollgate: ${(error as Error).message}`)
    for (const worker of liveWorkers()) worker.process.kill('SIGKILL')
    serving?.stop()
    await store?.close()
    return 1
  }
  const first = [...ready.values()][0]
  try {
    await listenOn(admin, config.admin.listen.port, config.admin.listen.host)
  } catch (error) {
    stopping = true
    console.error(`tollgate: admin listener: ${(error as Error).message}`)
    for (const worker of liveWorkers()) worker.process.kill('SIGTERM')
    await waitForExit(liveWorkers())
    serving?.stop()
    await store?.close()
    return 1
  }
  startedLogged = true
  log.info({ address: first.address, admin: addressOf(admin), workers: count, store: embedded ? 'embedded (owned by the primary)' : config.store.engine }, 'tollgate started')

  process.on('SIGHUP', () => {
    void loadConfig(file).then((reloaded) => {
      if (reloaded.config) config = reloaded.config
    })
    for (const worker of liveWorkers()) worker.process.kill('SIGHUP')
  })
  await new Promise<void>((resolveStop) => {
    const stop = () => {
      process.off('SIGTERM', stop)
      process.off('SIGINT', stop)
      resolveStop()
    }
    process.on('SIGTERM', stop)
    process.on('SIGINT', stop)
  })
  stopping = true
  log.info({ workers: liveWorkers().length }, 'draining the workers')
  const workers = liveWorkers()
  for (const worker of workers) worker.process.kill('SIGTERM')
  // Each worker drains up to drainTimeoutMs; one that hangs past that (and a margin) is killed.
  const deadline = setTimeout(() => {
    for (const worker of liveWorkers()) worker.process.kill('SIGKILL')
  }, config.server.drainTimeoutMs + 5000)
  await waitForExit(workers)
  clearTimeout(deadline)
  await new Promise<void>((done) => {
    admin.close(() => done())
    admin.closeAllConnections()
  })
  serving?.stop()
  await store?.close()
  log.info('tollgate stopped')
  flushLogger(log as Logger)
  return 0
}

/** Runs one worker: a gateway on the shared listener, its own admin listener on loopback. */
export async function runWorker(file: string): Promise<number> {
  let gateway: Gateway
  try {
    gateway = await Gateway.start({
      configFile: file,
      store: process.env[STORE_MODE_ENV] === 'primary' ? new PrimaryStore() : undefined,
      worker: true,
      adminPort: 0,
      adminHost: '127.0.0.1',
    })
  } catch (error) {
    if (error instanceof ConfigError) for (const issue of error.issues) console.error(issue)
    else console.error(`tollgate worker: ${(error as Error).message}`)
    return 1
  }
  process.on('message', (message: { tg?: string; id?: number }) => {
    if (message?.tg !== 'metrics.get') return
    void gateway.metrics.registry.getMetricsAsJSON().then((json) => process.send?.({ tg: 'metrics.reply', id: message.id, json }))
  })
  process.on('SIGHUP', () => gateway.reloadInBackground('SIGHUP'))
  const ready: ReadyMessage = { tg: 'worker.ready', address: gateway.address, admin: gateway.adminAddress }
  process.send!(ready)
  await new Promise<void>((resolveStop) => {
    const stop = () => {
      process.off('SIGTERM', stop)
      process.off('SIGINT', stop)
      process.off('disconnect', stop)
      gateway.stop().then(resolveStop, resolveStop)
    }
    process.on('SIGTERM', stop)
    process.on('SIGINT', stop)
    // The primary is gone (it owned the store, or nobody would restart us): drain and leave.
    process.on('disconnect', stop)
  })
  // The IPC channel would keep the process alive.
  if (process.connected) process.disconnect()
  return 0
}

function proxy(req: IncomingMessage, res: ServerResponse, base: string): void {
  const url = new URL(base)
  const upstream = httpRequest({ host: url.hostname, port: url.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
    res.writeHead(answer.statusCode ?? 502, answer.headers)
    answer.pipe(res)
  })
  upstream.on('error', () => {
    if (!res.headersSent) sendJson(res, 502, { error: { code: 'worker_unavailable', message: 'the worker answering admin requests went away; retry' } })
    else res.destroy()
  })
  req.pipe(upstream)
}

function authorised(req: IncomingMessage, tokenHash: string | undefined): boolean {
  const header = req.headers.authorization ?? ''
  const token = header.startsWith('Bearer ') ? header.slice(7) : ''
  return tokenHash !== undefined && token !== '' && credentialMatches(token, tokenHash)
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' })
  res.end(JSON.stringify(body, null, 2))
}

function listenOn(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolveListen, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolveListen()
    })
  })
}

function addressOf(server: Server): string {
  const a = server.address() as import('node:net').AddressInfo
  return `http://${a.address.includes(':') ? `[${a.address}]` : a.address}:${a.port}`
}

function waitForExit(workers: Worker[]): Promise<void> {
  return Promise.all(workers.map((worker) => (worker.isDead() ? undefined : new Promise<void>((done) => worker.once('exit', () => done()))))).then(() => undefined)
}
