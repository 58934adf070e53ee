/**
 * The `process` driver: one host, no container engine, each workstation in a bubblewrap sandbox
 * (sandbox.ts) as its own uid, with its home on a disk image and caps from cgroups or rlimits
 * (workspace.ts, cgroups.ts). Its server (terminal-server.ts) listens on a unix socket in the
 * workstation's run directory, reachable by the gateway and by no other workstation; there is no
 * TCP port.
 *
 * Where the sandbox cannot be built (not root, bubblewrap missing, no loop device) provisioning and
 * start fail with the reason: there is no fallback to an unsandboxed shell.
 *
 * Processes are started detached, so a gateway restart leaves them running; the handle records the
 * PID of the sandbox, the uid and the socket. `alive` recognises the sandbox again by its command
 * line (a recycled PID belonging to something else is not taken for it). `stop` sends SIGTERM to
 * every process of the workstation's uid, then SIGKILL after `stopGraceMs`, and unmounts the home;
 * `reap` does the same for uids of `root` that no record claims.
 */
import { spawn } from 'node:child_process'
import { closeSync, existsSync, openSync, readFileSync, rmSync } from 'node:fs'
import { request } from 'node:http'
import { createHash } from 'node:crypto'
import { DriverError, type WorkstationDriver } from './driver.ts'
import { createCgroup, removeCgroup } from './cgroups.ts'
import { missingTool, sandboxCommand } from './sandbox.ts'
import { ideMissing } from './ide.ts'
import type { DriverHandle } from './states.ts'
import { DEFAULT_LIMITS, processesOf, signalUid, Workspaces, type WorkstationLimits } from './workspace.ts'

export interface ProcessDriverOptions {
  /** Parent of the per-project directories. */
  root: string
  /** How long a start may take until the health check answers (default 60 s). */
  startTimeoutMs?: number
  /** SIGTERM → SIGKILL delay (default 5 s). */
  stopGraceMs?: number
  limits?: Partial<WorkstationLimits>
  /** Variables the workstation's environment holds besides HOME, USER, PATH, SHELL, TERM, LANG. */
  env?: Record<string, string>
  uidBase?: number
  uidCount?: number
  /** Where running workstations' homes are mounted and their sockets live (default /run/tollgate-workstations). */
  runDir?: string
  /** Command run inside the sandbox as the workstation server (default: terminal-server.ts). Tests inject a failing one. */
  command?: (projectId: string) => { file: string; args: string[] }
  /** The node binary the terminal server runs with (default: the gateway's own). */
  node?: string
  /** code-server's install directory (install-code-server.sh): run the IDE next to the terminal. */
  ide?: string
  /** Called when a cap falls back to rlimits (no writable cgroups). */
  warn?: (message: string) => void
}

interface ProcessHandle extends DriverHandle {
  driver: 'process'
  /** The sandbox (bwrap) outside its namespaces. */
  pid: number
  uid: number
  /** The project's data directory (under root). */
  dir: string
  /** Its directory under runDir: the sandbox's command line names it, which recognises the PID again. */
  stage: string
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Whether `pid` runs (a zombie does not) and one argument of its command line starts with `marker`. */
function runningWith(pid: number, marker: string): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3)
    if (state === 'Z' || state === 'X') return false
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').some((arg) => arg === marker || arg.startsWith(`${marker}/`))
  } catch {
    return false
  }
}

/** GET /healthz over the unix socket `socketPath`. */
export function healthyAt(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ socketPath, path: '/healthz', timeout: 2000 }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode === 200))
    })
    req.on('error', () => resolve(false))
    req.on('timeout', () => { req.destroy(); resolve(false) })
    req.end()
  })
}

export class ProcessDriver implements WorkstationDriver {
  readonly name = 'process'
  readonly workspaces: Workspaces
  private readonly startTimeoutMs: number
  private readonly stopGraceMs: number
  private readonly limits: WorkstationLimits
  private readonly rootKey: string

  constructor(private readonly options: ProcessDriverOptions) {
    this.workspaces = new Workspaces({ root: options.root, runDir: options.runDir, uidBase: options.uidBase, uidCount: options.uidCount })
    this.startTimeoutMs = options.startTimeoutMs ?? 60_000
    this.stopGraceMs = options.stopGraceMs ?? 5_000
    this.limits = { ...DEFAULT_LIMITS, ...options.limits }
    this.rootKey = createHash('sha256').update(this.workspaces.root).digest('hex').slice(0, 12)
  }

  /** The project's home on the host (its disk image's mount point). */
  dirOf(projectId: string): string {
    return this.workspaces.paths(projectId).home
  }

  private cgroupKey(projectId: string): string {
    return `${this.rootKey}-${projectId}`
  }

