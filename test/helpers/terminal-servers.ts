/**
 * The workstation sandboxes (core/workstations/process-driver.ts) of a driver `root`, read from
 * /proc: how the workstation tests prove no process is left behind. Every workstation runs as its
 * own uid (claimed under `<root>/.uids/`), so its processes are those of that uid; the sandbox is
 * the one whose parent is not. Zombies are skipped (they have exited; their parent only has not
 * reaped them yet).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { request as httpRequest } from 'node:http'
import { connect, createServer, type AddressInfo } from 'node:net'
import { processesOf } from '../../core/workstations/workspace.ts'

function uidsUnder(root: string): number[] {
  const dir = join(root, '.uids')
  return existsSync(dir) ? readdirSync(dir).map(Number).filter(Number.isInteger) : []
}

/** One PID per running workstation under `root` (its sandbox's outermost process). */
export function serversUnder(root: string): number[] {
  const pids: number[] = []
  for (const uid of uidsUnder(root)) {
    const own = new Set(processesOf(uid))
    for (const pid of own) {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
        const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
        if (!own.has(ppid)) pids.push(pid)
      } catch { /* gone */ }
    }
  }
  return pids
}

/** Kills every workstation process under `root` (test teardown after a failure). */
export function killAllUnder(root: string): void {
  for (const uid of uidsUnder(root)) {
    for (let i = 0; i < 50; i++) {
      const pids = processesOf(uid)
      if (!pids.length) break
      for (const pid of pids) try { process.kill(pid, 'SIGKILL') } catch { /* gone */ }
    }
  }
}

/** The unix socket of a driver handle's target (`unix:/…/server.sock`). */
export function socketOfTarget(target: string): string {
  if (!target.startsWith('unix:/')) throw new Error(`not a unix socket target: ${target}`)
  return target.slice('unix:'.length)
}

/** A WebSocket URL for `path` on the workstation server behind `target` (the ws package's unix form). */
export function wsUrlOf(target: string, path: string): string {
  return `ws+unix://${socketOfTarget(target)}:${path}`
}

/** GET `path` from the workstation server behind `target`, straight over its socket (as the gateway does). */
export function getFromTarget(target: string, path: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ socketPath: socketOfTarget(target), path }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk) => (text += chunk))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }))
    })
    req.on('error', reject)
    req.end()
  })
}

/**
 * A loopback TCP port relaying to the workstation's socket, for a browser in a test that opens the
 * server without a gateway in front (the gateway itself never exposes one).
 */
export async function relayToTarget(target: string): Promise<{ url: string; close(): Promise<void> }> {
  const open = new Set<import('node:net').Socket>()
  const server = createServer((client) => {
    const upstream = connect(socketOfTarget(target))
    open.add(client).add(upstream)
    client.on('close', () => open.delete(client))
    upstream.on('close', () => open.delete(upstream))
    client.pipe(upstream).pipe(client)
    client.on('error', () => upstream.destroy())
    upstream.on('error', () => client.destroy())
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise<void>((resolve) => { for (const socket of open) socket.destroy(); server.close(() => resolve()) }) }
}
