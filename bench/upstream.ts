/**
 * The benchmark's upstream: a plain node:http server answering every request with the same
 * 200-byte JSON body. Runs as its own process so its CPU is measured apart from the proxy's.
 *
 * Usage: node --import tsx bench/upstream.ts [--port 0]
 * Prints one JSON line `{"ready":true,"port":N}` on stdout once it listens on 127.0.0.1.
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { argValue } from './lib/args.ts'
import { body200 } from './lib/upstream-body.ts'

// Built once: the benchmark measures the hop, not serialisation.
const BODY = body200()
const HEADERS = { 'content-type': 'application/json', 'content-length': String(BODY.length) }

const server = createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
  // Drain any request body before answering so keep-alive sockets stay reusable.
  req.resume()
  res.writeHead(200, HEADERS)
  res.end(BODY)
})
server.listen(Number(argValue(process.argv, 'port') ?? 0), '127.0.0.1', () => {
  console.log(JSON.stringify({ ready: true, port: (server.address() as AddressInfo).port }))
})
process.on('SIGTERM', () => {
  server.close()
  server.closeAllConnections()
})
