/**
 * Durability under load: `kill -9` of a loaded gateway, cycle after cycle on the same data dir,
 * comparing every acknowledged answer with the ledger and with the stored event items; and bursts
 * of 1,000 concurrent requests on a balance of 100, each served exactly 100 times.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { Pool } from 'undici'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { KEY, SECRET, startUpstreams, suiteConfig } from './harness/environment.ts'
import { creditsUsed } from './harness/admin.ts'
import { FILE_TIMEOUT_MS, scale, START_TIMEOUT_MS } from './harness/scale.ts'

t.setTimeout(FILE_TIMEOUT_MS)

const CONNECTIONS = 24

t.test(`kill -9 under load, ${scale.killCycles} cycles: every acknowledged charge and item survives, nothing more is charged`, async (t) => {
  const up = await startUpstreams()
  const text = suiteConfig(up)
  let gw: GatewayProcess = await startGatewayProcess(text, { startTimeoutMs: START_TIMEOUT_MS })
  const dir = gw.dir
  t.teardown(async () => {
    await gw.stop()
    await up.close()
  })
  let acked = 0 // 2xx heads received: each is a charge the client was told about
  let unanswered = 0 // requests in flight at a kill: each may or may not have been charged
  const ackedItems = new Set<string>()
  const maybeItems = new Set<string>()
  let run = 0
  for (let cycle = 0; cycle < scale.killCycles; cycle++) {
    const pool = new Pool(gw.url, { connections: CONNECTIONS, pipelining: 1 })
    let ackedThisCycle = 0
    let other = 0
    let killed = false
    const worker = async () => {
      while (!killed) {
        const kind = run++ % 3
        const itemId = `0.0.${100000 + run}`
        const request =
          kind === 0
            ? { path: `/privnet/rpc/${KEY}?method=system_chain&params=%5B%5D&id=1`, method: 'GET' as const }
            : kind === 1
              ? {
                  path: `/events/ledger/create/account/${KEY}`,
                  method: 'POST' as const,
                  headers: { 'x-api-secret': SECRET, 'content-type': 'application/json' },
                  body: JSON.stringify({ scoutSettings: { item_id: itemId, network_id: 296 } }),
                }
              : { path: '/ledger/testnet/api/v1/accounts?limit=1', method: 'GET' as const, headers: { 'x-api-key': KEY } }
        try {
          const res = await pool.request(request)
          if (res.statusCode >= 200 && res.statusCode < 300) {
            acked++
            ackedThisCycle++
            if (kind === 1) ackedItems.add(itemId)
          } else other++
          await res.body.text().catch(() => {})
        } catch {
          unanswered++
          if (kind === 1) maybeItems.add(itemId)
        }
        if (ackedThisCycle >= scale.answersPerCycle && !killed) {
          killed = true
          gw.child.kill('SIGKILL')
        }
      }
    }
    await Promise.all(Array.from({ length: CONNECTIONS }, worker))
    await pool.destroy()
    t.equal(await gw.exited, null, `cycle ${cycle + 1}: the gateway died of SIGKILL`)
    t.equal(other, 0, `cycle ${cycle + 1}: every answer before the kill was a 2xx`)
    gw = await startGatewayProcess(text, { dir, startTimeoutMs: START_TIMEOUT_MS })
    const used = await creditsUsed(gw.adminUrl)
    if (used < acked || used > acked + unanswered) {
      t.fail(`cycle ${cycle + 1}: ledger ${used} outside [${acked} acknowledged, ${acked + unanswered} with the ${unanswered} in flight at kills]`)
    }
  }
  const used = await creditsUsed(gw.adminUrl)
  t.ok(used >= acked, `no lost charge: ledger ${used} >= ${acked} acknowledged 2xx answers`)
  t.ok(used <= acked + unanswered, `no doubled charge: ledger ${used} <= ${acked} + ${unanswered} requests in flight at the kills`)

  const list = await fetch(`${gw.url}/events/ledger/settings/${KEY}`, { method: 'POST', headers: { 'x-api-secret': SECRET, 'content-type': 'application/json' }, body: '{}' })
  t.equal(list.status, 200, 'the items are listed after the last restart')
  const stored = new Set(((await list.json()) as { item_id: string }[]).map((item) => item.item_id))
  const lost = [...ackedItems].filter((id) => !stored.has(id))
  t.same(lost, [], `no lost event item: all ${ackedItems.size} acknowledged items are stored`)
  const unexpected = [...stored].filter((id) => !ackedItems.has(id) && !maybeItems.has(id))
  t.same(unexpected, [], `no item that was never requested (${stored.size} stored, ${maybeItems.size} were in flight at kills)`)
  t.comment(`figure: ${acked} acknowledged charges across ${scale.killCycles} kill -9 cycles; ledger ${used}; ${unanswered} in flight at kills; ${ackedItems.size} items acknowledged, 0 lost`)
})

t.test(`${scale.bursts} bursts of 1,000 concurrent requests on 100 credits: each served exactly 100`, async (t) => {
  const up = await startUpstreams()
  const projects = Array.from({ length: scale.bursts }, (_, i) => ({ id: `burst${i}`, key: `bk_${i}_${randomBytes(12).toString('hex')}`, allocation: 100 }))
  const gw = await startGatewayProcess(suiteConfig(up, { extraProjects: projects }), { startTimeoutMs: START_TIMEOUT_MS })
  const pool = new Pool(gw.url, { connections: 250, pipelining: 1 })
  t.teardown(async () => {
    await pool.destroy()
    await gw.stop()
    await up.close()
  })
  const wrong: string[] = []
  for (const project of projects) {
    const answers = await Promise.all(
      Array.from({ length: 1000 }, async () => {
        const res = await pool.request({ path: `/privnet/rpc/${project.key}?method=system_chain&params=%5B%5D&id=1`, method: 'GET' })
        await res.body.text()
        return res.statusCode
      }),
    )
    const served = answers.filter((s) => s === 200).length
    const refused = answers.filter((s) => s === 402).length
    const used = await creditsUsed(gw.adminUrl, project.id)
    if (served !== 100 || refused !== 900 || used !== 100) wrong.push(`${project.id}: ${served} served, ${refused} refused, ledger ${used}`)
  }
  t.same(wrong, [], `every burst served exactly 100, refused 900 with 402, and charged 100`)
  t.comment(`figure: ${scale.bursts} bursts of 1,000 requests on 100 credits`)
})
