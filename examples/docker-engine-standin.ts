/**
 * A stand-in for the Docker Engine API on a unix socket, for the docker driver's tests: the same
 * paths, status codes and JSON shapes as the engine (API 1.43) for the calls the driver makes —
 * volumes create/remove, containers create/start/inspect/stop/remove, `{"message": ...}` errors,
 * 304 for start/stop that are already done, 409 on a name in use, 404 "No such container".
 *
 * It has no images: the one image it knows, `tollgate/terminal`, "runs" as the workstation terminal
 * server (core/workstations/terminal-server.ts) as a real process, its volume a directory, its
 * published port the server's loopback port. Anything else is 404 "No such image", as the engine
 * answers for an image that was never pulled.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { randomBytes } from 'node:crypto'

const TERMINAL = fileURLToPath(new URL('../core/workstations/terminal-server.ts', import.meta.url))
export const STANDIN_IMAGE = 'tollgate/terminal'

interface Container {
  id: string
  name: string
  image: string
  volume: string
  port: string
  child?: ChildProcess
  hostPort?: string
  exitCode: number
  status: 'created' | 'running' | 'exited'
}

export interface DockerStandIn {
  socketPath: string
  /** Every call as `METHOD path`, for assertions. */
  calls: string[]
  close(): Promise<void>
}

export async function startDockerStandIn(dir: string): Promise<DockerStandIn> {
  const socketPath = join(dir, 'docker.sock')
  const volumes = new Map<string, string>()
  const containers = new Map<string, Container>()
  const calls: string[] = []

  const send = (res: ServerResponse, status: number, body?: unknown) => {
    if (body === undefined) return void res.writeHead(status).end()
    res.writeHead(status, { 'content-type': 'application/json', 'api-version': '1.43' }).end(JSON.stringify(body))
  }
  const readJson = async (req: IncomingMessage) => {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    return chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : {}
  }
  const find = (ref: string) => containers.get(ref) ?? [...containers.values()].find((c) => c.id.startsWith(ref))

  const stop = async (container: Container, graceSeconds: number) => {
    const child = container.child
    if (!child || container.status !== 'running') return
    const exited = new Promise((resolve) => child.once('exit', resolve))
    child.kill('SIGTERM')
    const timer = setTimeout(() => child.kill('SIGKILL'), graceSeconds * 1000)
    await exited
    clearTimeout(timer)
  }

  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://docker')
    calls.push(`${req.method} ${url.pathname}${url.search}`)
    const path = url.pathname.replace(/^\/v1\.\d+/, '')
    let m: RegExpExecArray | null
    try {
      if (req.method === 'POST' && path === '/volumes/create') {
        const { Name } = await readJson(req)
        const where = join(dir, 'volumes', Name)
        mkdirSync(where, { recursive: true })
        volumes.set(Name, where)
        return send(res, 201, { Name, Driver: 'local', Mountpoint: where, Labels: {}, Scope: 'local' })
      }
      if (req.method === 'DELETE' && (m = /^\/volumes\/([^/]+)$/.exec(path))) {
        const where = volumes.get(m[1])
        if (!where) return send(res, 404, { message: `get ${m[1]}: no such volume` })
        if ([...containers.values()].some((c) => c.volume === m![1])) return send(res, 409, { message: `remove ${m[1]}: volume is in use` })
        rmSync(where, { recursive: true, force: true })
        volumes.delete(m[1])
        return send(res, 204)
      }
      if (req.method === 'POST' && path === '/containers/create') {
        const name = url.searchParams.get('name') ?? `c${randomBytes(4).toString('hex')}`
        const body = await readJson(req)
        if (containers.has(name)) return send(res, 409, { message: `Conflict. The container name "/${name}" is already in use by container "${containers.get(name)!.id}". You have to remove (or rename) that container to be able to reuse that name.` })
        if (body.Image !== STANDIN_IMAGE) return send(res, 404, { message: `No such image: ${body.Image}` })
        const [volume] = String(body.HostConfig?.Binds?.[0] ?? '').split(':')
        if (!volumes.has(volume)) mkdirSync((volumes.set(volume, join(dir, 'volumes', volume)), join(dir, 'volumes', volume)), { recursive: true })
        const port = Object.keys(body.HostConfig?.PortBindings ?? {})[0] ?? ''
        const id = randomBytes(32).toString('hex')
        containers.set(name, { id, name, image: body.Image, volume, port, exitCode: 0, status: 'created' })
        return send(res, 201, { Id: id, Warnings: [] })
      }
      if ((m = /^\/containers\/([^/]+)(?:\/(start|stop|json))?$/.exec(path))) {
        const container = find(m[1])
        if (!container) return send(res, 404, { message: `No such container: ${m[1]}` })
        const action = m[2]
        if (req.method === 'POST' && action === 'start') {
          if (container.status === 'running') return send(res, 304)
          const portFile = join(dir, `${container.id}.port`)
          rmSync(portFile, { force: true })
          const child = spawn(process.execPath, ['--import', import.meta.resolve('tsx'), TERMINAL, '--dir', volumes.get(container.volume)!, '--port-file', portFile], { stdio: 'ignore' })
          container.child = child
          container.status = 'running'
          child.on('exit', (code, signal) => {
            container.status = 'exited'
            container.exitCode = code ?? (signal === 'SIGKILL' ? 137 : 143)
            container.hostPort = undefined
          })
          for (let i = 0; i < 300 && !existsSync(portFile) && container.status === 'running'; i++) await new Promise((r) => setTimeout(r, 50))
          if (existsSync(portFile)) container.hostPort = readFileSync(portFile, 'utf8')
          return send(res, 204)
        }
        if (req.method === 'POST' && action === 'stop') {
          if (container.status !== 'running') return send(res, 304)
          await stop(container, Number(url.searchParams.get('t') ?? 10))
          return send(res, 204)
        }
        if (req.method === 'GET' && action === 'json') {
          return send(res, 200, {
            Id: container.id,
            Name: `/${container.name}`,
            Config: { Image: container.image },
            State: { Status: container.status, Running: container.status === 'running', ExitCode: container.exitCode, Pid: container.child?.pid ?? 0 },
            NetworkSettings: { Ports: container.hostPort ? { [container.port]: [{ HostIp: '127.0.0.1', HostPort: container.hostPort }] } : { [container.port]: null } },
          })
        }
        if (req.method === 'DELETE' && !action) {
          if (container.status === 'running') {
            if (url.searchParams.get('force') !== 'true') return send(res, 409, { message: `cannot remove container "/${container.name}": container is running: stop the container before removing or force remove` })
            await stop(container, 0)
          }
          containers.delete(container.name)
          return send(res, 204)
        }
      }
      send(res, 404, { message: 'page not found' })
    } catch (error) {
      send(res, 500, { message: (error as Error).message })
    }
  })
  await new Promise<void>((resolve) => server.listen(socketPath, resolve))
  return {
    socketPath,
    calls,
    async close() {
      await Promise.all([...containers.values()].map((c) => stop(c, 1)))
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
