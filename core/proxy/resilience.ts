/**
 * Work the gateway does outside any request (timers, LISTEN, retries) must never end the process:
 * a store that is down is an outage to ride out, not a crash. This module is where such work
 * reports its failures.
 *
 * - {@link backgroundFailed} counts a failure of a named task and logs it at most once per outage:
 *   the first failure logs, the next ones are silent until the task succeeds again
 *   ({@link backgroundSucceeded} logs the recovery) or has been quiet for {@link QUIET_MS} (for
 *   event-like failures, such as an idle connection dropped, that have no success to report).
 * - {@link runInBackground} runs one pass of a task with both, and never rejects.
 * - {@link countStoreRetry} counts a batch the shared engine sent again after a serialization
 *   failure or a deadlock (pg.ts).
 *
 * Counts are per process (core/proxy/metrics.ts reads them when scraped): a worker's are its own, and
 * several gateways in one test process share them.
 */

/** The part of a pino logger the reports use. */
export interface BackgroundLog {
  warn(object: object, message: string): void
  info(object: object, message: string): void
}

/** A failing task that stayed quiet this long starts a new outage (its next failure logs again). */
export const QUIET_MS = 30_000

interface TaskState {
  errors: number
  /** Set while the task is in an outage: when its last failure happened. */
  failingSince?: number
  lastFailure?: number
}

const tasks = new Map<string, TaskState>()
const retries = new Map<string, number>()

function state(task: string): TaskState {
  let found = tasks.get(task)
  if (found === undefined) {
    found = { errors: 0 }
    tasks.set(task, found)
  }
  return found
}

/** Counts a failure of `task`; logs it when it starts an outage. */
export function backgroundFailed(task: string, error: unknown, log?: BackgroundLog): void {
  const now = Date.now()
  const task_ = state(task)
  task_.errors++
  const newOutage = task_.failingSince === undefined || now - (task_.lastFailure ?? 0) > QUIET_MS
  task_.lastFailure = now
  if (!newOutage) return
  task_.failingSince = now
  const report = { err: error, task }
  if (log !== undefined) log.warn(report, `background task ${task} failed; it keeps running (further failures are counted in tollgate_background_errors_total, not logged, until it recovers)`)
  else process.emitWarning(`background task ${task} failed: ${(error as Error)?.message ?? String(error)}`, 'TollgateBackgroundWarning')
}

/** Ends the outage of `task`, if any, and logs the recovery. */
export function backgroundSucceeded(task: string, log?: BackgroundLog): void {
  const found = tasks.get(task)
  if (found?.failingSince === undefined) return
  const failedForMs = Date.now() - found.failingSince
  found.failingSince = undefined
  log?.info({ task, failedForMs }, `background task ${task} recovered`)
}

/** Runs one pass of `task`: a failure is reported (never thrown), a success ends its outage. */
export async function runInBackground(task: string, pass: () => unknown, log?: BackgroundLog): Promise<void> {
  try {
    await pass()
    backgroundSucceeded(task, log)
  } catch (error) {
    backgroundFailed(task, error, log)
  }
}

/** Failures per task since the process started. */
export function backgroundErrorCounts(): Record<string, number> {
  return Object.fromEntries([...tasks].map(([task, found]) => [task, found.errors]))
}

/** Counts one batch sent again after `code` (40001 or 40P01). */
export function countStoreRetry(code: string): void {
  retries.set(code, (retries.get(code) ?? 0) + 1)
}

/** Batches sent again, per SQLSTATE, since the process started. */
export function storeRetryCounts(): Record<string, number> {
  return Object.fromEntries(retries)
}
