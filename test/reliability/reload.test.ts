/**
 * Reloads under load: the config is replaced again and again (file change, SIGHUP, POST
 * /admin/reload in turn) while clients keep sending metered requests. No request fails, every
 * reload succeeds, and the last config is the one in force.
 */
import t from 'tap'
import { Pool, request } from 'undici'
import { startGatewayProcess } from '../helpers/gateway-process.ts'
import { ADMIN_TOKEN, KEY, startUpstreams, suiteConfig } from './harness/environment.ts'
import { creditsUsed, metric } from './harness/admin.ts'
import { FILE_TIMEOUT_MS, scale, START_TIMEOUT_MS } from './harness/scale.ts'

t.setTimeout(FILE_TIMEOUT_MS)

const CONNECTIONS = 16

async function waitForReloads(adminUrl: string, count: number, timeoutMs = 15000): Promise<number> {
  const until = Date.now() + timeoutMs
  for (;;) {
    const done = await metric(adminUrl, 'tollgate_config_reloads_total', { result: 'success' })
    if (done >= count || Date.now() > until) return done
    await new Promise((r) => setTimeout(r, 50))
  }
}

t.test(`${scale.reloads} reloads under load: no failed request`, async (t) => {
  const up = await startUpstreams()
  // Each reload changes the project's allocation, so every new config really differs from the last.
  const config = (n: number) => suiteConfig(up, { allocation: 1_000_000_000 + n, cost: n === scale.reloads ? 2 : 1 })
  const gw = await startGatewayProcess(config(0), { startTimeoutMs: START_TIMEOUT_MS })
  const pool = new Pool(gw.url, { connections: CONNECTIONS, pipelining: 1 })
  t.teardown(async () => {
    await pool.destroy()
    await gw.stop()
    await up.close()
  })
  // Warm-up, so the first reload does not land before the first answer.
  for (let i = 0; i < 20; i++) await (await pool.request({ path: `/privnet/rpc/${KEY}?method=system_chain&params=%5B%5D&id=1`, method: 'GET' })).body.text()
  const baseline = await metric(gw.adminUrl, 'tollgate_config_reloads_total', { result: 'success' })
  let stop = false
  let ok = 0
  const failed: string[] = []
  const worker = async (lane: number) => {
    let i = 0
    while (!stop) {
      const paths = [`/privnet/rpc/${KEY}?method=system_chain&params=%5B%5D&id=${lane}`, '/ledger/testnet/api/v1/accounts?limit=1']
      try {
        const res = await pool.request({ path: paths[i++ % 2], method: 'GET', headers: { 'x-api-key': KEY } })
        const body = await res.body.text()
        if (res.statusCode === 200) ok++
        else failed.push(`${res.statusCode} ${body.slice(0, 100)}`)
      } catch (error) {
        failed.push(String(error))
      }
    }
  }
  const load = Promise.all(Array.from({ length: CONNECTIONS }, (_, lane) => worker(lane)))
  const how = ['file change', 'SIGHUP', 'POST /admin/reload'] as const
  const slow: string[] = []
  for (let n = 1; n <= scale.reloads; n++) {
    const way = how[n % how.length]
    gw.writeConfig(config(n))
    if (way === 'SIGHUP') gw.child.kill('SIGHUP')
    if (way === 'POST /admin/reload') {
      const res = await request(`${gw.adminUrl}/admin/reload`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
      await res.body.text()
    }
    const done = await waitForReloads(gw.adminUrl, baseline + n)
    if (done < baseline + n) slow.push(`reload ${n} (${way}) not done within 15 s`)
  }
  stop = true
  await load
  t.same(slow, [], 'every reload completed')
  t.same(failed.slice(0, 5), [], `no failed request (${failed.length} of ${ok + failed.length})`)
  t.equal(await metric(gw.adminUrl, 'tollgate_config_reloads_total', { result: 'failure' }), 0, 'no reload failed')
  t.ok(ok >= scale.reloads, `requests ran throughout (${ok} answered during ${scale.reloads} reloads)`)

  const before = await creditsUsed(gw.adminUrl)
  const res = await pool.request({ path: `/privnet/rpc/${KEY}?method=system_chain&params=%5B%5D&id=1`, method: 'GET' })
  await res.body.text()
  t.equal((await creditsUsed(gw.adminUrl)) - before, 2, 'the last config (cost 2) is in force')
  t.comment(`figure: ${scale.reloads} reloads under load, ${ok} requests, ${failed.length} failed`)
})
