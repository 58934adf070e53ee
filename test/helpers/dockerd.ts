/**
 * A real Docker engine for one test file (Debian's docker.io), started with its own data root,
 * exec root, pid file and unix socket under a temp dir, `--bridge=none --iptables=false
 * --ip6tables=false`: it creates no network and touches no firewall rule. The workstation image is
 * built into it from host files (examples/workstation-image/build.sh, no registry). Stopped by PID.
 */
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, openSync, closeSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { tempDir } from './temp.ts'

export const DOCKERD = '/usr/sbin/dockerd'
export const WORKSTATION_IMAGE = 'tollgate-workstation:local'
const BUILD = fileURLToPath(new URL('../../examples/workstation-image/build.sh', import.meta.url))

export interface TestDockerd {
  socketPath: string
  image: string
  stop(): Promise<void>
}

/** Why the engine cannot run here, or undefined when it can. Under CI a missing engine is a failure, not a skip. */
export function dockerdUnavailable(): string | undefined {
  if (!existsSync(DOCKERD)) return `${DOCKERD} is not installed (Debian package docker.io)`
  if (process.getuid?.() !== 0) return 'dockerd needs root'
  return undefined
}

export async function startDockerd(): Promise<TestDockerd> {
  const dir = tempDir('tollgate-dockerd-')
  const socketPath = `${dir}/docker.sock`
  const log = openSync(`${dir}/dockerd.log`, 'a')
  const child = spawn(DOCKERD, [
    '--data-root', `${dir}/data`, '--exec-root', `${dir}/exec`, '--pidfile', `${dir}/dockerd.pid`,
    '--host', `unix://${socketPath}`, '--bridge=none', '--iptables=false', '--ip6tables=false',
  ], { stdio: ['ignore', log, log], detached: false })
  closeSync(log)
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    const exited = new Promise((resolve) => child.once('exit', resolve))
    child.kill('SIGTERM')
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000)
    await exited
    clearTimeout(timer)
  }
  const deadline = Date.now() + 60_000
  while (!existsSync(socketPath) || spawnSync('docker', ['-H', `unix://${socketPath}`, 'version'], { stdio: 'ignore' }).status !== 0) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop()
      throw new Error(`dockerd did not start: ${readFileSync(`${dir}/dockerd.log`, 'utf8').slice(-800)}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  const built = spawnSync(BUILD, [WORKSTATION_IMAGE, `unix://${socketPath}`], { encoding: 'utf8' })
  if (built.status !== 0) {
    await stop()
    throw new Error(`the workstation image did not build: ${built.stderr.slice(-800)}`)
  }
  return { socketPath, image: WORKSTATION_IMAGE, stop }
}
