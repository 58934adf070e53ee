/**
 * The `process` driver: one host, no container engine. Each project gets a working directory under
 * `root` and, while running, its own terminal server (terminal-server.ts) on a loopback port.
 *
 * Processes are started detached (their own process group), so a gateway restart leaves them
 * running; the handle records PID, port and directory, and `alive` recognises the process again by
 * its command line (a recycled PID belonging to something else is not taken for it). `stop` sends
 * SIGTERM to the group, then SIGKILL after `stopGraceMs`; `reap` kills terminal servers of `root`
 * that no record claims, so a crash between spawn and the record's write cannot leak one.
 */
import { spawn } from 'node:child_process'
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { DriverError, type WorkstationDriver } from './driver.ts'
import type { DriverHandle } from './states.ts'

const SERVER_SCRIPT = fileURLToPath(new URL('./terminal-server.ts', import.meta.url))
/** tsx's loader by absolute URL: the server runs with its working directory as cwd, outside the package. */
const TSX_LOADER = import.meta.resolve('tsx')

export interface ProcessDriverOptions {
  /** Parent of the per-project working directories. */
  root: string
  /** How long a start may take until the health check answers (default 60 s). */
  startTimeoutMs?: number
  /** SIGTERM → SIGKILL delay (default 5 s). */
  stopGraceMs?: number
  /** Command run as the workstation server; default: node + tsx + terminal-server.ts. Tests inject a failing one. */
  command?: (dir: string, portFile: string, projectId: string) => { file: string; args: string[] }
}

interface ProcessHandle extends DriverHandle {
  driver: 'process'
  pid: number
  port: number
  dir: string
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Project ids become directory names: only what cannot climb out of `root`. */
function safeName(projectId: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/.test(projectId) || projectId.includes('..')) throw new DriverError(`project id ${JSON.stringify(projectId)} cannot name a directory`)
  return projectId
}

/** Whether `pid` runs (a zombie does not) and its command line mentions `marker`. */
function runningWith(pid: number, marker: string): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3)
    if (state === 'Z' || state === 'X') return false
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(marker)
  } catch {
    return false
  }
}

export class ProcessDriver implements WorkstationDriver {
  readonly name = 'process'
  private readonly root: string
  private readonly startTimeoutMs: number
  private readonly stopGraceMs: number
  private readonly command: NonNullable<ProcessDriverOptions['command']>

  constructor(options: ProcessDriverOptions) {
    this.root = resolve(options.root)
    this.startTimeoutMs = options.startTimeoutMs ?? 60_000
    this.stopGraceMs = options.stopGraceMs ?? 5_000
    this.command = options.command ?? ((dir, portFile, projectId) => ({
      file: process.execPath,
      args: ['--import', TSX_LOADER, SERVER_SCRIPT, '--dir', dir, '--port-file', portFile, '--project', projectId],
    }))
  }

  /** The project's working directory. */
  dirOf(projectId: string): string {
    return join(this.root, safeName(projectId), 'home')
  }

  async provision(projectId: string): Promise<void> {
    const dir = this.dirOf(projectId)
    mkdirSync(dir, { recursive: true })
    const readme = join(dir, 'README.txt')
    if (!existsSync(readme)) writeFileSync(readme, `Workstation of project ${projectId}. Files here survive stop and start; delete removes them.\n`)
  }

  async start(projectId: string): Promise<DriverHandle> {
    const dir = this.dirOf(projectId)
    if (!existsSync(dir)) throw new DriverError(`the working directory of ${projectId} is missing: provision it again`)
    const runDir = join(this.root, safeName(projectId))
    const portFile = join(runDir, 'port')
    rmSync(portFile, { force: true })
    const log = openSync(join(runDir, 'server.log'), 'a')
    const { file, args } = this.command(dir, portFile, projectId)
    let child
    try {
      child = spawn(file, args, { cwd: dir, detached: true, stdio: ['ignore', log, log], env: { ...process.env, NODE_OPTIONS: '' } })
    } finally {
      closeSync(log)
    }
    const pid = child.pid
    if (pid === undefined) throw new DriverError(`the workstation server could not be spawned (${file})`)
    let exited: string | undefined
    child.on('exit', (code, signal) => (exited = signal ? `signal ${signal}` : `exit code ${code}`))
    child.on('error', (error) => (exited = error.message))
    child.unref()
    const handle: ProcessHandle = { driver: 'process', pid, port: 0, dir }
    const deadline = Date.now() + this.startTimeoutMs
    while (Date.now() < deadline) {
      if (exited !== undefined) throw new DriverError(`the workstation server exited during start (${exited}); see ${join(runDir, 'server.log')}`)
      const port = existsSync(portFile) ? Number(readFileSync(portFile, 'utf8')) : 0
      if (port > 0) {
        handle.port = port
        handle.target = `http://127.0.0.1:${port}`
        if (await this.healthy(handle)) return handle
      }
      await sleep(100)
    }
    await this.stop(handle)
    throw new DriverError(`the workstation server did not answer its health check within ${this.startTimeoutMs} ms`)
  }

  async stop(handle: DriverHandle): Promise<void> {
    const { pid, dir } = handle as ProcessHandle
    if (!Number.isInteger(pid) || !runningWith(pid, dir)) return
    const signal = (name: NodeJS.Signals) => {
      try {
        process.kill(-pid, name) // the whole group: the server and the shells it started
      } catch {
        try { process.kill(pid, name) } catch { /* gone */ }
      }
    }
    signal('SIGTERM')
    const deadline = Date.now() + this.stopGraceMs
    while (Date.now() < deadline) {
      if (!runningWith(pid, dir)) return
      await sleep(50)
    }
    signal('SIGKILL')
    for (let i = 0; i < 100 && runningWith(pid, dir); i++) await sleep(20)
    if (runningWith(pid, dir)) throw new DriverError(`process ${pid} survived SIGKILL`)
  }

  async delete(projectId: string, handle?: DriverHandle): Promise<void> {
    if (handle) await this.stop(handle)
    rmSync(join(this.root, safeName(projectId)), { recursive: true, force: true })
  }

  async alive(handle: DriverHandle): Promise<boolean> {
    const { pid, dir } = handle as ProcessHandle
    return Number.isInteger(pid) && runningWith(pid, dir) && (await this.healthy(handle))
  }

  async reap(claimed: DriverHandle[]): Promise<number> {
    const claimedPids = new Set(claimed.map((handle) => (handle as ProcessHandle).pid))
    let killed = 0
    for (const entry of readdirSync('/proc')) {
      const pid = Number(entry)
      if (!Number.isInteger(pid) || pid === process.pid || claimedPids.has(pid)) continue
      let args: string[]
      try {
        args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')
      } catch {
        continue
      }
      const dir = args[args.indexOf('--dir') + 1]
      if (!args.includes(SERVER_SCRIPT) || args.indexOf('--dir') < 0 || !dir?.startsWith(this.root + '/')) continue
      await this.stop({ driver: 'process', pid, port: 0, dir })
      killed++
    }
    return killed
  }

  private async healthy(handle: DriverHandle): Promise<boolean> {
    try {
      const answer = await fetch(`${handle.target}/healthz`, { signal: AbortSignal.timeout(2000) })
      await answer.arrayBuffer()
      return answer.status === 200
    } catch {
      return false
    }
  }
}
