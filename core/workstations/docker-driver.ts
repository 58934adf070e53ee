/**
 * The `docker` driver: Docker Engine's HTTP API over its unix socket (API version 1.41 paths, as
 * documented at docs.docker.com/reference/api/engine). The engine runs on the gateway's host: the
 * workstation's home and socket directory are host directories (workspace.ts: its own uid, its
 * home on a fixed-size disk image) bind-mounted into a container named `tollgate-ws-<key>`:
 *
 *   --user <uid>:<uid>  --network none  --read-only (root)  --tmpfs /tmp (tmpMb)
 *   --pids-limit  --memory (= swap)  --cpus  --cap-drop ALL  --security-opt no-new-privileges
 *   environment: the allow-list only; /home/workstation and /run/workstation bind-mounted
 *
 * The gateway reaches the server through the socket it creates in /run/workstation; no port is
 * published and the container has no network interface but its own loopback.
 *
 *   provision  (host) uid, disk image
 *   start      POST /containers/create?name=…  201 / 409 exists
 *              POST /containers/{name}/start   204 / 304 already started; then the socket's health check
 *   stop       POST /containers/{name}/stop?t=<grace s>  (SIGTERM, then SIGKILL) 204 / 304 / 404
 *   delete     DELETE /containers/{name}?force=true  204 / 404; (host) image and uid released
 *
 * Every step tolerates the answer that says it was already done, so a retry after a crash is safe.
 */
import { Client } from 'undici'
import { DriverError, type WorkstationDriver } from './driver.ts'
import { healthyAt } from './process-driver.ts'
import { HOME_IN, RUN_IN } from './sandbox.ts'
import type { DriverHandle } from './states.ts'
import { DEFAULT_LIMITS, Workspaces, type WorkstationLimits } from './workspace.ts'

export interface DockerDriverOptions {
  /** The engine's socket, e.g. /var/run/docker.sock. */
  socketPath: string
  /** Image of the workstation server: it listens on /run/workstation/server.sock. */
  image: string
  /** The container's command (default: the image's). */
  command?: string[]
  /** Parent of the per-project data (disk images), as for the process driver. */
  root: string
  runDir?: string
  uidBase?: number
  uidCount?: number
  limits?: Partial<WorkstationLimits>
  env?: Record<string, string>
  /** Seconds between SIGTERM and SIGKILL on stop (default 10). */
  stopGraceSeconds?: number
  startTimeoutMs?: number
}

// 1.41: the oldest API of the engines we meet (Debian bookworm's docker.io 20.10); newer engines still serve it.
const API = '/v1.41'

interface DockerHandle extends DriverHandle {
  driver: 'docker'
  container: string
}

export class DockerDriver implements WorkstationDriver {
  readonly name = 'docker'
  readonly workspaces: Workspaces
  private readonly client: Client
  private readonly limits: WorkstationLimits

  constructor(private readonly options: DockerDriverOptions) {
    this.client = new Client('http://docker', { socketPath: options.socketPath })
    this.workspaces = new Workspaces({ root: options.root, runDir: options.runDir, uidBase: options.uidBase, uidCount: options.uidCount })
    this.limits = { ...DEFAULT_LIMITS, ...options.limits }
  }

  /** The container's name: from the workspace key, so two gateways on one engine never share one. */
  containerOf(projectId: string): string {
    return `tollgate-ws-${this.workspaces.paths(projectId).stage.split('/').pop()}`
  }

  /** One API call; answers the status and parsed body, throws on statuses not in `ok`. */
  private async call(method: 'GET' | 'POST' | 'DELETE', path: string, ok: number[], body?: unknown): Promise<{ status: number; body: any }> {
    let answer
    try {
      answer = await this.client.request({
        method,
        path: `${API}${path}`,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
        headersTimeout: 60_000,
        bodyTimeout: 60_000,
      })
    } catch (error) {
      throw new DriverError(`the Docker engine at ${this.options.socketPath} did not answer: ${(error as Error).message}`)
    }
    const text = await answer.body.text()
    let parsed
    try { parsed = text ? JSON.parse(text) : undefined } catch { parsed = undefined }
    if (!ok.includes(answer.statusCode)) throw new DriverError(`Docker ${method} ${path} answered ${answer.statusCode}: ${parsed?.message ?? text.slice(0, 300)}`)
    return { status: answer.statusCode, body: parsed }
  }

