/**
 * The workstation terminal servers (core/workstations/terminal-server.ts) running under `root`,
 * read from /proc: how the workstation tests prove no process is left behind. Zombies are skipped
 * (they have exited; their parent only has not reaped them yet).
 */
import { readdirSync, readFileSync } from 'node:fs'

export function serversUnder(root: string): number[] {
  const pids: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) continue
      const args = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0')
      if (args.some((a) => a.endsWith('terminal-server.ts')) && args.some((a) => a.startsWith(root))) pids.push(Number(entry))
    } catch { /* gone */ }
  }
  return pids
}
