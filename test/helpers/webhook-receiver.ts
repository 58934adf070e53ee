/**
 * A webhook receiver on 127.0.0.1:0 for alert tests: records every POST (headers, raw body, time)
 * and answers the statuses of `script` in turn (then 200 for ever), so a test can make it fail a
 * few times before it succeeds.
 */
import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface ReceivedHook {
  at: number
  headers: IncomingHttpHeaders
  body: string
  /** What the receiver answered. */
  status: number
}

export interface WebhookReceiver {
  url: string
  received: ReceivedHook[]
  close(): Promise<void>
}

export async function startWebhookReceiver(script: number[] = []): Promise<WebhookReceiver> {
  const received: ReceivedHook[] = []
  const plan = [...script]
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const status = plan.shift() ?? 200
      received.push({ at: Date.now(), headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), status })
      res.writeHead(status, { 'content-type': 'text/plain' }).end(status < 300 ? 'ok' : 'try again')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}/hooks/tollgate`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
