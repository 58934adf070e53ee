/**
 * The soak: many metered requests over kept-alive connections with the gateway's RSS and open
 * descriptors sampled along the way; both must stay flat. And slow clients: connections that send
 * their headers a byte at a time are cut at the headers deadline while other clients are served.
 */
import t from 'tap'
import { connect, type Socket } from 'node:net'
import { Pool } from 'undici'
import { buildProvePayload } from '../../examples/upstreams/tagged.ts'
import { startGatewayProcess } from '../helpers/gateway-process.ts'
import { KEY, startUpstreams, suiteConfig } from './harness/environment.ts'
import { creditsUsed } from './harness/admin.ts'
import { fdCount, HAS_PROC, rssKiB, settledFdCount } from './harness/process-stats.ts'
import { FILE_TIMEOUT_MS, scale, START_TIMEOUT_MS } from './harness/scale.ts'

t.setTimeout(FILE_TIMEOUT_MS)

const CONNECTIONS = 32
const PROVE = buildProvePayload(Buffer.from('soak'))

t.test(`soak of ${scale.soakRequests} requests after ${scale.soakWarmup} to warm up: RSS and fds stay flat, every request answered and charged once`, { skip: !HAS_PROC && 'needs /proc' }, async (t) => {
  const up = await startUpstreams()
  const gw = await startGatewayProcess(suiteConfig(up), { startTimeoutMs: START_TIMEOUT_MS })
  const pool = new Pool(gw.url, { connections: CONNECTIONS, pipelining: 1 })
  t.teardown(async () => {
    await pool.destroy()
    await gw.stop()
    await up.close()
  })
  const pid = gw.child.pid!
  const requests = [
    { path: `/privnet/rpc/${KEY}?method=system_chain&params=%5B%5D&id=1`, method: 'GET' as const },
    { path: '/ledger/testnet/api/v1/accounts?limit=2', method: 'GET' as const, headers: { 'x-api-key': KEY } },
    { path: `/privnet/zkpaas/${KEY}/prove`, method: 'POST' as const, headers: { 'content-type': 'application/octet-stream' }, body: PROVE },
    { path: `/privnet/rpc/${KEY}`, method: 'POST' as const, headers: { 'content-type': 'application/json' }, body: '{"jsonrpc":"2.0","id":1,"method":"chain_getHeader","params":[]}' },
  ]
  const samples: { done: number; rss: number; fd: number }[] = []
  const every = Math.max(1, Math.floor(scale.soakRequests / 40))
  const total = scale.soakWarmup + scale.soakRequests
  let issued = 0
  let done = 0
  const failed: string[] = []
  let started = Date.now()
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (issued < total) {
        const request = requests[issued++ % requests.length]
        try {
          const res = await pool.request(request)
          await res.body.arrayBuffer()
          if (res.statusCode !== 200) failed.push(`${request.path.slice(0, 40)} → ${res.statusCode}`)
        } catch (error) {
          failed.push(`${request.path.slice(0, 40)} → ${error}`)
        }
        if (++done === scale.soakWarmup) started = Date.now()
        if (done > scale.soakWarmup && (done - scale.soakWarmup) % every === 0) samples.push({ done: done - scale.soakWarmup, rss: rssKiB(pid), fd: fdCount(pid) })
      }
    }),
  )
  const seconds = (Date.now() - started) / 1000
  t.same(failed.slice(0, 5), [], `every request answered 200 (${failed.length} did not)`)
  t.equal(await creditsUsed(gw.adminUrl), total, 'the ledger holds exactly one credit per request')

  // The warm-up (scale.soakWarmup, unsampled) sizes the heap; the first fifth of the samples still
  // settles JIT, pools and caches; from then on the figures must stay flat.
  const steady = samples.slice(Math.floor(samples.length / 5))
  const first = steady[0]
  const peakRss = Math.max(...steady.map((s) => s.rss))
  const lastQuarter = steady.slice(Math.floor((steady.length * 3) / 4))
  const endRss = lastQuarter.reduce((sum, s) => sum + s.rss, 0) / lastQuarter.length
  const growthMiB = (endRss - first.rss) / 1024
  t.comment(`figure: ${scale.soakRequests} requests in ${seconds.toFixed(0)} s (${(scale.soakRequests / seconds).toFixed(0)}/s); RSS ${(first.rss / 1024).toFixed(1)} MiB after warm-up, ${(endRss / 1024).toFixed(1)} MiB at the end (peak ${(peakRss / 1024).toFixed(1)}); fds ${first.fd} → ${await settledFdCount(pid)}`)
  t.comment(`RSS samples (requests:KiB): ${samples.map((s) => `${s.done}:${s.rss}`).join(' ')}`)
  t.ok(growthMiB < 24, `RSS flat: ${growthMiB.toFixed(1)} MiB growth from warm-up to the end (limit 24 MiB)`)
  t.ok((await settledFdCount(pid)) <= first.fd + 4, 'open descriptors flat')
})

