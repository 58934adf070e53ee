/**
 * A TCP relay on 127.0.0.1 in front of one real upstream that injects one kind of fault into every
 * connection opened while that fault is set. The gateway opens a fresh connection for each faulty
 * exchange (each fault ends or poisons its connection), so one mode applies to one exchange.
 *
 * - `refuse`: nothing listens on the port (connect gets ECONNREFUSED);
 * - `reset-before-head`: the request reaches the upstream, the connection is reset before any byte of the answer;
 * - `reset-after-head`: the answer's head and part of its body are relayed, then the connection is reset;
 * - `stall-head`: the request is swallowed and nothing is ever answered;
 * - `stall-body`: the head and part of the body are relayed, then nothing more;
 * - `garbage`: bytes that are not HTTP are answered;
 * - `bad-length`: the head announces far more bytes than are sent before the connection closes.
 */
import { createServer, connect, type Server, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'

export const FAULTS = ['refuse', 'reset-before-head', 'reset-after-head', 'stall-head', 'stall-body', 'garbage', 'bad-length'] as const
export type Fault = (typeof FAULTS)[number]
export type ProxyMode = 'pass' | Fault

/** How the fault relates to the answer's head: the gateway can answer 502/504 only before it. */
export const AFTER_HEAD: ReadonlySet<Fault> = new Set(['reset-after-head', 'stall-body', 'bad-length'])

export interface FaultProxy {
  url: string
  port: number
  /** Sets the mode for connections opened from now on; open connections are closed. */
  setMode(mode: ProxyMode): Promise<void>
  /** Connections opened per mode so far. */
  connections: Record<string, number>
  close(): Promise<void>
}

const HEAD_END = Buffer.from('\r\n\r\n')

/** Destroys with a TCP RST where the platform allows it, so the peer sees a reset and not a close. */
function reset(socket: Socket): void {
  if (socket.destroyed) return
  if (typeof socket.resetAndDestroy === 'function') socket.resetAndDestroy()
  else socket.destroy()
}

export async function startFaultProxy(target: string): Promise<FaultProxy> {
  const upstream = new URL(target)
  const live = new Set<Socket>()
  const connections: Record<string, number> = {}
  let mode: ProxyMode = 'pass'
  let server: Server

  const onConnection = (client: Socket) => {
    const connectionMode = mode
    connections[connectionMode] = (connections[connectionMode] ?? 0) + 1
    live.add(client)
    client.on('close', () => live.delete(client))
    client.on('error', () => {})
    if (connectionMode === 'refuse') return reset(client)
    if (connectionMode === 'stall-head') {
      client.resume() // swallow the request; never answer
      return
    }
    if (connectionMode === 'garbage') {
      client.once('data', () => {
        client.end(Buffer.concat([Buffer.from('HTTP/1.1 2OO O\x00K\r\nx\x01y: \xff\r\n\r\n', 'latin1'), Buffer.from([0, 1, 2, 3, 255, 254])]))
      })
      return
    }
    const server = connect({ host: upstream.hostname, port: Number(upstream.port) })
    live.add(server)
    server.on('close', () => {
      live.delete(server)
      if (connectionMode === 'pass') client.end()
    })
    server.on('error', () => reset(client))
    client.on('close', () => server.destroy())
    client.pipe(server)
    if (connectionMode === 'pass') return void server.pipe(client)

    let pending = Buffer.alloc(0)
    let decided = false
    server.on('data', (chunk: Buffer) => {
      if (decided) return // stall-body: the rest is dropped
      if (connectionMode === 'reset-before-head') {
        decided = true
        return reset(client)
      }
      pending = Buffer.concat([pending, chunk])
      const end = pending.indexOf(HEAD_END)
      if (end === -1) return
      decided = true
      let head = pending.subarray(0, end + 4).toString('latin1')
      const body = pending.subarray(end + 4)
      // Half of what arrived of the body (at least nothing, at most all but one byte).
      const part = body.subarray(0, Math.max(0, Math.min(body.length - 1, Math.ceil(body.length / 2))))
      if (connectionMode === 'bad-length') {
        head = head.replace(/\r\ntransfer-encoding:[^\r]*/i, '').replace(/\r\ncontent-length:[^\r]*/i, '')
        head = head.replace(/\r\n\r\n$/, `\r\ncontent-length: ${body.length + 100000}\r\n\r\n`)
        client.write(Buffer.from(head, 'latin1'))
        client.write(body)
        setTimeout(() => client.end(), 10)
        return
      }
      client.write(Buffer.concat([Buffer.from(head, 'latin1'), part]))
      if (connectionMode === 'reset-after-head') setTimeout(() => reset(client), 10)
      // stall-body: keep both sockets open and send nothing more
    })
  }

  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server = createServer({ pauseOnConnect: false }, onConnection)
      server.once('error', reject)
      server.listen(port, '127.0.0.1', () => resolve())
    })
  await listen(0)
  const port = (server!.address() as AddressInfo).port
  let listening = true

  const closeListener = () => new Promise<void>((resolve) => server.close(() => resolve()))

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    connections,
    async setMode(next) {
      for (const socket of live) socket.destroy()
      live.clear()
      if (next === 'refuse' && listening) {
        listening = false
        await closeListener()
      } else if (next !== 'refuse' && !listening) {
        await listen(port)
        listening = true
      }
      mode = next
    },
    async close() {
      for (const socket of live) socket.destroy()
      if (listening) await closeListener()
      listening = false
    },
  }
}
