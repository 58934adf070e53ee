/**
 * The common off-the-shelf choice: fastify 5 + @fastify/http-proxy (reply-from over undici).
 *
 * Usage: node --import tsx bench/fastify-proxy.ts --upstream http://127.0.0.1:PORT [--port 0]
 */
import Fastify from 'fastify'
import proxy from '@fastify/http-proxy'
import type { AddressInfo } from 'node:net'
import { argValue } from './lib/args.ts'

const app = Fastify({ logger: false })
await app.register(proxy, {
  upstream: argValue(process.argv, 'upstream')!,
  prefix: '/',
  undici: { connections: 64, pipelining: 1 },
})
await app.listen({ host: '127.0.0.1', port: Number(argValue(process.argv, 'port') ?? 0) })
console.log(JSON.stringify({ ready: true, port: (app.server.address() as AddressInfo).port }))
process.on('SIGTERM', () => void app.close().finally(() => process.exit(0)))
