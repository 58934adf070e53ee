/**
 * A JSON-RPC target with faults, for pool tests: it records the methods of every request it gets
 * and, per request, either answers with an HTTP status of its own (e.g. 503, as a node behind a
 * busy load balancer) or forwards the body unchanged to a real node. `answer` decides from the
 * methods of the request (a batch gives several); `delayMs` holds the answer back (a slow node).
 */
import { createServer, type Server } from 'node:http'
import { Agent, request } from 'undici'

export interface FaultyRpc {
  url: string
  /** Methods of every request received, in order (a batch's entries one after another). */
  methods: string[]
  /** HTTP requests received. */
  requests(): number
  close(): Promise<void>
}

/**
 * @example
 * ```ts
 * // 503 for every send, every read forwarded to the chain:
 * const rpc = await startFaultyRpc(chain.rpcUrl, (methods) => (methods.includes('eth_sendRawTransaction') ? 503 : undefined))
 * ```
 */
export async function startFaultyRpc(
  nodeUrl: string | undefined, answer: (methods: string[]) => number | undefined, delayMs: (methods: string[]) => number = () => 0,
): Promise<FaultyRpc> {
  const agent = new Agent({ connections: 16 })
  const methods: string[] = []
  let requests = 0
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const body = Buffer.concat(chunks)
    requests++
    let seen: string[] = []
    try {
      const parsed: unknown = JSON.parse(body.toString())
      seen = (Array.isArray(parsed) ? parsed : [parsed]).map((call) => String((call as { method?: unknown })?.method))
    } catch {
      seen = ['?']
    }
    methods.push(...seen)
    // A slow node: the head comes after this long (the body is forwarded as usual).
    const delay = delayMs(seen)
    if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay))
    const status = answer(seen)
    if (status !== undefined || !nodeUrl) {
      res.writeHead(status ?? 503, { 'content-type': 'text/plain' }).end('unavailable')
      return
    }
    try {
      const upstream = await request(nodeUrl, { method: 'POST', body, headers: { 'content-type': 'application/json' }, dispatcher: agent })
      const text = Buffer.from(await upstream.body.arrayBuffer())
      res.writeHead(upstream.statusCode, { 'content-type': 'application/json' }).end(text)
    } catch {
      res.writeHead(502).end()
    }
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  return {
    url: `http://127.0.0.1:${port}`,
    methods,
    requests: () => requests,
    async close() {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      await agent.close()
    },
  }
}
