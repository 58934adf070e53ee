/**
 * A test upstream on 127.0.0.1:0 that records what it received and can misbehave on demand:
 * `/slow-headers?ms=`, `/reset-mid-body`, `/status/:code`, `/stream?chunks=&delay=`, `/set-cookie` (sets
 * `tollgate_session` and `upstream_pref`), anything else echoes.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'

export interface Received {
  method: string
  url: string
  headers: IncomingMessage['headers']
  body: Buffer
}

export interface TestUpstream {
  url: string
  port: number
  received: Received[]
  /** URLs of requests whose connection closed before the upstream answered. */
  aborted: string[]
  close(): Promise<void>
}

export async function startTestUpstream(): Promise<TestUpstream> {
  const received: Received[] = []
  const aborted: string[] = []
  const sockets = new Set<Socket>()
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', () => {
      const body = Buffer.concat(chunks)
      received.push({ method: req.method!, url: req.url!, headers: req.headers, body })
      const url = new URL(req.url!, 'http://x')
      if (url.pathname.endsWith('/slow-headers')) {
        const timer = setTimeout(() => res.end('late'), Number(url.searchParams.get('ms') ?? 2000))
        res.on('close', () => {
          clearTimeout(timer)
          if (!res.writableFinished) aborted.push(req.url!)
        })
        return
      }
      if (url.pathname.endsWith('/reset-before-answer')) return void req.socket.destroy()
      if (url.pathname.endsWith('/set-cookie')) {
        // An upstream that tries to set the gateway's session cookie beside one of its own.
        res.writeHead(200, { 'content-type': 'application/json', 'set-cookie': ['tollgate_session=forged-by-upstream; Path=/; HttpOnly', 'upstream_pref=dark; Path=/'] })
        return void res.end('{"cookies":"set"}')
      }
      if (url.pathname.endsWith('/reset-mid-body')) {
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '1000' })
        res.write('partial')
        setTimeout(() => req.socket.destroy(), 20)
        return
      }
      const status = url.pathname.match(/\/status\/(\d{3})$/)
      if (status) {
        res.writeHead(Number(status[1]), { 'content-type': 'application/json' })
        return void res.end(JSON.stringify({ status: Number(status[1]) }))
      }
      if (url.pathname.endsWith('/stream')) {
        const count = Number(url.searchParams.get('chunks') ?? 5)
        const delay = Number(url.searchParams.get('delay') ?? 10)
        res.writeHead(200, { 'content-type': 'text/plain' })
        let sent = 0
        const tick = () => {
          if (res.destroyed) return
          if (sent++ === count) return void res.end()
          res.write(`chunk${sent}\n`)
          setTimeout(tick, delay)
        }
        return tick()
      }
      res.writeHead(200, { 'content-type': 'application/json', connection: 'keep-alive', 'keep-alive': 'timeout=77', 'x-upstream': 'yes' })
      res.end(JSON.stringify({ method: req.method, url: req.url, bytes: body.length }))
    })
  })
  server.on('connection', (socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    received,
    aborted,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      }),
  }
}

/** A port on which nothing listens (bound then released). */
export async function closedPort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}
