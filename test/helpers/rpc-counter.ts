/**
 * A counting proxy in front of a JSON-RPC endpoint: tests and benches point a client at `url` and
 * read how many HTTP round trips and how many JSON-RPC calls (a batch counts each entry) it made.
 * Bodies are forwarded unchanged, so the chain answers exactly as it would directly.
 */
import { createServer, type Server } from 'node:http'
import { Agent, request } from 'undici'

export interface RpcCounts {
  /** HTTP requests, i.e. round trips to the node. */
  roundTrips: number
  /** JSON-RPC calls, each entry of a batch counted. */
  calls: number
  /** Calls per JSON-RPC method. */
  byMethod: Record<string, number>
}

export interface RpcCounter {
  /** Point the client here instead of at the node. */
  url: string
  /** What was counted since the start or the last reset. */
  counts(): RpcCounts
  reset(): void
  close(): Promise<void>
}

/**
 * Starts the proxy on 127.0.0.1 (any free port) in front of `targetUrl`.
 *
 * @example
 * ```ts
 * const counter = await startRpcCounter(chain.rpcUrl)
 * await verifyExact(contextVia(counter.url), body)
 * console.log(counter.counts()) // { roundTrips: 1, calls: 4, byMethod: { eth_getCode: 1, eth_call: 3 } }
 * ```
 */
export async function startRpcCounter(targetUrl: string): Promise<RpcCounter> {
  const agent = new Agent({ connections: 64 })
  let counts: RpcCounts = { roundTrips: 0, calls: 0, byMethod: {} }
  const count = (entry: unknown) => {
    counts.calls++
    const method = typeof (entry as { method?: unknown })?.method === 'string' ? (entry as { method: string }).method : '?'
    counts.byMethod[method] = (counts.byMethod[method] ?? 0) + 1
  }
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const body = Buffer.concat(chunks)
    counts.roundTrips++
    try {
      const parsed: unknown = JSON.parse(body.toString())
      if (Array.isArray(parsed)) parsed.forEach(count)
      else count(parsed)
    } catch {
      count(undefined)
    }
    try {
      const upstream = await request(targetUrl, {
        method: 'POST', body, headers: { 'content-type': 'application/json' }, dispatcher: agent,
      })
      const answer = Buffer.from(await upstream.body.arrayBuffer())
      res.writeHead(upstream.statusCode, { 'content-type': 'application/json' }).end(answer)
    } catch {
      res.writeHead(502).end()
    }
  })
  server.keepAliveTimeout = 5_000
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  return {
    url: `http://127.0.0.1:${port}`,
    counts: () => ({ ...counts, byMethod: { ...counts.byMethod } }),
    reset() {
      counts = { roundTrips: 0, calls: 0, byMethod: {} }
    },
    async close() {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      await agent.close()
    },
  }
}
