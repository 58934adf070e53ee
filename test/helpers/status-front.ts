/**
 * An HTTP front for a real stand-in upstream that injects faults an upstream answers with rather
 * than ones of the connection (those are test/reliability/harness/fault-proxy.ts): 503, 429 with
 * Retry-After, a slow head, and a slow tail (a share of the answers delayed). Every request that
 * reaches the front is counted, whether or not it is relayed.
 */
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { request } from 'undici'

export type FrontMode = 'pass' | '503' | '429' | 'slow-head'

export interface StatusFront {
  url: string
  mode: FrontMode
  /** Delay of `slow-head`, and of the slow share of `slowShare`, ms. */
  delayMs: number
  /** Share (0..1) of answers delayed by delayMs in every mode (the slow tail); deterministic: every 1/share-th. */
  slowShare: number
  /** Retry-After seconds of `429`. */
  retryAfterS: number
  hits: number
  close(): Promise<void>
}

export async function startStatusFront(target: string): Promise<StatusFront> {
  let server: Server
  const front: StatusFront = {
    url: '',
    mode: 'pass',
    delayMs: 500,
    slowShare: 0,
    retryAfterS: 1,
    hits: 0,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    }),
  }
  server = createServer(async (req, res) => {
    const n = ++front.hits
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    if (front.mode === '503') return res.writeHead(503, { 'content-type': 'text/plain' }).end('busy')
    if (front.mode === '429') return res.writeHead(429, { 'retry-after': String(front.retryAfterS) }).end('slow down')
    const slow = front.mode === 'slow-head' || (front.slowShare > 0 && n % Math.round(1 / front.slowShare) === 0)
    if (slow) await new Promise((r) => setTimeout(r, front.delayMs))
    try {
      const headers = { ...req.headers }
      delete headers.host
      delete headers.connection
      const up = await request(target + req.url, { method: req.method as any, headers, body: chunks.length ? Buffer.concat(chunks) : undefined })
      const body = Buffer.from(await up.body.arrayBuffer())
      const out: Record<string, string | string[]> = {}
      for (const [k, v] of Object.entries(up.headers)) if (v !== undefined && k !== 'transfer-encoding' && k !== 'connection' && k !== 'content-length') out[k] = v
      res.writeHead(up.statusCode, out).end(body)
    } catch {
      if (!res.headersSent) res.writeHead(599).end()
    }
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  front.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return front
}
