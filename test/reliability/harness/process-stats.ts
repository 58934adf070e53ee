/** Resource figures of a running process, read from /proc (Linux). */
import { readdirSync, readFileSync, existsSync } from 'node:fs'

export const HAS_PROC = existsSync('/proc/self/fd')

/** Open file descriptors of the process. */
export function fdCount(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length
}

/** Resident set size in KiB (VmRSS). */
export function rssKiB(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return match ? Number(match[1]) : NaN
}

/** Waits until the fd count stops falling (sockets in close) or `ms` passes, then returns it. */
export async function settledFdCount(pid: number, ms = 3000): Promise<number> {
  let last = fdCount(pid)
  const until = Date.now() + ms
  while (Date.now() < until) {
    await new Promise((r) => setTimeout(r, 200))
    const now = fdCount(pid)
    if (now >= last) return now
    last = now
  }
  return last
}
