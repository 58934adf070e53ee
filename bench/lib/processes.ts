/**
 * Child processes of the benchmark: each pinned to a CPU core with `taskset`, tracked so that
 * every one is stopped by its PID at the end, on failure and on SIGINT/SIGTERM.
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process'
import { readFileSync, readdirSync } from 'node:fs'
import { createServer } from 'node:net'
import type { AddressInfo } from 'node:net'
import os from 'node:os'

export interface Managed {
  name: string
  pid: number
  child: ChildProcess
  /** stdout + stderr lines so far (bounded). */
  output: string[]
  exited: Promise<void>
}

const running = new Set<Managed>()
const MAX_LINES = 200
let niceness = 0

/**
 * Scheduling priority (-20..19) for every process started from now on, and for this one. A
 * negative value keeps other tenants of a shared machine from preempting the measured processes.
 */
export function setNiceness(value: number): void {
  niceness = value
  os.setPriority(value)
}

/** Pins the current process (all its threads) to one core, so in-process load generation stays there. */
export function pinSelf(core: number): void {
  execFileSync('taskset', ['-a', '-p', '-c', String(core), String(process.pid)], { stdio: 'ignore' })
}

/**
 * Starts `command args` pinned to `core` (at the current niceness); taskset and nice exec the
 * command, so the PID is the command's, and every thread it makes inherits core and priority.
 */
export function startPinned(name: string, core: number, command: string, args: string[], env?: NodeJS.ProcessEnv): Managed {
  const child = spawn('taskset', ['-c', String(core), 'nice', '-n', String(niceness), command, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  })
  if (child.pid === undefined) throw new Error(`${name}: could not start ${command}`)
  const output: string[] = []
  for (const stream of [child.stdout!, child.stderr!]) {
    let buffer = ''
    stream.on('data', (chunk: Buffer) => {
      buffer += chunk.toString()
      let nl
      while ((nl = buffer.indexOf('\n')) !== -1) {
        output.push(buffer.slice(0, nl))
        if (output.length > MAX_LINES) output.shift()
        buffer = buffer.slice(nl + 1)
      }
    })
  }
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const managed: Managed = { name, pid: child.pid, child, output, exited }
  running.add(managed)
  void exited.then(() => running.delete(managed))
  return managed
}

/** Waits for a stdout line matching `pattern`; fails if the process exits or the time runs out. */
export async function waitForLine(proc: Managed, pattern: RegExp, timeoutMs = 20_000): Promise<string> {
  const deadline = Date.now() + timeoutMs
  let seen = 0
  while (Date.now() < deadline) {
    for (; seen < proc.output.length; seen++) if (pattern.test(proc.output[seen])) return proc.output[seen]
    if (proc.child.exitCode !== null || proc.child.signalCode !== null) break
    await new Promise((r) => setTimeout(r, 25))
  }
  throw new Error(`${proc.name} (pid ${proc.pid}) never printed ${pattern}; last output:\n${proc.output.slice(-20).join('\n')}`)
}

/** Polls `url` until it answers `expectStatus`. */
export async function waitForHttp(url: string, proc: Managed, expectStatus = 200, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  let last = ''
  while (Date.now() < deadline) {
    if (proc.child.exitCode !== null || proc.child.signalCode !== null) break
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(2000) })
      await response.arrayBuffer()
      if (response.status === expectStatus) return
      last = `status ${response.status}`
    } catch (error) {
      last = (error as Error).message
    }
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`${proc.name} (pid ${proc.pid}) did not answer ${url} with ${expectStatus} (${last}); last output:\n${proc.output.slice(-20).join('\n')}`)
}

/** Sends SIGTERM to one process by PID, then SIGKILL after `graceMs`. */
export async function stopProcess(proc: Managed, graceMs = 5000): Promise<void> {
  if (proc.child.exitCode !== null || proc.child.signalCode !== null) return
  try {
    process.kill(proc.pid, 'SIGTERM')
  } catch {
    return
  }
  const timer = setTimeout(() => {
    try {
      process.kill(proc.pid, 'SIGKILL')
    } catch {
      /* already gone */
    }
  }, graceMs)
  await proc.exited
  clearTimeout(timer)
}

/** Stops every process this module started, each by its own PID. */
export async function stopAll(): Promise<void> {
  await Promise.allSettled([...running].map((proc) => stopProcess(proc)))
}

/** Synchronous last resort (process 'exit'): SIGKILL each tracked PID. */
export function killAllSync(): void {
  for (const proc of running) {
    try {
      process.kill(proc.pid, 'SIGKILL')
    } catch {
      /* already gone */
    }
  }
}

const CLOCK_TICKS = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100

function cpuTicksOf(pid: number): { ticks: number; systemTicks: number; ppid: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return { ppid: Number(fields[1]), ticks: Number(fields[11]) + Number(fields[12]), systemTicks: Number(fields[12]) }
  } catch {
    return undefined
  }
}

/**
 * CPU time (user + system, µs) of a process and its live descendants (nginx's worker is a child
 * of its master), from /proc/<pid>/stat.
 */
export function cpuMicros(rootPid: number): number {
  return cpuSplitMicros(rootPid).total
}

/** {@link cpuMicros}, and the part of it spent in the kernel (system time: syscalls, the network stack). */
export function cpuSplitMicros(rootPid: number): { total: number; system: number } {
  const children = new Map<number, number[]>()
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry)
    if (!Number.isInteger(pid)) continue
    const info = cpuTicksOf(pid)
    if (!info) continue
    const list = children.get(info.ppid) ?? []
    list.push(pid)
    children.set(info.ppid, list)
  }
  let ticks = 0
  let systemTicks = 0
  const stack = [rootPid]
  while (stack.length) {
    const pid = stack.pop()!
    const info = cpuTicksOf(pid)
    ticks += info?.ticks ?? 0
    systemTicks += info?.systemTicks ?? 0
    stack.push(...(children.get(pid) ?? []))
  }
  return { total: (ticks * 1e6) / CLOCK_TICKS, system: (systemTicks * 1e6) / CLOCK_TICKS }
}

/** Busy and total jiffies of each CPU core, from /proc/stat (idle and iowait count as not busy). */
export function coreTimes(): { busy: number; total: number }[] {
  const cores: { busy: number; total: number }[] = []
  for (const line of readFileSync('/proc/stat', 'utf8').split('\n')) {
    const match = line.match(/^cpu(\d+)\s+(.*)$/)
    if (!match) continue
    const fields = match[2].trim().split(/\s+/).map(Number)
    const total = fields.slice(0, 8).reduce((sum, n) => sum + n, 0)
    cores[Number(match[1])] = { busy: total - fields[3] - fields[4], total }
  }
  return cores
}

/** Share (0..1) of each core that was busy between two {@link coreTimes} readings. */
export function coreBusy(before: { busy: number; total: number }[], after: { busy: number; total: number }[]): number[] {
  return after.map((a, i) => (a.total - before[i].total > 0 ? (a.busy - before[i].busy) / (a.total - before[i].total) : 0))
}

/** A TCP port that was free a moment ago on 127.0.0.1 (bound, read, released). */
export async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}
