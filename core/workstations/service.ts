/**
 * The workstation service: applies the lifecycle (states.ts) to records in the Store, runs the
 * driver's work, and keeps running workstations honest (timeouts, idle auto-stop, per-minute
 * charges, recovery after a restart).
 *
 * Every record change is a compare-and-set on the record's revision (Store documents), so any
 * instance sharing the store can answer the API: two instances that act at once cannot both move a
 * workstation out of one state. The instance that accepted an action runs the driver's work; the
 * result is written only if the record is still in the state the work began from. A start whose
 * record moved on meanwhile (stopped, deleted, timed out) stops what it started itself, so nothing
 * is left running that no record names.
 */
import type { Logger } from 'pino'
import type { Project } from '../projects/projects.ts'
import { runInBackground } from '../proxy/resilience.ts'
import { currentSchedulePeriod } from '../store/periods.ts'
import type { DocumentCollection, Store } from '../store/types.ts'
import type { WorkstationDriver } from './driver.ts'
import { decide, moved, TRANSITIONAL, type WorkstationAction, type WorkstationRecord, type WorkstationState } from './states.ts'

/** Collection and owner of the records (one owner, so `listByOwner` lists them all). */
const COLLECTION = 'workstations'
const OWNER = 'workstations'
const MINUTE_MS = 60_000

export interface WorkstationServiceOptions {
  store: Store
  driver: WorkstationDriver
  /** The project as the gateway knows it now (yaml + run-time settings); undefined when unknown. */
  project(projectId: string): Project | undefined
  log: Logger
  clock?: () => number
  /** Per transitional state, ms after which it ends in `failed` (defaults: 90 s up, 60 s down). */
  timeoutsMs?: Partial<Record<'provisioning' | 'starting' | 'stopping' | 'deleting', number>>
  /** Stop a ready workstation after this long without traffic through the proxy; 0 = never. */
  idleStopMs?: number
  /** Credits charged per started minute of running time. */
  creditsPerMinute?: number
  /** How often timeouts, idle time and charges are checked (default 1 s; tests call `tick`). */
  tickMs?: number
}

/** What the API answers about a workstation. */
export interface WorkstationView {
  projectId: string
  state: WorkstationState
  desired?: string
  reason?: string
  since?: number
  /** Where the browser opens it (public listener), when ready. */
  openPath?: string
  lastActivityAt?: number
  creditsCharged: number
  history: WorkstationRecord['history']
}

/** An answer of {@link WorkstationService.act}: 200/202 with the view, or an error. */
export type ActResult =
  | { status: 200 | 202; body: WorkstationView }
  | { status: 403 | 404 | 409; body: { error: { code: string; message: string } }; }

const failure = (status: 403 | 404 | 409, code: string, message: string): ActResult => ({ status, body: { error: { code, message } } })

export class WorkstationService {
  private readonly docs: DocumentCollection
  private readonly clock: () => number
  private readonly timeouts: Record<'provisioning' | 'starting' | 'stopping' | 'deleting', number>
  private readonly work = new Map<string, Promise<void>>()
  private timer: NodeJS.Timeout | undefined
  private ticking = false
  private closed = false

  constructor(private readonly options: WorkstationServiceOptions) {
    this.docs = options.store.documents(COLLECTION)
    this.clock = options.clock ?? Date.now
    this.timeouts = { provisioning: 90_000, starting: 90_000, stopping: 60_000, deleting: 60_000, ...options.timeoutsMs }
  }

  /** Recovers after a restart, then checks every `tickMs`. */
  async start(): Promise<void> {
    await this.recover()
    const tickMs = this.options.tickMs ?? 1000
    // A store outage must never end the process: a failed pass is counted, logged once per outage, and the next one runs.
    this.timer = setInterval(() => void runInBackground('workstations-tick', () => this.tick(), this.options.log), tickMs)
    this.timer.unref()
  }

  /** Stops the checks and waits for driver work in flight. Running workstations keep running. */
  async close(): Promise<void> {
    this.closed = true
    if (this.timer) clearInterval(this.timer)
    await Promise.allSettled([...this.work.values()])
  }

