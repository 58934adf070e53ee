/**
 * The one small interface every workstation driver implements (process.ts for one host and tests;
 * a production driver talks to a platform's API). Every method is idempotent: the service may call
 * it again after a crash or on another instance, and a second call must not fail because the first
 * already did the work.
 */
import type { DriverHandle } from './states.ts'

export interface WorkstationDriver {
  /** Stable name stored in handles (`process`, `docker`). */
  readonly name: string
  /** Creates the project's workspace (directory, volume); nothing runs yet. */
  provision(projectId: string): Promise<void>
  /** Starts the workstation server and resolves once it answers its health check. */
  start(projectId: string): Promise<DriverHandle>
  /** Stops what `handle` names (graceful, then forced); resolves when it is gone. */
  stop(handle: DriverHandle): Promise<void>
  /** Removes the workspace; stops first whatever still runs for the project. */
  delete(projectId: string, handle?: DriverHandle): Promise<void>
  /** Whether what `handle` names is still running and healthy (after a gateway restart). */
  alive(handle: DriverHandle): Promise<boolean>
  /** Stops every process of this driver that no record claims (leaks from a crash); returns how many. */
  reap?(claimed: DriverHandle[]): Promise<number>
}

/** A driver operation that failed: the workstation becomes `failed` with this message. */
export class DriverError extends Error {
  readonly code = 'driver_failed'
}
