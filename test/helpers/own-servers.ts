/**
 * A PostgreSQL cluster and a Redis server of the test's own, on ports nobody else uses, so that the
 * test may stop, restart and flush them (the shared servers of shared-servers.ts are never touched).
 *
 * - PostgreSQL: `initdb` into a temp dir, run as the `postgres` user (`runuser`; the tests run as
 *   root), trust authentication, listening on 127.0.0.1 and a socket in the temp dir only;
 *   `stop('fast' | 'immediate')` and `start()` make restarts; `close()` stops it and removes the dir.
 * - Redis: `redis-server --port N` as a child process without persistence; `restart()` kills it by
 *   PID and starts a new one on the same port (empty, as after a crash).
 *
 * Both are skipped (with the reason) when the binaries are missing, failed under CI.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { connect } from 'node:net'
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createClient } from 'redis'

function postgresBin(): string | undefined {
  const root = '/usr/lib/postgresql'
  if (!existsSync(root)) return undefined
  const versions = readdirSync(root).sort((a, b) => Number(b) - Number(a))
  for (const version of versions) if (existsSync(join(root, version, 'bin', 'initdb'))) return join(root, version, 'bin')
  return undefined
}

/** Servers still running; stopped when the test process exits (a timed-out test never reaches its teardown). */
const leftovers = new Set<() => void>()
process.once('exit', () => {
  for (const stop of leftovers) stop()
})

/** Whether something listens on 127.0.0.1:`port`. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port })
    socket.once('connect', () => (socket.destroy(), resolve(true)))
    socket.once('error', () => resolve(false))
  })
}

/** The first port of `ports` nobody listens on (a run cut short may have left a server behind). */
async function freePort(ports: number[]): Promise<number> {
  for (const port of ports) if (!(await listening(port))) return port
  throw new Error(`no free port among ${ports.join(', ')}`)
}

/** Why own servers cannot be started here, or undefined. */
export function ownServersMissing(): string | undefined {
  if (postgresBin() === undefined) return 'no PostgreSQL binaries under /usr/lib/postgresql'
  if (spawnSync('redis-server', ['--version']).status !== 0) return 'no redis-server on PATH'
  if (spawnSync('id', ['-u', 'postgres']).status !== 0) return 'no postgres user to run initdb as'
  if (process.getuid?.() !== 0) return 'own PostgreSQL needs root (to run it as the postgres user)'
  return undefined
}

export interface OwnPostgres {
  url: string
  port: number
  /** Starts the stopped cluster; resolves once it accepts connections. */
  start(): Promise<void>
  /** Stops it: `fast` (clean shutdown) or `immediate` (a crash: WAL replay at the next start). */
  stop(mode: 'fast' | 'immediate'): Promise<void>
  close(): Promise<void>
}

function asPostgres(bin: string, args: string[], timeoutMs = 60_000): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn('runuser', ['-u', 'postgres', '--', join(postgresBin()!, bin), ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (chunk) => (output += chunk))
    child.stderr.on('data', (chunk) => (output += chunk))
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.on('exit', (code) => {
      clearTimeout(timer)
      resolve({ code, output })
    })
  })
}

/** Creates and starts a cluster on the first free port of `ports` (use 55432–55439). */
export async function startOwnPostgres(ports: number[]): Promise<OwnPostgres> {
  const port = await freePort(ports)
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-own-pg-'))
  chmodSync(dir, 0o777)
  const data = join(dir, 'data')
  const init = await asPostgres('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '--no-instructions'])
  if (init.code !== 0) {
    rmSync(dir, { recursive: true, force: true })
    throw new Error(`initdb failed: ${init.output}`)
  }
  const leftover = () => {
    spawnSync('runuser', ['-u', 'postgres', '--', join(postgresBin()!, 'pg_ctl'), '-D', data, '-m', 'immediate', 'stop'])
    rmSync(dir, { recursive: true, force: true })
  }
  leftovers.add(leftover)
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=200 -c shared_buffers=32MB`
  let running = false
  const own: OwnPostgres = {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    async start() {
      const started = await asPostgres('pg_ctl', ['-D', data, '-l', join(dir, 'log'), '-o', options, '-w', '-t', '60', 'start'])
      if (started.code !== 0) throw new Error(`pg_ctl start failed: ${started.output}`)
      running = true
    },
    async stop(mode) {
      const stopped = await asPostgres('pg_ctl', ['-D', data, '-m', mode, '-w', '-t', '60', 'stop'])
      if (stopped.code !== 0) throw new Error(`pg_ctl stop failed: ${stopped.output}`)
      running = false
    },
    async close() {
      leftovers.delete(leftover)
      if (running) await own.stop('immediate').catch(() => {})
      rmSync(dir, { recursive: true, force: true })
    },
  }
  try {
    await own.start()
  } catch (error) {
    await own.close()
    throw error
  }
  return own
}

export interface OwnRedis {
  url: string
  port: number
  /** Kills the server (SIGKILL, by PID) and starts an empty one on the same port. */
  restart(): Promise<void>
  /** Kills the server; `start` brings an empty one back. */
  kill(): Promise<void>
  start(): Promise<void>
  flushAll(): Promise<void>
  close(): Promise<void>
}

/** Starts `redis-server` on the first free port of `ports` (use 56379–56389). */
export async function startOwnRedis(ports: number[]): Promise<OwnRedis> {
  const port = await freePort(ports)
  let child: ChildProcess | undefined
  const leftover = () => child?.kill('SIGKILL')
  leftovers.add(leftover)
  const url = `redis://127.0.0.1:${port}`
  const ping = async () => {
    const client = createClient({ url, socket: { connectTimeout: 500, reconnectStrategy: false } })
    client.on('error', () => {})
    try {
      await client.connect()
      await client.ping()
      return true
    } catch {
      return false
    } finally {
      if (client.isOpen) await client.close().catch(() => {})
    }
  }
  const own: OwnRedis = {
    url,
    port,
    async start() {
      child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--protected-mode', 'no'], { stdio: 'ignore' })
      for (let i = 0; i < 200 && !(await ping()); i++) await new Promise((resolve) => setTimeout(resolve, 25))
    },
    async kill() {
      const running = child
      child = undefined
      if (running === undefined || running.exitCode !== null) return
      const exited = new Promise((resolve) => running.once('exit', resolve))
      running.kill('SIGKILL')
      await exited
    },
    async restart() {
      await own.kill()
      await own.start()
    },
    async flushAll() {
      const client = createClient({ url })
      client.on('error', () => {})
      await client.connect()
      try {
        await client.flushAll()
      } finally {
        await client.close()
      }
    },
    close: () => {
      leftovers.delete(leftover)
      return own.kill()
    },
  }
  await own.start()
  return own
}
