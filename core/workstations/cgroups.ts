/**
 * Memory, CPU and process caps of one workstation as a cgroup, on cgroup v2 (unified, with the
 * memory, pids and cpu controllers) or v1 (one hierarchy per controller). Where neither can be
 * written the caller falls back to rlimits (see sandbox.ts) and says so in the log.
 *
 * Groups live at `<mount>/tollgate-ws/<key>`; the key includes a hash of the driver's root, so two
 * gateways on one host never share a group for the same project id.
 */
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { WorkstationLimits } from './workspace.ts'

const MOUNT = '/sys/fs/cgroup'

export interface CgroupSet {
  /** `cgroup.procs` files a process writes its pid into to join (one per v1 hierarchy). */
  procs: string[]
  /** The group directories (removed once empty). */
  dirs: string[]
  version: 1 | 2
}

function v2Available(): boolean {
  try {
    const controllers = readFileSync(join(MOUNT, 'cgroup.controllers'), 'utf8').split(/\s+/)
    return ['memory', 'pids', 'cpu'].every((c) => controllers.includes(c))
  } catch {
    return false
  }
}

function v1Available(): boolean {
  return ['memory', 'pids', 'cpu'].every((c) => existsSync(join(MOUNT, c, 'cgroup.procs')))
}

function write(dir: string, file: string, value: string): void {
  writeFileSync(join(dir, file), value)
}

/** Creates (or reuses) the group of `key` with `limits`; undefined where cgroups cannot be used. */
export function createCgroup(key: string, limits: WorkstationLimits): CgroupSet | undefined {
  const memory = String(limits.memoryMb * 1024 * 1024)
  const period = 100_000
  const quota = String(Math.max(1000, Math.round(limits.cpus * period)))
  try {
    if (v2Available()) {
      const parent = join(MOUNT, 'tollgate-ws')
      mkdirSync(parent, { recursive: true })
      try { write(parent, 'cgroup.subtree_control', '+memory +pids +cpu') } catch { /* already */ }
      const dir = join(parent, key)
      mkdirSync(dir, { recursive: true })
      write(dir, 'memory.max', memory)
      if (existsSync(join(dir, 'memory.swap.max'))) write(dir, 'memory.swap.max', '0')
      write(dir, 'pids.max', String(limits.processes))
      write(dir, 'cpu.max', `${quota} ${period}`)
      return { procs: [join(dir, 'cgroup.procs')], dirs: [dir], version: 2 }
    }
    if (v1Available()) {
      const dirs = ['memory', 'pids', 'cpu'].map((c) => join(MOUNT, c, 'tollgate-ws', key))
      for (const dir of dirs) mkdirSync(dir, { recursive: true })
      const [mem, pids, cpu] = dirs
      write(mem, 'memory.limit_in_bytes', memory)
      if (existsSync(join(mem, 'memory.memsw.limit_in_bytes'))) write(mem, 'memory.memsw.limit_in_bytes', memory)
      write(pids, 'pids.max', String(limits.processes))
      write(cpu, 'cpu.cfs_period_us', String(period))
      write(cpu, 'cpu.cfs_quota_us', quota)
      return { procs: dirs.map((dir) => join(dir, 'cgroup.procs')), dirs, version: 1 }
    }
  } catch {
    return undefined
  }
  return undefined
}

/** Removes the group's directories (only possible once no process is left in them). */
export function removeCgroup(key: string): void {
  for (const dir of [join(MOUNT, 'tollgate-ws', key), ...['memory', 'pids', 'cpu'].map((c) => join(MOUNT, c, 'tollgate-ws', key))]) {
    try { rmdirSync(dir) } catch { /* absent or still busy */ }
  }
}