  /**
   * Whether the project exists and has the feature on; the error to answer otherwise. Stopping and
   * deleting (and looking) stay possible while a record exists: turning the feature off must never
   * leave a workstation nobody can stop.
   */
  private async gate(projectId: string, action?: WorkstationAction): Promise<ActResult | undefined> {
    const project = this.options.project(projectId)
    const winding = action === undefined || action === 'stop' || action === 'delete'
    if (winding && (await this.docs.get<WorkstationRecord>(projectId))) return undefined
    if (!project) return failure(404, 'project_not_found', `no project ${JSON.stringify(projectId)}`)
    if (!project.features.workstation) return failure(403, 'workstation_not_enabled', `the workstation feature is not enabled for project ${projectId}; an operator enables it (features.workstation)`)
    return undefined
  }

  /** Whether the project may use its workstation now (exists, feature on): the proxy asks on every request and for open connections. */
  enabled(projectId: string): boolean {
    return this.options.project(projectId)?.features.workstation === true
  }

  async view(projectId: string): Promise<ActResult> {
    const refused = await this.gate(projectId)
    if (refused) return refused
    const found = await this.docs.get<WorkstationRecord>(projectId)
    return { status: 200, body: toView(projectId, found?.doc) }
  }

  /** Applies an operator action: 202 when accepted (or already under way), 409 when it makes no sense now. */
  async act(projectId: string, action: WorkstationAction, by = `api:${action}`): Promise<ActResult> {
    const refused = await this.gate(projectId, action)
    if (refused) return refused
    for (let attempt = 0; attempt < 20; attempt++) {
      const current = await this.docs.getWithRevision<WorkstationRecord>(projectId)
      const record = current?.stored.doc
      const decision = decide(record?.state ?? 'absent', action)
      if (decision.kind === 'conflict') return failure(409, decision.code, decision.message)
      if (decision.kind === 'already') return { status: 202, body: toView(projectId, record) }
      const now = this.clock()
      const base: WorkstationRecord = record ?? { projectId, state: 'provisioning', desired: 'running', since: now, lastActivityAt: now, creditsCharged: 0, history: [] }
      const next = { ...moved(record ? base : { ...base, history: [] }, decision.to as Exclude<WorkstationState, 'absent'>, now, by), desired: decision.desired, lastActivityAt: now }
      if (!record) next.history = [{ at: now, from: 'absent', to: 'provisioning', by }]
      const written = current
        ? await this.docs.compareAndSet(projectId, current.revision, next)
        : ((await this.docs.insertIfAbsent(projectId, OWNER, next)).created ? 1 : undefined)
      if (written === undefined) continue // another instance moved it first: decide again
      this.options.log.info({ projectId, from: record?.state ?? 'absent', to: next.state, by }, 'workstation transition')
      this.run(projectId, () => this.carryOut(projectId, next))
      return { status: 202, body: toView(projectId, next) }
    }
    return failure(409, 'workstation_busy', 'the workstation changed too often to apply the action; retry')
  }

  /** The loopback target of a ready workstation, for the proxy. */
  async target(projectId: string): Promise<string | undefined> {
    const found = await this.docs.get<WorkstationRecord>(projectId)
    return found?.doc.state === 'ready' ? found.doc.handle?.target : undefined
  }

  /** Notes traffic (the proxy calls it); written at most every 5 s per workstation. */
  async touch(projectId: string): Promise<void> {
    await this.update(projectId, (record) => (record.state === 'ready' && this.clock() - record.lastActivityAt >= 5_000 ? { ...record, lastActivityAt: this.clock() } : undefined))
  }

  /** Waits for the driver work in flight for `projectId` (tests, close). */
  async settled(projectId: string): Promise<void> {
    while (this.work.has(projectId)) await this.work.get(projectId)
  }

  /** Timeouts, idle auto-stop and per-minute charges, over every record. */
  async tick(): Promise<void> {
    if (this.ticking || this.closed) return
    this.ticking = true
    try {
      for (const { doc: record } of await this.docs.listByOwner<WorkstationRecord>(OWNER)) {
        await this.check(record).catch((error) => this.options.log.warn({ err: error, projectId: record.projectId }, 'workstation check failed'))
      }
    } finally {
      this.ticking = false
    }
  }

