/**
 * CPU the shared engine's servers spend for one gateway process: the PostgreSQL backends that serve
 * the gateway's own connections (found by matching the gateway's TCP sockets with
 * `pg_stat_activity.client_port`, or, over a Unix socket, the peers `ss -xp` names for the gateway's
 * sockets), and the Redis server process as a whole (Redis is single-threaded
 * and shared: its figure includes any other client on the machine).
 */
import { readFileSync, readdirSync, readlinkSync } from 'node:fs'
import { execFileSync } from 'node:child_process'
import pg from 'pg'

const CLOCK_TICKS = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100

/** user + system CPU (µs) of one process, 0 when it is gone. */
export function processCpuMicros(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS
  } catch {
    return 0
  }
}

/** Local TCP ports of the sockets process `pid` holds open. */
function localPortsOf(pid: number): Set<number> {
  const inodes = new Set<string>()
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))
      if (match) inodes.add(match[1]!)
    } catch {
      /* closed meanwhile */
    }
  }
  const ports = new Set<number>()
  for (const table of ['tcp', 'tcp6']) {
    let text = ''
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, 'utf8')
    } catch {
      continue
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/)
      if (cols.length > 9 && inodes.has(cols[9]!)) ports.add(parseInt(cols[1]!.split(':')[1]!, 16))
    }
  }
  return ports
}

/** PIDs of the PostgreSQL backends serving connections of process `gatewayPid`. */
export async function backendsOf(postgresUrl: string, gatewayPid: number): Promise<number[]> {
  if (/[?&]host=\//.test(postgresUrl)) return unixPeersOf(gatewayPid, 'postgres')
  const ports = localPortsOf(gatewayPid)
  const client = new pg.Client({ connectionString: postgresUrl, application_name: 'tollgate-bench-probe' })
  await client.connect()
  try {
    const { rows } = await client.query<{ pid: number; client_port: number }>(`SELECT pid, client_port FROM pg_stat_activity WHERE client_port IS NOT NULL`)
    return rows.filter((row) => ports.has(row.client_port)).map((row) => row.pid)
  } finally {
    await client.end()
  }
}

/**
 * PIDs of the `command` processes at the other end of process `pid`'s Unix stream sockets (for
 * PostgreSQL reached by its socket, where pg_stat_activity has no client port to match).
 */
function unixPeersOf(pid: number, command: string): number[] {
  const lines = execFileSync('ss', ['-xpn'], { encoding: 'utf8' }).split('\n')
  // Columns: Netid State Recv-Q Send-Q Local Port Peer Port Process; for Unix sockets "Port" is the inode.
  const rows = lines.map((line) => line.trim().split(/\s+/)).filter((cols) => cols[0] === 'u_str' && cols.length >= 9)
  const owned = new Set(rows.filter((cols) => cols[8]!.includes(`pid=${pid},`)).map((cols) => cols[5]!))
  const peers = new Set<number>()
  for (const cols of rows) {
    const owner = new RegExp(`\\("${command}",pid=(\\d+),`).exec(cols[8]!)
    if (owner && owned.has(cols[7]!)) peers.add(Number(owner[1]))
  }
  return [...peers]
}

/** PID of the local redis-server, if one runs. */
export function redisServerPid(): number | undefined {
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry)
    if (!Number.isInteger(pid)) continue
    try {
      if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'redis-server') return pid
    } catch {
      /* gone */
    }
  }
  return undefined
}

/** CPU (µs) of the given PostgreSQL backends and the Redis server, summed separately. */
export function serverCpu(backends: number[], redisPid: number | undefined): { postgres: number; redis: number } {
  return { postgres: backends.reduce((sum, pid) => sum + processCpuMicros(pid), 0), redis: redisPid === undefined ? 0 : processCpuMicros(redisPid) }
}

/** The CPU list `pid`'s threads may run on (`taskset -p` form, e.g. "0,1" or "0-1"). */
export function affinityOf(pid: number): string {
  const line = execFileSync('taskset', ['-c', '-p', String(pid)], { encoding: 'utf8' })
  return line.slice(line.lastIndexOf(':') + 1).trim()
}

/** Pins every thread of `pid` to `cpus` (a taskset CPU list); false when the process is gone or taskset refuses. */
export function pinProcess(pid: number, cpus: string): boolean {
  try {
    execFileSync('taskset', ['-a', '-c', '-p', cpus, String(pid)], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}
