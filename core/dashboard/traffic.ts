/**
 * The dashboard's tally of answers per project: how many of each status (and, for a refusal, its
 * code or reason) per UTC hour, and per key its requests, refusals and last use. The usage series
 * (credit-meter) books only requests of a known project on metered routes; this tally also counts
 * what auth refused for a key it knew (wrong scope or plan, `ctx.refused`) and routes without a meter.
 *
 * Off the hot path: `record` bumps counters in memory (per project: a status or a refusal label,
 * and per key), sealed into per-hour tallies when they are flushed or read; every `FLUSH_MS` the deltas are merged into
 * one store document per project (`traffic:<project>`, collection `dashboard`) by compare-and-set,
 * so several instances add up instead of overwriting each other. Hours older than `KEEP_HOURS` are
 * dropped at each merge. What is not flushed yet is added on read, so this instance's own traffic
 * shows at once; a crash loses at most one interval.
 */
import type { RequestContext } from '../proxy/plugin.ts'
import type { DocumentCollection, Store } from '../store/types.ts'
import { backgroundFailed, backgroundSucceeded, type BackgroundLog } from '../proxy/resilience.ts'

const HOUR_MS = 3_600_000
const FLUSH_MS = 2000
const KEEP_HOURS = 48
/**
 * The tally of refusals no project owns (a key no project has): `traffic:*` ('*' is outside the
 * project id alphabet), its `keys` by `route:<name> <answer>` ({@link unattributedLabel}). The
 * presented key is never stored.
 */
export const UNATTRIBUTED = '*'

/** A `keys` label of the {@link UNATTRIBUTED} tally read back: its route and answer (`401 unknown_key`; '' in a tally written before answers were kept). */
export function unattributedLabel(label: string): { route: string; answer: string } {
  const match = /^route:(\S*)(?: (.+))?$/.exec(label)
  return match ? { route: match[1]!, answer: match[2] ?? '' } : { route: label, answer: '' }
}

/** The answers a client was refused with (no credential, no credit, no permission, too many). */
export const REFUSAL_STATUSES: ReadonlySet<number> = new Set([401, 402, 403, 429])

export interface KeyTally {
  requests: number
  refusals: number
  /** Epoch ms of the last answer to a request with this key. */
  lastUsed: number
}

export interface TrafficTally {
  /** Hour (ISO, UTC) → answer (`200`, `403 wrong_plan`, `429 rate_limited`) → count. */
  hours: Record<string, Record<string, number>>
  /** Key label → its tally. */
  keys: Record<string, KeyTally>
}

const empty = (): TrafficTally => ({ hours: {}, keys: {} })

/** `403 wrong_plan`: the status, and for a 4xx the reason auth gave or the error's stable code. */
export function answerOf(ctx: Pick<RequestContext, 'refused' | 'error'>, status: number): string {
  if (status < 400 || status >= 500) return String(status)
  const code = ctx.refused?.reason ?? ctx.error?.code
  return code ? `${status} ${code}` : String(status)
}

export function isRefusal(answer: string): boolean {
  return REFUSAL_STATUSES.has(Number(answer.split(' ')[0]))
}

/** Adds `delta` into `into` (counts summed, last use the latest). */
export function mergeTally(into: TrafficTally, delta: TrafficTally): TrafficTally {
  for (const [hour, answers] of Object.entries(delta.hours)) {
    const target = (into.hours[hour] ??= {})
    for (const [answer, n] of Object.entries(answers)) target[answer] = (target[answer] ?? 0) + n
  }
  for (const [label, key] of Object.entries(delta.keys)) {
    const target = (into.keys[label] ??= { requests: 0, refusals: 0, lastUsed: 0 })
    target.requests += key.requests
    target.refusals += key.refusals
    target.lastUsed = Math.max(target.lastUsed, key.lastUsed)
  }
  return into
}

