/**
 * A TCP relay on 127.0.0.1 between a gateway and a server (PostgreSQL, Redis). `sever()` destroys
 * every relayed connection and stops listening, so new connections are refused (ECONNREFUSED):
 * from the gateway's side that is the server going away, without stopping a server other tests use.
 * `restore()` listens again on the same port. `stall()` keeps the connections open but stops passing
 * the server's answers on (a server that hangs); `unstall()` passes them on again.
 */
import { createServer, connect, type Server, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'

export interface TcpRelay {
  port: number
  /** `target` with its host and port replaced by the relay's (`postgres://u@127.0.0.1:<relay>/db`). */
  url(target: string): string
  sever(): Promise<void>
  restore(): Promise<void>
  close(): Promise<void>
  stall(): void
  unstall(): void
  /** Connections relayed so far. */
  readonly accepted: number
}

export async function startTcpRelay(targetHost: string, targetPort: number): Promise<TcpRelay> {
  const sockets = new Set<Socket>()
  /** Server side → client side of each relayed connection. */
  const pairs = new Map<Socket, Socket>()
  let stalled = false
  let accepted = 0
  const onConnection = (client: Socket) => {
    accepted++
    const server = connect(targetPort, targetHost)
    sockets.add(client)
    sockets.add(server)
    const drop = () => {
      client.destroy()
      server.destroy()
      sockets.delete(client)
      sockets.delete(server)
      pairs.delete(server)
    }
    client.on('error', drop).on('close', drop)
    server.on('error', drop).on('close', drop)
    client.pipe(server)
    pairs.set(server, client)
    if (!stalled) server.pipe(client)
  }
  let server: Server = createServer(onConnection)
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  let listening = true
  const stop = async () => {
    if (!listening) return
    listening = false
    const closed = new Promise<void>((resolve) => server.close(() => resolve()))
    for (const socket of sockets) socket.destroy()
    sockets.clear()
    await closed
  }
  return {
    port,
    get accepted() {
      return accepted
    },
    url(target) {
      const url = new URL(target)
      url.hostname = '127.0.0.1'
      url.port = String(port)
      return url.toString()
    },
    sever: stop,
    async restore() {
      if (listening) return
      server = createServer(onConnection)
      await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', resolve))
      listening = true
    },
    close: stop,
    stall() {
      stalled = true
      for (const [server, client] of pairs) {
        server.unpipe(client)
        server.pause()
      }
    },
    unstall() {
      stalled = false
      for (const [server, client] of pairs) server.pipe(client)
    },
  }
}