  async provision(projectId: string): Promise<void> {
    await this.workspaces.provision(projectId, this.limits.diskMb)
  }

  /** The container's configuration: every isolation the engine offers, and no port. */
  private createBody(projectId: string, uid: number): unknown {
    const paths = this.workspaces.paths(projectId)
    const env = { ...this.options.env, HOME: HOME_IN, USER: 'workstation', SHELL: '/bin/bash', PATH: '/usr/local/bin:/usr/bin:/bin', TERM: 'xterm-256color', LANG: 'C.UTF-8' }
    const memory = this.limits.memoryMb * 1024 * 1024
    return {
      Image: this.options.image,
      ...(this.options.command ? { Cmd: this.options.command } : {}),
      User: `${uid}:${uid}`,
      Env: Object.entries(env).map(([name, value]) => `${name}=${value}`),
      WorkingDir: HOME_IN,
      Hostname: 'workstation',
      Labels: { 'tollgate.workstation': projectId },
      NetworkDisabled: true,
      HostConfig: {
        NetworkMode: 'none',
        ReadonlyRootfs: true,
        Tmpfs: { '/tmp': `rw,nosuid,nodev,size=${this.limits.tmpMb}m,mode=1777` },
        Binds: [`${paths.home}:${HOME_IN}:rw`, `${paths.run}:${RUN_IN}:rw`, `${paths.etc}/passwd:/etc/passwd:ro`, `${paths.etc}/group:/etc/group:ro`],
        PidsLimit: this.limits.processes,
        Memory: memory,
        MemorySwap: memory,
        NanoCpus: Math.round(this.limits.cpus * 1e9),
        CapDrop: ['ALL'],
        SecurityOpt: ['no-new-privileges'],
        Ulimits: [{ Name: 'nproc', Soft: this.limits.processes, Hard: this.limits.processes }, { Name: 'core', Soft: 0, Hard: 0 }],
        Init: true,
        IpcMode: 'private',
      },
    }
  }

  async start(projectId: string): Promise<DriverHandle> {
    Workspaces.requireRoot('the docker driver')
    await this.workspaces.mount(projectId)
    const uid = this.workspaces.uidOf(projectId)!
    const container = this.containerOf(projectId)
    const socket = this.workspaces.paths(projectId).socket
    await this.call('POST', `/containers/create?name=${encodeURIComponent(container)}`, [201, 409], this.createBody(projectId, uid))
    await this.call('POST', `/containers/${container}/start`, [204, 304])
    const handle: DockerHandle = { driver: 'docker', container, projectId, target: `unix:${socket}` }
    const timeoutMs = this.options.startTimeoutMs ?? 60_000
    const deadline = Date.now() + timeoutMs
    while (Date.now() < deadline) {
      const { body } = await this.call('GET', `/containers/${container}/json`, [200])
      if (body.State?.Status === 'exited' || body.State?.Status === 'dead') throw new DriverError(`the container exited during start (exit code ${body.State.ExitCode})`)
      if (body.State?.Running && (await healthyAt(socket))) return handle
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
    throw new DriverError(`the container did not answer within ${timeoutMs} ms`)
  }

  async stop(handle: DriverHandle): Promise<void> {
    const { container, projectId } = handle as DockerHandle
    await this.call('POST', `/containers/${container}/stop?t=${this.options.stopGraceSeconds ?? 10}`, [204, 304, 404])
    // Removed on stop (its state is in the home): the next start creates it with the current configuration.
    await this.call('DELETE', `/containers/${container}?force=true`, [204, 404, 409])
    if (typeof projectId === 'string') await this.workspaces.unmount(projectId)
  }

  async delete(projectId: string): Promise<void> {
    await this.call('DELETE', `/containers/${this.containerOf(projectId)}?force=true`, [204, 404])
    await this.workspaces.remove(projectId)
  }

  async alive(handle: DriverHandle): Promise<boolean> {
    const { container, target } = handle as DockerHandle
    const { status, body } = await this.call('GET', `/containers/${container}/json`, [200, 404])
    return status === 200 && body.State?.Running === true && typeof target === 'string' && (await healthyAt(target.slice('unix:'.length)))
  }

  async close(): Promise<void> {
    await this.client.close()
  }
}