function prune(tally: TrafficTally, now: number): TrafficTally {
  const oldest = new Date(Math.floor(now / HOUR_MS) * HOUR_MS - (KEEP_HOURS - 1) * HOUR_MS).toISOString()
  for (const hour of Object.keys(tally.hours)) if (hour < oldest) delete tally.hours[hour]
  return tally
}

/** One key's counts since the last seal (reused: a request only bumps numbers). */
interface KeyCounts {
  requests: number
  refusals: number
  lastUsed: number
}

/**
 * What one project was answered since the last seal, in the current hour: plain counters a request
 * bumps without building a string or an object (the hot path). {@link TrafficLog} turns them into a
 * {@link TrafficTally} when it flushes, reads, or the hour turns.
 */
class ProjectCounts {
  /** Status → answers, for every answer whose label is its status alone (below 400, 5xx). */
  readonly statuses = new Map<number, number>()
  /** `403 wrong_plan` → answers: 4xx labels carry a reason and are built per answer (refusals are rare). */
  readonly labelled = new Map<string, number>()
  readonly keys = new Map<string, KeyCounts>()
  /** Answers counted since the last seal (0: nothing to seal). */
  count = 0
}

export class TrafficLog {
  readonly #documents: DocumentCollection
  readonly #clock: () => number
  /** Project id → what this instance counted since the last flush, sealed into tallies. */
  #pending = new Map<string, TrafficTally>()
  /** Project id → counts of the current hour not yet sealed into {@link #pending}. */
  readonly #counts = new Map<string, ProjectCounts>()
  #timer: NodeJS.Timeout | undefined
  #flushing: Promise<void> | undefined
  /** The hour the unsealed counts belong to: [start, end) in epoch ms, and its ISO string. */
  #hourStart = -1
  #hourEnd = -1
  #hourIso = ''
  readonly #log: BackgroundLog | undefined

  /** @param log where a flush the store failed is logged, once per outage (core/proxy/resilience.ts). */
  constructor(store: Pick<Store, 'documents'>, clock: () => number = Date.now, log?: BackgroundLog) {
    this.#documents = store.documents('dashboard')
    this.#clock = clock
    this.#log = log
  }

  /** One finished answer (called by the pipeline for every request): counters bumped, nothing allocated once warm. */
  record(ctx: Pick<RequestContext, 'project' | 'apiKey' | 'refused' | 'error'> & { routeName?: string }, status: number): void {
    // A key no project has is counted under no project (UNATTRIBUTED), per route, never by the key.
    const projectId = ctx.project?.id ?? ctx.refused?.project?.id ?? (ctx.refused ? UNATTRIBUTED : undefined)
    if (projectId === undefined) return
    const now = this.#clock()
    if (now >= this.#hourEnd || now < this.#hourStart) this.#startHour(now)
    let counts = this.#counts.get(projectId)
    if (counts === undefined) this.#counts.set(projectId, (counts = new ProjectCounts()))
    counts.count++
    if (status < 400 || status >= 500) counts.statuses.set(status, (counts.statuses.get(status) ?? 0) + 1)
    else {
      const answer = answerOf(ctx, status)
      counts.labelled.set(answer, (counts.labelled.get(answer) ?? 0) + 1)
    }
    // Under no project the "key" is the route and the answer (`route:rpc 401 unknown_key`): the
    // operator page lists them as route, code, count. Built only for such refusals, never per answer.
    const label = (ctx.apiKey ?? ctx.refused?.key)?.label ?? (projectId === UNATTRIBUTED ? `route:${ctx.routeName ?? '-'} ${answerOf(ctx, status)}` : undefined)
    if (label !== undefined) {
      let key = counts.keys.get(label)
      if (key === undefined) counts.keys.set(label, (key = { requests: 0, refusals: 0, lastUsed: 0 }))
      key.requests++
      if (REFUSAL_STATUSES.has(status)) key.refusals++
      key.lastUsed = now
    }
    this.#timer ??= setTimeout(() => void this.flush(), FLUSH_MS).unref()
  }