  private preflight(): void {
    Workspaces.requireRoot('the process driver')
    const missing = missingTool()
    if (missing) throw new DriverError(`the workstation sandbox needs ${missing} (Debian packages bubblewrap and util-linux); refusing to start an unsandboxed workstation`)
    const ide = this.options.ide === undefined ? undefined : ideMissing(this.options.ide)
    if (ide) throw new DriverError(`workstations.ide: ${ide}`)
  }

  async provision(projectId: string): Promise<void> {
    this.preflight()
    await this.workspaces.provision(projectId, this.limits.diskMb)
  }

  async start(projectId: string): Promise<DriverHandle> {
    this.preflight()
    const paths = this.workspaces.paths(projectId)
    await this.workspaces.mount(projectId)
    const uid = this.workspaces.uidOf(projectId)!
    rmSync(paths.socket, { force: true })
    const cgroup = createCgroup(this.cgroupKey(projectId), this.limits)
    if (!cgroup) this.options.warn?.('cgroups are not writable here: memory is capped per process (RLIMIT_AS), processes per uid (RLIMIT_NPROC), CPU not at all')
    const { file, args } = sandboxCommand({ projectId, uid, paths, limits: this.limits, env: this.options.env ?? {}, cgroupProcs: cgroup?.procs ?? [], command: this.options.command?.(projectId), ide: this.options.ide, node: this.options.node })
    const log = openSync(paths.log, 'a', 0o600)
    let child
    try {
      child = spawn(file, args, { cwd: '/', detached: true, stdio: ['ignore', log, log], env: {} })
    } finally {
      closeSync(log)
    }
    const pid = child.pid
    if (pid === undefined) throw new DriverError('the workstation sandbox could not be spawned (/bin/sh)')
    let exited: string | undefined
    child.on('exit', (code, signal) => (exited = signal ? `signal ${signal}` : `exit code ${code}`))
    child.on('error', (error) => (exited = error.message))
    child.unref()
    const handle: ProcessHandle = { driver: 'process', pid, uid, dir: paths.base, stage: paths.stage, target: `unix:${paths.socket}` }
    const deadline = Date.now() + this.startTimeoutMs
    while (Date.now() < deadline) {
      if (exited !== undefined) {
        await this.stop(handle)
        throw new DriverError(`the workstation server exited during start (${exited}): ${lastLines(paths.log)}`)
      }
      if (existsSync(paths.socket) && (await healthyAt(paths.socket))) return handle
      await sleep(100)
    }
    await this.stop(handle)
    throw new DriverError(`the workstation server did not answer its health check within ${this.startTimeoutMs} ms`)
  }

  async stop(handle: DriverHandle): Promise<void> {
    const { uid, dir } = handle as ProcessHandle
    if (!Number.isInteger(uid) || typeof dir !== 'string' || !dir.startsWith(`${this.workspaces.root}/`)) return
    const projectId = dir.slice(this.workspaces.root.length + 1)
    if (signalUid(uid, 'SIGTERM')) {
      const deadline = Date.now() + this.stopGraceMs
      while (Date.now() < deadline && processesOf(uid).length) await sleep(50)
      // SIGKILL until none is left: a fork bomb may still be spawning while the first pass runs.
      for (let i = 0; i < 200 && signalUid(uid, 'SIGKILL'); i++) await sleep(20)
      if (processesOf(uid).length) throw new DriverError(`processes of uid ${uid} survived SIGKILL`)
    }
    removeCgroup(this.cgroupKey(projectId))
    await this.workspaces.unmount(projectId)
  }

  async delete(projectId: string, handle?: DriverHandle): Promise<void> {
    const uid = this.workspaces.uidOf(projectId)
    const paths = this.workspaces.paths(projectId)
    if (handle) await this.stop(handle)
    else if (uid !== undefined) await this.stop({ driver: 'process', pid: 0, uid, dir: paths.base, stage: paths.stage })
    await this.workspaces.remove(projectId)
  }

  async alive(handle: DriverHandle): Promise<boolean> {
    const { pid, stage, target } = handle as ProcessHandle
    if (!Number.isInteger(pid) || typeof stage !== 'string' || !target?.startsWith('unix:')) return false
    return runningWith(pid, stage) && (await healthyAt(target.slice('unix:'.length)))
  }

  async reap(claimed: DriverHandle[]): Promise<number> {
    const claimedUids = new Set(claimed.map((handle) => (handle as ProcessHandle).uid))
    let stopped = 0
    for (const [uid, projectId] of this.workspaces.claimedUids()) {
      if (claimedUids.has(uid) || !processesOf(uid).length) continue
      await this.stop({ driver: 'process', pid: 0, uid, dir: this.workspaces.paths(projectId).base, stage: this.workspaces.paths(projectId).stage })
      stopped++
    }
    return stopped
  }
}

function lastLines(file: string): string {
  try {
    return readFileSync(file, 'utf8').trim().split('\n').slice(-3).join(' / ').slice(0, 500) || 'no output'
  } catch {
    return 'no output'
  }
}