t.test(`${scale.slowConnections} slow connections are cut at the headers deadline while others are served`, { skip: !HAS_PROC && 'needs /proc' }, async (t) => {
  const up = await startUpstreams()
  const HEADERS_TIMEOUT_MS = 2000
  const gw = await startGatewayProcess(suiteConfig(up, { headersTimeoutMs: HEADERS_TIMEOUT_MS }), { startTimeoutMs: START_TIMEOUT_MS })
  const pool = new Pool(gw.url, { connections: 4 })
  const sockets: Socket[] = []
  t.teardown(async () => {
    for (const socket of sockets) socket.destroy()
    await pool.destroy()
    await gw.stop()
    await up.close()
  })
  const pid = gw.child.pid!
  const baseline = await settledFdCount(pid)
  const request = Buffer.from(`GET /privnet/rpc/${KEY}?method=system_chain&params=%5B%5D&id=1 HTTP/1.1\r\nhost: x\r\nx-pad: ${'a'.repeat(200)}\r\n\r\n`)
  let cut = 0
  let answered = 0
  const closed: Promise<void>[] = []
  for (let i = 0; i < scale.slowConnections; i++) {
    const socket = connect({ host: '127.0.0.1', port: Number(new URL(gw.url).port) })
    socket.setNoDelay(true)
    sockets.push(socket)
    let at = 0
    const drip = setInterval(() => {
      if (socket.destroyed || at >= request.length - 4) return clearInterval(drip)
      socket.write(request.subarray(at, ++at))
    }, 250)
    closed.push(
      new Promise((resolve) => {
        socket.on('data', (chunk) => {
          if (/^HTTP\/1\.1 2/.test(chunk.toString())) answered++
        })
        socket.on('error', () => {})
        socket.on('close', () => {
          clearInterval(drip)
          cut++
          resolve()
        })
      }),
    )
  }
  // Meanwhile other clients are served, promptly.
  const latencies: number[] = []
  for (let i = 0; i < 20; i++) {
    const begin = Date.now()
    const res = await pool.request({ path: `/privnet/rpc/${KEY}?method=system_chain&params=%5B%5D&id=1`, method: 'GET' })
    await res.body.text()
    latencies.push(Date.now() - begin)
    t.equal(res.statusCode, 200, `request ${i + 1} served during the slow connections`)
  }
  // The gateway checks deadlines every second: every slow connection is gone within a few seconds of it.
  const deadline = new Promise((resolve) => setTimeout(resolve, HEADERS_TIMEOUT_MS + 8000))
  await Promise.race([Promise.all(closed), deadline])
  t.equal(cut, scale.slowConnections, `every slow connection was cut by the gateway (${cut} of ${scale.slowConnections})`)
  t.equal(answered, 0, 'none of them was served')
  const after = await settledFdCount(pid)
  t.ok(after <= baseline + 4, `descriptors back to baseline (${baseline} → ${after})`)
  t.comment(`figure: ${scale.slowConnections} slow connections cut; slowest concurrent request ${Math.max(...latencies)} ms`)
})