  /** The hour changed (or the clock went back): what was counted belongs to the hour before. */
  #startHour(now: number): void {
    this.#seal()
    this.#hourStart = Math.floor(now / HOUR_MS) * HOUR_MS
    this.#hourEnd = this.#hourStart + HOUR_MS
    this.#hourIso = new Date(this.#hourStart).toISOString()
  }

  /** Moves the counters into {@link #pending} as tallies of their hour, and zeroes them (the objects stay for the next answers). */
  #seal(): void {
    for (const [projectId, counts] of this.#counts) {
      if (counts.count === 0) continue
      let tally = this.#pending.get(projectId)
      if (!tally) this.#pending.set(projectId, (tally = empty()))
      const answers = (tally.hours[this.#hourIso] ??= {})
      for (const [status, n] of counts.statuses) {
        if (n === 0) continue
        answers[String(status)] = (answers[String(status)] ?? 0) + n
        counts.statuses.set(status, 0)
      }
      for (const [answer, n] of counts.labelled) answers[answer] = (answers[answer] ?? 0) + n
      counts.labelled.clear()
      for (const [label, key] of counts.keys) {
        if (key.requests === 0) continue
        const target = (tally.keys[label] ??= { requests: 0, refusals: 0, lastUsed: 0 })
        target.requests += key.requests
        target.refusals += key.refusals
        target.lastUsed = Math.max(target.lastUsed, key.lastUsed)
        key.requests = key.refusals = 0
      }
      counts.count = 0
    }
  }

  /** Merges what was counted into the store (compare-and-set, retried when another instance wrote first). */
  async flush(): Promise<void> {
    this.#timer = undefined
    if (this.#flushing) await this.#flushing
    this.#seal()
    const batch = this.#pending
    if (batch.size === 0) return
    this.#pending = new Map()
    this.#flushing = (async () => {
      let failure: unknown
      for (const [projectId, delta] of batch) {
        try {
          await this.#merge(projectId, delta)
        } catch (error) {
          // The store is away: count it again with the next batch rather than lose it.
          this.#pending.set(projectId, mergeTally(this.#pending.get(projectId) ?? empty(), delta))
          failure ??= error
        }
      }
      // Counted in tollgate_background_errors_total{task="traffic-flush"}, logged once per outage.
      if (failure === undefined) backgroundSucceeded('traffic-flush', this.#log)
      else backgroundFailed('traffic-flush', failure, this.#log)
    })()
    try {
      await this.#flushing
    } finally {
      this.#flushing = undefined
    }
  }

  async #merge(projectId: string, delta: TrafficTally): Promise<void> {
    const id = `traffic:${projectId}`
    for (let attempt = 0; attempt < 8; attempt++) {
      const current = await this.#documents.getWithRevision<TrafficTally>(id)
      if (!current) {
        const { created } = await this.#documents.insertIfAbsent(id, 'traffic', prune(mergeTally(empty(), delta), this.#clock()))
        if (created) return
        continue
      }
      const next = prune(mergeTally(structuredClone(current.stored.doc), delta), this.#clock())
      if ((await this.#documents.compareAndSet(id, current.revision, next)) !== undefined) return
    }
    throw new Error(`traffic:${projectId} kept changing under the merge`)
  }

  /** A project's tally: the store's, plus what this instance has not flushed yet. */
  async read(projectId: string): Promise<TrafficTally> {
    const stored = await this.#documents.get<TrafficTally>(`traffic:${projectId}`)
    const tally = stored ? structuredClone(stored.doc) : empty()
    this.#seal()
    const pending = this.#pending.get(projectId)
    return pending ? mergeTally(tally, pending) : tally
  }

  async close(): Promise<void> {
    if (this.#timer) clearTimeout(this.#timer)
    await this.flush()
  }
}
