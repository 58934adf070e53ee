/**
 * The workstation lifecycle as data: states, what each operator action does from each state, and
 * the record kept per project. Pure functions only, so the rules are read (and tested) in one place;
 * service.ts applies them to stored records with compare-and-set.
 *
 * Modelled on Coder's statuses and Ona's desired-vs-observed phases (anchors-2 §6): `desired` is
 * what the operator last asked for, `state` what the driver last reported. Unlike Ona, `failed` is
 * a state of its own, carrying the reason, as in Coder and Che.
 */

/** Observed states. `absent` is never stored: it is the answer when no record exists. */
export type WorkstationState = 'absent' | 'provisioning' | 'starting' | 'ready' | 'stopping' | 'stopped' | 'deleting' | 'failed'

/** What the operator last asked for. */
export type DesiredState = 'running' | 'stopped' | 'deleted'

export type WorkstationAction = 'provision' | 'start' | 'stop' | 'delete'

/** One entry of the transition history. */
export interface Transition {
  at: number
  from: WorkstationState
  to: WorkstationState
  /** Who or what moved it: `api:start`, `driver`, `timeout`, `idle`, `credits`, `restart`. */
  by: string
  reason?: string
}

/** How the driver reaches a running workstation; opaque to everything but its driver. */
export interface DriverHandle {
  driver: string
  /** The workstation server's unix socket the gateway proxies to, `unix:/run/.../server.sock` (never a TCP port). */
  target?: string
  /** Driver-specific fields (a PID, a container id...). */
  [field: string]: unknown
}

/** The stored record, one per project (collection `workstations`). */
export interface WorkstationRecord {
  projectId: string
  state: Exclude<WorkstationState, 'absent'>
  desired: DesiredState
  /** Why it is `failed` or why it was last stopped by the gateway (idle, credits). */
  reason?: string
  /** Epoch ms the current state began: timeouts count from here. */
  since: number
  handle?: DriverHandle
  /** Last proxied request or WebSocket frame, epoch ms (written at most every few seconds). */
  lastActivityAt: number
  /** Running time up to here is paid for (epoch ms); the next minute is charged when reached. */
  paidUntil?: number
  /** Credits charged since it was provisioned. */
  creditsCharged: number
  history: Transition[]
}

/** The newest transitions kept per workstation. */
export const HISTORY_LIMIT = 50

/** A refused action: 409 with a stable code, or 202 with nothing to do. */
export type Decision =
  | { kind: 'move'; to: WorkstationState; desired: DesiredState }
  | { kind: 'already'; }
  | { kind: 'conflict'; code: string; message: string }

const conflict = (code: string, message: string): Decision => ({ kind: 'conflict', code, message })

/**
 * What `action` does from `state`. `already` answers 202 with the current state (a second start
 * while starting); `conflict` answers 409 and changes nothing.
 *
 * @example
 * ```ts
 * decide('stopped', 'start') // { kind: 'move', to: 'starting', desired: 'running' }
 * decide('starting', 'start') // { kind: 'already' }
 * decide('absent', 'stop')   // { kind: 'conflict', code: 'workstation_not_provisioned', ... }
 * ```
 */
export function decide(state: WorkstationState, action: WorkstationAction): Decision {
  switch (action) {
    case 'provision':
      if (state === 'absent' || state === 'failed') return { kind: 'move', to: 'provisioning', desired: 'running' }
      if (state === 'provisioning' || state === 'starting' || state === 'ready') return { kind: 'already' }
      if (state === 'stopped') return conflict('workstation_exists', 'the workstation is already provisioned and stopped: start it instead')
      return conflict(`workstation_${state}`, `the workstation is ${state}; provision it again once that is over`)
    case 'start':
      if (state === 'stopped' || state === 'failed') return { kind: 'move', to: 'starting', desired: 'running' }
      if (state === 'provisioning' || state === 'starting' || state === 'ready') return { kind: 'already' }
      if (state === 'absent') return conflict('workstation_not_provisioned', 'the project has no workstation: provision it first')
      return conflict(`workstation_${state}`, `the workstation is ${state} and cannot be started until that is over`)
    case 'stop':
      if (state === 'provisioning' || state === 'starting' || state === 'ready' || state === 'failed') return { kind: 'move', to: 'stopping', desired: 'stopped' }
      if (state === 'stopping' || state === 'stopped') return { kind: 'already' }
      if (state === 'absent') return conflict('workstation_not_provisioned', 'the project has no workstation to stop')
      return conflict('workstation_deleting', 'the workstation is being deleted')
    case 'delete':
      if (state === 'absent') return conflict('workstation_not_provisioned', 'the project has no workstation to delete')
      if (state === 'deleting') return { kind: 'already' }
      return { kind: 'move', to: 'deleting', desired: 'deleted' }
  }
}

/** States in which the driver is at work; each has a timeout after which the workstation fails. */
export const TRANSITIONAL: ReadonlySet<WorkstationState> = new Set(['provisioning', 'starting', 'stopping', 'deleting'])

/** Returns `record` moved to `to`, with the history entry appended (and trimmed). */
export function moved(record: WorkstationRecord, to: Exclude<WorkstationState, 'absent'>, at: number, by: string, reason?: string): WorkstationRecord {
  const entry: Transition = { at, from: record.state, to, by, ...(reason === undefined ? {} : { reason }) }
  const history = [...record.history, entry].slice(-HISTORY_LIMIT)
  return { ...record, state: to, since: at, reason: reason ?? (to === 'ready' || to === 'provisioning' || to === 'starting' ? undefined : record.reason), history }
}
