/**
 * The floor: a bare reverse proxy on undici `Pool.stream`, about what Node itself can do per hop.
 * No routing, no plugins, no metrics; only hop-by-hop headers are stripped and client aborts abort
 * the upstream request.
 *
 * Usage: node --import tsx bench/bare-undici-proxy.ts --upstream http://127.0.0.1:PORT [--port 0]
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Pool } from 'undici'
import { argValue } from './lib/args.ts'

const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'host'])
const pool = new Pool(argValue(process.argv, 'upstream')!, { connections: 64, pipelining: 1 })

function withoutHop(headers: Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {}
  for (const name in headers) if (!HOP.has(name) && headers[name] !== undefined) out[name] = headers[name]!
  return out
}

const server = createServer((req, res) => {
  const hasBody = req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined
  const abort = new AbortController()
  res.once('close', () => { if (!res.writableFinished) abort.abort() })
  pool.stream(
    { path: req.url!, method: req.method as 'GET', headers: withoutHop(req.headers), body: hasBody ? req : null, signal: abort.signal },
    ({ statusCode, headers }) => {
      res.writeHead(statusCode, withoutHop(headers))
      return res
    },
    (error) => {
      if (!error) return
      if (res.headersSent) return void res.destroy()
      res.writeHead(502, { 'content-type': 'application/json' }).end('{"error":"bad_gateway"}')
    },
  )
})
server.listen(Number(argValue(process.argv, 'port') ?? 0), '127.0.0.1', () => {
  console.log(JSON.stringify({ ready: true, port: (server.address() as AddressInfo).port }))
})
process.on('SIGTERM', () => void pool.close().finally(() => process.exit(0)))
