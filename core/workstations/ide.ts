/**
 * code-server (VS Code in the browser) next to the terminal, inside the same sandbox: the terminal
 * server starts it as a child and reports healthy only once it answers, so "ready" means the IDE is
 * up too. It listens on a second unix socket in the workstation's socket directory
 * (`/run/workstation/ide.sock`); the gateway proxies `/workstations/:id/ide/...` to it (path
 * prefix removed: code-server's URLs are relative) and `/workstations/:id/...` to the terminal.
 *
 * Flags: `--auth none` (the gateway's identity rule is the authentication, and nothing but the
 * gateway can reach the socket), `--disable-telemetry`, `--disable-update-check`; the sandbox has
 * no network at all (egress none), so the extension gallery and any other download simply fail.
 * Installed by examples/workstation-image/install-code-server.sh into a directory of its own
 * (Node 24 + code-server), mounted read-only at /opt/ide.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { request } from 'node:http'
import { join } from 'node:path'

/** Where the sandbox sees the install directory, and the IDE's socket. */
export const IDE_IN = '/opt/ide'
export const IDE_SOCKET_NAME = 'ide.sock'
/** The path prefix of the IDE under a workstation (`/workstations/:id/ide/`). */
export const IDE_PATH = '/ide/'

/** The node binary and code-server entry point inside an install directory. */
export function ideFiles(dir: string): { node: string; entry: string } {
  return { node: join(dir, 'node', 'bin', 'node'), entry: join(dir, 'code-server', 'node_modules', 'code-server', 'out', 'node', 'entry.js') }
}

/** Why an install directory cannot run the IDE, or undefined. */
export function ideMissing(dir: string): string | undefined {
  const { node, entry } = ideFiles(dir)
  for (const file of [node, entry]) if (!existsSync(file)) return `${file} is missing: run examples/workstation-image/install-code-server.sh ${dir}`
  return undefined
}

export interface IdeOptions {
  /** The install directory as seen here (inside the sandbox: /opt/ide). */
  dir: string
  socket: string
  home: string
  log(message: string): void
}

/** Runs code-server and starts it again (after a pause) if it exits; `close` stops it. */
export class IdeProcess {
  private child?: ChildProcess
  private closed = false
  private restarts = 0

  constructor(private readonly options: IdeOptions) {
    this.spawn()
  }

  private spawn(): void {
    const { node, entry } = ideFiles(this.options.dir)
    const home = this.options.home
    const child = spawn(node, [
      entry,
      '--socket', this.options.socket, '--socket-mode', '660',
      '--auth', 'none', '--disable-telemetry', '--disable-update-check', '--disable-workspace-trust',
      '--disable-getting-started-override',
      '--user-data-dir', join(home, '.local/share/code-server'), '--extensions-dir', join(home, '.local/share/code-server/extensions'),
      '--ignore-last-opened', home,
    ], { cwd: home, env: { ...process.env, HOME: home }, stdio: ['ignore', 'inherit', 'inherit'] })
    this.child = child
    child.on('error', (error) => this.options.log(`code-server: ${error.message}`))
    child.on('exit', (code, signal) => {
      if (this.closed) return
      this.options.log(`code-server exited (${signal ?? code}); starting it again`)
      // Slower each time, so a broken install does not spin.
      setTimeout(() => { if (!this.closed) this.spawn() }, Math.min(30_000, 1_000 * 2 ** Math.min(this.restarts++, 5))).unref()
    })
  }

  /** Whether code-server answers its /healthz on the socket. */
  healthy(): Promise<boolean> {
    return new Promise((resolve) => {
      const req = request({ socketPath: this.options.socket, path: '/healthz', timeout: 2_000 }, (res) => {
        res.resume()
        res.on('end', () => resolve(res.statusCode === 200))
      })
      req.on('error', () => resolve(false))
      req.on('timeout', () => { req.destroy(); resolve(false) })
      req.end()
    })
  }

  close(): void {
    this.closed = true
    this.child?.kill('SIGTERM')
  }
}