  private async check(record: WorkstationRecord): Promise<void> {
    const now = this.clock()
    const { projectId } = record
    if (TRANSITIONAL.has(record.state)) {
      const limit = this.timeouts[record.state as keyof typeof this.timeouts]
      if (now - record.since > limit) {
        const reason = `${record.state} did not finish within ${Math.round(limit / 1000)} s`
        const failed = await this.transition(projectId, record.state, (r) => moved(r, 'failed', now, 'timeout', reason))
        if (failed?.handle) await this.options.driver.stop(failed.handle).catch(() => {})
      }
      return
    }
    if (record.state !== 'ready') return
    // Feature turned off (or project removed): stop it and its metering now, not at the next idle check.
    if (!this.enabled(projectId)) {
      await this.stopFor(projectId, 'feature', 'the workstation feature was turned off for this project')
      return
    }
    const idle = this.options.idleStopMs ?? 0
    if (idle > 0 && now - record.lastActivityAt > idle) {
      await this.stopFor(projectId, 'idle', `stopped after ${Math.round(idle / 1000)} s without use`)
      return
    }
    await this.charge(record)
  }

  /** Charges every minute due; stops the workstation when the project's credits do not cover one. */
  private async charge(record: WorkstationRecord): Promise<void> {
    const perMinute = this.options.creditsPerMinute ?? 1
    const project = this.options.project(record.projectId)
    if (!project) return
    for (;;) {
      const now = this.clock()
      const current = await this.docs.getWithRevision<WorkstationRecord>(record.projectId)
      if (!current || current.stored.doc.state !== 'ready') return
      const minuteStart = current.stored.doc.paidUntil ?? current.stored.doc.since
      if (now < minuteStart) return
      // Claim the minute first (compare-and-set), so two instances never charge it twice.
      const claimed = { ...current.stored.doc, paidUntil: minuteStart + MINUTE_MS, creditsCharged: current.stored.doc.creditsCharged + perMinute }
      if ((await this.docs.compareAndSet(record.projectId, current.revision, claimed)) === undefined) continue
      if (perMinute === 0) continue
      const reservationId = `workstation:${record.projectId}:${minuteStart}`
      const reserved = await this.options.store.reserveCredits({
        id: reservationId,
        projectId: record.projectId,
        period: currentSchedulePeriod(project.credits, minuteStart),
        allocation: project.credits.allocation,
        amount: perMinute,
        apiType: 'workstation',
      })
      if (!reserved.ok) {
        await this.update(record.projectId, (r) => ({ ...r, paidUntil: minuteStart, creditsCharged: r.creditsCharged - perMinute }))
        await this.options.store.closeCredits(reservationId)
        await this.stopFor(record.projectId, 'credits', `credits ran out: ${reserved.balance.remaining} left, a minute costs ${perMinute}`)
        return
      }
      await this.options.store.commitCredits(reservationId)
      await this.options.store.closeCredits(reservationId)
      await this.options.store.recordUsage({ projectId: record.projectId, apiType: 'workstation', at: minuteStart, requests: 1, credits: perMinute, errors: 0 })
    }
  }

  private async stopFor(projectId: string, by: string, reason: string): Promise<void> {
    const now = this.clock()
    const stopping = await this.transition(projectId, 'ready', (r) => ({ ...moved(r, 'stopping', now, by, reason), desired: 'stopped' as const }))
    if (stopping) {
      this.options.log.info({ projectId, by, reason }, 'workstation stopped by the gateway')
      this.run(projectId, () => this.carryOut(projectId, stopping))
    }
  }

  /** After a restart: ready workstations whose server is gone become stopped; unclaimed servers are killed. */
  async recover(): Promise<void> {
    const records = (await this.docs.listByOwner<WorkstationRecord>(OWNER)).map((found) => found.doc)
    const claimed = []
    for (const record of records) {
      if (!record.handle || record.handle.driver !== this.options.driver.name) continue
      if (record.state === 'ready') {
        if (await this.options.driver.alive(record.handle)) {
          claimed.push(record.handle)
          this.options.log.info({ projectId: record.projectId }, 'workstation found running after restart')
          continue
        }
        const now = this.clock()
        await this.transition(record.projectId, 'ready', (r) => ({ ...moved(r, 'stopped', now, 'restart', 'the workstation server was not running after a gateway restart'), handle: undefined }))
        // What a dead server leaves behind (a mounted home, a cgroup, stray processes) goes too.
        await this.options.driver.stop(record.handle).catch(() => {})
      } else if (record.state === 'stopped' || record.state === 'failed') {
        await this.options.driver.stop(record.handle).catch(() => {})
      } else {
        claimed.push(record.handle)
      }
    }
    const reaped = (await this.options.driver.reap?.(claimed)) ?? 0
    if (reaped) this.options.log.warn({ reaped }, 'stopped workstation servers no record claimed')
  }

