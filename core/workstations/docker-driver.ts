/**
 * The `docker` driver: Docker Engine's HTTP API over its unix socket (API version 1.43 paths, as
 * documented at docs.docker.com/reference/api/engine). A workstation is a named volume (the home
 * directory, kept across stop/start, removed by delete) and a container named
 * `tollgate-ws-<project>` running `image`, whose `containerPort` is published on 127.0.0.1 at a port
 * the engine picks; the gateway proxies to it.
 *
 *   provision  POST /volumes/create {Name}                                   201 (existing: 201 too)
 *   start      POST /containers/create?name=…  {Image, HostConfig{Binds, PortBindings}}   201 / 409 exists
 *              POST /containers/{name}/start                                 204 / 304 already started
 *              GET  /containers/{name}/json → NetworkSettings.Ports["<port>/tcp"][0].HostPort
 *   stop       POST /containers/{name}/stop?t=<grace s>  (SIGTERM, then SIGKILL) 204 / 304 / 404
 *   delete     DELETE /containers/{name}?force=true, DELETE /volumes/{name}  204 / 404
 *
 * Every step tolerates the answer that says it was already done, so a retry after a crash is safe.
 */
import { Client } from 'undici'
import { DriverError, type WorkstationDriver } from './driver.ts'
import type { DriverHandle } from './states.ts'

export interface DockerDriverOptions {
  /** The engine's socket, e.g. /var/run/docker.sock. */
  socketPath: string
  /** Image of the workstation server (a terminal or editor listening on `containerPort`). */
  image: string
  containerPort: number
  /** Where the volume is mounted in the container (default /home/workstation). */
  homePath?: string
  /** Seconds between SIGTERM and SIGKILL on stop (default 10). */
  stopGraceSeconds?: number
  startTimeoutMs?: number
}

const API = '/v1.43'

interface DockerHandle extends DriverHandle {
  driver: 'docker'
  container: string
}

export class DockerDriver implements WorkstationDriver {
  readonly name = 'docker'
  private readonly client: Client

  constructor(private readonly options: DockerDriverOptions) {
    this.client = new Client('http://docker', { socketPath: options.socketPath })
  }

  private names(projectId: string): { container: string; volume: string } {
    if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,100}$/.test(projectId)) throw new DriverError(`project id ${JSON.stringify(projectId)} cannot name a container`)
    return { container: `tollgate-ws-${projectId}`, volume: `tollgate-ws-${projectId}-home` }
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
        headersTimeout: 30_000,
        bodyTimeout: 30_000,
      })
    } catch (error) {
      throw new DriverError(`the Docker engine at ${this.options.socketPath} did not answer: ${(error as Error).message}`)
    }
    const text = await answer.body.text()
    const parsed = text ? JSON.parse(text) : undefined
    if (!ok.includes(answer.statusCode)) throw new DriverError(`Docker ${method} ${path} answered ${answer.statusCode}: ${parsed?.message ?? text}`)
    return { status: answer.statusCode, body: parsed }
  }

  async provision(projectId: string): Promise<void> {
    await this.call('POST', '/volumes/create', [201], { Name: this.names(projectId).volume, Labels: { 'tollgate.workstation': projectId } })
  }

  async start(projectId: string): Promise<DriverHandle> {
    const { container, volume } = this.names(projectId)
    const port = `${this.options.containerPort}/tcp`
    await this.call('POST', `/containers/create?name=${encodeURIComponent(container)}`, [201, 409], {
      Image: this.options.image,
      Labels: { 'tollgate.workstation': projectId },
      ExposedPorts: { [port]: {} },
      HostConfig: {
        Binds: [`${volume}:${this.options.homePath ?? '/home/workstation'}`],
        PortBindings: { [port]: [{ HostIp: '127.0.0.1', HostPort: '' }] },
      },
    })
    await this.call('POST', `/containers/${container}/start`, [204, 304])
    const deadline = Date.now() + (this.options.startTimeoutMs ?? 60_000)
    while (Date.now() < deadline) {
      const { body } = await this.call('GET', `/containers/${container}/json`, [200])
      if (body.State?.Status === 'exited' || body.State?.Status === 'dead') throw new DriverError(`the container exited during start (exit code ${body.State.ExitCode})`)
      const hostPort = body.NetworkSettings?.Ports?.[port]?.[0]?.HostPort
      if (body.State?.Running && hostPort) {
        const handle: DockerHandle = { driver: 'docker', container, target: `http://127.0.0.1:${hostPort}` }
        if (await this.answers(handle)) return handle
      }
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
    throw new DriverError(`the container did not answer within ${this.options.startTimeoutMs ?? 60_000} ms`)
  }

  async stop(handle: DriverHandle): Promise<void> {
    const { container } = handle as DockerHandle
    await this.call('POST', `/containers/${container}/stop?t=${this.options.stopGraceSeconds ?? 10}`, [204, 304, 404])
  }

  async delete(projectId: string): Promise<void> {
    const { container, volume } = this.names(projectId)
    await this.call('DELETE', `/containers/${container}?force=true`, [204, 404])
    await this.call('DELETE', `/volumes/${volume}`, [204, 404])
  }

  async alive(handle: DriverHandle): Promise<boolean> {
    const { container } = handle as DockerHandle
    const { status, body } = await this.call('GET', `/containers/${container}/json`, [200, 404])
    return status === 200 && body.State?.Running === true && (await this.answers(handle))
  }

  async close(): Promise<void> {
    await this.client.close()
  }

  private async answers(handle: DriverHandle): Promise<boolean> {
    try {
      const answer = await fetch(`${handle.target}/`, { signal: AbortSignal.timeout(2000) })
      await answer.arrayBuffer()
      return answer.status < 500
    } catch {
      return false
    }
  }
}