  /** Runs the driver's part of the state `record` is in, then writes the outcome. */
  private async carryOut(projectId: string, record: WorkstationRecord): Promise<void> {
    const { driver } = this.options
    const state = record.state
    try {
      if (state === 'provisioning' || state === 'starting') {
        if (state === 'provisioning') await driver.provision(projectId)
        const handle = await driver.start(projectId)
        const now = this.clock()
        const ready = await this.transition(projectId, state, (r) => ({ ...moved(r, 'ready', now, 'driver'), handle, lastActivityAt: now, paidUntil: undefined }))
        if (!ready) await driver.stop(handle) // the record moved on meanwhile: leave nothing running
        else await this.charge(ready)
      } else if (state === 'stopping') {
        const current = await this.docs.get<WorkstationRecord>(projectId)
        if (current?.doc.handle) await driver.stop(current.doc.handle)
        await this.transition(projectId, 'stopping', (r) => ({ ...moved(r, 'stopped', this.clock(), 'driver', r.reason), handle: undefined }))
      } else if (state === 'deleting') {
        const current = await this.docs.get<WorkstationRecord>(projectId)
        await driver.delete(projectId, current?.doc.handle)
        const still = await this.docs.get<WorkstationRecord>(projectId)
        if (still?.doc.state === 'deleting') await this.docs.delete(projectId)
      }
    } catch (error) {
      const reason = `${state} failed: ${(error as Error).message}`
      this.options.log.warn({ projectId, err: error }, 'workstation driver failed')
      await this.transition(projectId, state, (r) => moved(r, 'failed', this.clock(), 'driver', reason))
    }
  }

  /** Moves the record with `change` only if it is still in `from`; returns the written record. */
  private async transition(projectId: string, from: WorkstationState, change: (record: WorkstationRecord) => WorkstationRecord): Promise<WorkstationRecord | undefined> {
    return this.update(projectId, (record) => (record.state === from ? change(record) : undefined))
  }

  /** Read, change, compare-and-set, retried on a lost race; `change` returning undefined writes nothing. */
  private async update(projectId: string, change: (record: WorkstationRecord) => WorkstationRecord | undefined): Promise<WorkstationRecord | undefined> {
    for (let attempt = 0; attempt < 20; attempt++) {
      const current = await this.docs.getWithRevision<WorkstationRecord>(projectId)
      if (!current) return undefined
      const next = change(current.stored.doc)
      if (!next) return undefined
      if ((await this.docs.compareAndSet(projectId, current.revision, next)) !== undefined) return next
    }
    throw new Error(`workstation ${projectId}: too many concurrent changes`)
  }

  /** Chains driver work per project on this instance, so a stop waits for the start before it. */
  private run(projectId: string, job: () => Promise<void>): void {
    const previous = this.work.get(projectId) ?? Promise.resolve()
    const next = previous.then(job).catch((error) => this.options.log.error({ err: error, projectId }, 'workstation work failed'))
    this.work.set(projectId, next)
    void next.finally(() => {
      if (this.work.get(projectId) === next) this.work.delete(projectId)
    })
  }
}

function toView(projectId: string, record: WorkstationRecord | undefined): WorkstationView {
  if (!record) return { projectId, state: 'absent', creditsCharged: 0, history: [] }
  return {
    projectId,
    state: record.state,
    desired: record.desired,
    ...(record.reason === undefined ? {} : { reason: record.reason }),
    since: record.since,
    ...(record.state === 'ready' ? { openPath: `/workstations/${encodeURIComponent(projectId)}/` } : {}),
    lastActivityAt: record.lastActivityAt,
    creditsCharged: record.creditsCharged,
    history: record.history,
  }
}
