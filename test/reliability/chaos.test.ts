/**
 * Chaos on the shared engine (issue 26): a PostgreSQL cluster and a Redis server of the test's own
 * (test/helpers/own-servers.ts), two gateway instances and one `--workers 2` gateway, all on the
 * stock gateway.yaml (its `workstations` section included; a test project, route and low-balance
 * alert added), under a steady metered load, through:
 *
 * - a PostgreSQL restart, fast and immediate (a crash: WAL replay);
 * - a Redis restart (killed, down, back empty) and a FLUSHALL;
 * - refused leases racing draws on one period (bursts on projects of 100 credits);
 * - kill -9 of one instance.
 *
 * In every case: no process exits (but the one killed); while a server is down, every answer is
 * 200 or 503 `store_unavailable` (and nothing is served once the outage is established);
 * no 503 while the servers are up; service back within 1 s of the server's return; and, at the
 * end, every acknowledged request has exactly one committed charge, and a charge without a 200
 * only for a request that failed in flight (acknowledged ≤ ledger ≤ acknowledged + in flight).
 * The race serves exactly the allocation, with 402 for the rest and no 503.
 *
 * Short form in `npm test`; `npm run reliability` (RELIABILITY=long) repeats each fault and races
 * more bursts. A failing background task that reached `unhandledRejection` would end a process:
 * this is also the test that none does (the stock workstations tick did, on a PostgreSQL restart).
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { Pool } from 'undici'
import pg from 'pg'
import { hashCredential } from '../../core/projects/projects.ts'
import { TOKEN_LEASE_MS } from '../../core/store/shared/redis-buckets.ts'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { ownServersMissing, startOwnPostgres, startOwnRedis } from '../helpers/own-servers.ts'
import { startTestUpstream } from '../helpers/upstream.ts'
import { FILE_TIMEOUT_MS, scale, START_TIMEOUT_MS } from './harness/scale.ts'

t.setTimeout(FILE_TIMEOUT_MS)

const STOCK = readFileSync(new URL('../../gateway.yaml', import.meta.url), 'utf8')
const KEY = `tk_chaos_${randomBytes(12).toString('hex')}`
const ADMIN_TOKEN = `admin_${randomBytes(12).toString('hex')}`
const RACE_ALLOCATION = 100
const RACE_BURST = 300
const bursts = scale.long ? 12 : 2
const repeats = scale.long ? 5 : 1
const raceKeys = Array.from({ length: bursts }, (_, i) => `tk_race${i}_${randomBytes(8).toString('hex')}`)
/** How long each outage lasts (ms). */
const DOWN_MS = 1500
/**
 * Rate-limit decisions covered by tokens leased before Redis went away are admitted for
 * TOKEN_LEASE_MS from when the gateway received the lease; on a machine at load average 30 that
 * receipt can lag the cut by hundreds of ms, so such 200s are not counted as served while down.
 */
const REDIS_GRACE_MS = TOKEN_LEASE_MS + 750
/** The service must be back this soon after the server is (ms). */
const RESUME_MS = 1000

function chaosConfig(upstream: string): string {
  const projects = [
    `  - id: chaos\n    plan: enterprise\n    scopes: [rpc]\n    credits: { allocation: 1000000000, period: month }\n    keys: [{ hash: ${hashCredential(KEY)} }]\n` +
      `    alerts: { url: '${upstream}/hook', secret: chaos-alert-secret-0123456789, thresholds: [{ remaining: 10 }] }\n`,
    ...raceKeys.map((key, i) => `  - id: race-${i}\n    plan: enterprise\n    scopes: [rpc]\n    credits: { allocation: ${RACE_ALLOCATION}, period: month }\n    keys: [{ hash: ${hashCredential(key)} }]\n`),
  ].join('')
  const route = `  - name: chaos-metered
    path: /chaos/:apiKey/*rest
    rewrite: /*rest
    upstream: chaos-echo
    plugins:
      - { name: key-in-path-auth, config: { scope: rpc } }
      - { name: rate-limit, config: { by: project, capacity: 1000000, refillPerSecond: 1000000, onStoreError: deny, bucket: chaos } }
      - { name: credit-meter, config: { apiType: PRIVNET_RPC, cost: 1 } }
`
  const text = STOCK.replace('\nprojects:\n', `\nprojects:\n${projects}`)
    .replace('\nupstreams:\n', `\nupstreams:\n  chaos-echo: { url: '${upstream}', connections: 64 }\n`)
    .replaceAll('${TOLLGATE_DATA_DIR:-./data}', '{{DIR}}/data')
    // The instance a kill -9 leaves behind is reaped after 3 s instead of 10, so the ledger settles sooner.
    .replace('\nstore:\n', '\nstore:\n  instanceTimeoutMs: 3000\n')
  if (text === STOCK || !text.includes('chaos-echo') || !text.includes('id: chaos') || !text.includes('instanceTimeoutMs: 3000')) throw new Error('gateway.yaml changed shape: the chaos test cannot add its project')
  return `${text.trimEnd()}\n${route}alerts: { checkIntervalMs: 200 }\nlog: { level: info, access: false }\n`.replace(/\nlog:\n  level: info\n/, '\n')
}

interface Answer {
  gateway: string
  id: string
  /** The case running when the request was sent (the per-case ledger counts). */
  case: string
  status: number | 'error'
  code?: string
  sentAt: number
  at: number
}

interface Target {
  name: string
  pool: Pool
  alive: boolean
}

/** The case under way; each answer is counted under the case it was sent in. */
let currentCase = 'start'

async function send(target: Target, path: string, id: string): Promise<Answer> {
  const sentAt = Date.now()
  const caseName = currentCase
  try {
    const res = await target.pool.request({ path, method: 'GET', headers: { 'x-request-id': id } })
    const body = await res.body.text()
    let code: string | undefined
    if (res.statusCode >= 400) {
      try {
        code = (JSON.parse(body) as { error?: { code?: string } }).error?.code
      } catch {
        code = body.slice(0, 40)
      }
    }
    return { gateway: target.name, id, case: caseName, status: res.statusCode, code, sentAt, at: Date.now() }
  } catch {
    return { gateway: target.name, id, case: caseName, status: 'error', sentAt, at: Date.now() }
  }
}

/** An outage: the server went down at `from` (stop returned) and was back at `to` (start returned). */
interface Outage {
  name: string
  /** When the fault was started (stop called) and when it was over with the server back. */
  began: number
  from: number
  to: number
  /** Answers admitted from what was leased before the cut (Redis token leases) for this long. */
  graceMs: number
  /** A gateway killed in this case: its failed requests are expected. */
  killed?: string
  /**
   * When the restart was asked for: the server may accept connections from then on, before its
   * start command returns (`pg_ctl start -w` polls), so only answers before it count as served down.
   */
  restarting?: number
}

interface Verdict {
  answers: number
  ok: number
  unavailable: number
  /** Every answer against the rules, each kind also counted below. */
  wrong: string[]
  /** 200 (or anything but 503 store_unavailable) while the server was down. */
  notUnavailableWhileDown: number
  /** 503 store_unavailable while every server was up. */
  unavailableWhileUp: number
  /** Gateway processes (or workers) that exited during the case, the one killed on purpose aside. */
  exited: string[]
  resumeMs?: number
}

/** Checks the answers of one case against the rules at the top of this file. */
function judge(answers: Answer[], outage: Outage): Verdict {
  const verdict: Verdict = { answers: answers.length, ok: 0, unavailable: 0, wrong: [], notUnavailableWhileDown: 0, unavailableWhileUp: 0, exited: [] }
  const downFrom = outage.from + outage.graceMs
  for (const a of answers) {
    const overlapsOutage = a.at >= outage.began && a.sentAt <= outage.to + RESUME_MS
    if (a.status === 200) {
      verdict.ok++
      if (a.sentAt >= downFrom && a.at < (outage.restarting ?? outage.to)) verdict.notUnavailableWhileDown++, verdict.wrong.push(`${a.id} served while the server was down (sent ${a.sentAt - outage.from} ms after the cut, answered ${(outage.restarting ?? outage.to) - a.at} ms before the restart)`)
    } else if (a.status === 503 && a.code === 'store_unavailable') {
      verdict.unavailable++
      if (!overlapsOutage) verdict.unavailableWhileUp++, verdict.wrong.push(`${a.id} 503 while the servers were up (sent ${a.sentAt - outage.to} ms after the return)`)
    } else if (a.status === 'error' && a.gateway === outage.killed && a.at >= outage.began) {
      // In flight to (or sent to) the process killed.
    } else {
      if (a.at >= outage.from && a.sentAt <= outage.to) verdict.notUnavailableWhileDown++
      else if (a.status === 503) verdict.unavailableWhileUp++
      verdict.wrong.push(`${a.id} on ${a.gateway}: ${a.status} ${a.code ?? ''}`)
    }
  }
  const back = answers.filter((a) => a.status === 200 && a.sentAt >= outage.to).sort((x, y) => x.at - y.at)[0]
  if (outage.to > outage.from) verdict.resumeMs = back === undefined ? Infinity : back.at - outage.to
  return verdict
}

t.test('chaos: own PostgreSQL and Redis, two instances and a --workers 2 gateway on the stock gateway.yaml', async (t) => {
  const missing = ownServersMissing()
  if (missing !== undefined) {
    if (process.env.CI === 'true') t.fail(`the chaos test needs its own PostgreSQL and Redis under CI: ${missing}`)
    else (t as unknown as { skip(reason: string): void }).skip(missing)
    return
  }
  const postgres = await startOwnPostgres([55434, 55435, 55436])
  t.teardown(() => postgres.close())
  const redis = await startOwnRedis([56384, 56385, 56386])
  t.teardown(() => redis.close())
  const up = await startTestUpstream()
  t.teardown(() => up.close())

  const text = chaosConfig(up.url)
  const env = {
    TOLLGATE_STORE_ENGINE: 'shared',
    DATABASE_URL: postgres.url,
    REDIS_URL: redis.url,
    TOLLGATE_PORT: '0',
    TOLLGATE_ADMIN_PORT: '0',
    TOLLGATE_ADMIN_TOKEN_HASH: hashCredential(ADMIN_TOKEN),
  }
  const start = (args: string[] = []) => startGatewayProcess(text, { env, args, startTimeoutMs: START_TIMEOUT_MS })
  const gateways: Record<string, GatewayProcess> = {}
  const startedAt = Date.now()
  // One after the other: three tsx starts at once can each take longer than the start timeout on a
  // busy machine (load average 30 here).
  for (const [name, args] of [['a', []], ['b', []], ['w', ['--workers', '2']]] as const) {
    try {
      gateways[name] = await start([...args])
    } catch (error) {
      await Promise.all(Object.values(gateways).map((gw) => gw.stop('SIGKILL')))
      throw error
    }
  }
  t.comment(`three gateways up in ${Date.now() - startedAt} ms`)
  t.teardown(async () => {
    await Promise.all(Object.values(gateways).map((gw) => gw.stop('SIGKILL')))
  })
  t.teardown(() => {
    if (t.passing()) return
    for (const [name, gw] of Object.entries(gateways)) t.comment(`${name}:\n${gw.output.slice(-20).join('\n')}`)
  })
  const targets: Target[] = Object.entries(gateways).map(([name, gw]) => ({ name, pool: new Pool(gw.url, { connections: 16 }), alive: true }))
  t.teardown(() => Promise.all(targets.map((target) => target.pool.destroy())))

  // The steady load: a few loops over the three gateways, each request with its own id.
  const answers: Answer[] = []
  let stopping = false
  let sequence = 0
  const loops = Array.from({ length: 9 }, async (_, loop) => {
    while (!stopping) {
      const target = targets[loop % targets.length]!
      if (!target.alive) {
        await new Promise((resolve) => setTimeout(resolve, 20))
        continue
      }
      const answer = await send(target, `/chaos/${KEY}/call`, `c${++sequence}`)
      answers.push(answer)
      if (answer.status !== 200) await new Promise((resolve) => setTimeout(resolve, 5))
    }
  })
  const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
  const since = (from: number) => answers.filter((a) => a.sentAt >= from || a.at >= from)
  const report: Record<string, Verdict> = {}

  const workerExits = () => gateways.w!.output.filter((line) => /worker exited unexpectedly/.test(line)).length
  /** Processes that exited since the case began (a gateway, or a worker the --workers primary replaced), the one killed aside. */
  const exitedSince = (workersBefore: number, killed?: string) => [
    ...Object.entries(gateways).filter(([name, gw]) => name !== killed && gw.child.exitCode !== null).map(([name, gw]) => `${name} (exit ${gw.child.exitCode})`),
    ...Array.from({ length: workerExits() - workersBefore }, () => 'a worker of w'),
  ]
  const outageCase = async (name: string, fault: () => Promise<Omit<Outage, 'name'>>) => {
    const caseStart = Date.now()
    const workersBefore = workerExits()
    currentCase = name
    const outage = { name, ...(await fault()) }
    await pause(RESUME_MS + 500)
    const verdict = judge(since(caseStart).filter((a) => a.sentAt <= Date.now()), outage)
    verdict.exited = exitedSince(workersBefore, outage.killed)
    report[name] = verdict
    t.same(verdict.exited, [], `${name}: no process exited`)
    t.same(verdict.wrong.slice(0, 10), [], `${name}: ${verdict.answers} answers, ${verdict.ok} 200, ${verdict.unavailable} 503 store_unavailable (${verdict.notUnavailableWhileDown} other answers while down, ${verdict.unavailableWhileUp} 503 while up), back ${verdict.resumeMs ?? '-'} ms after the server`)
    if (verdict.resumeMs !== undefined) t.ok(verdict.resumeMs <= RESUME_MS, `${name}: service back within ${RESUME_MS} ms (${verdict.resumeMs} ms)`)
  }

  await pause(1500)
  await outageCase('warm-up', async () => ({ began: Date.now(), from: Date.now(), to: Date.now(), graceMs: 0 }))

  // Refused leases racing draws: bursts on projects of 100 credits, spread over the three gateways.
  for (let i = 0; i < bursts; i++) {
    const workersBefore = workerExits()
    currentCase = `race ${i}`
    const burst = await Promise.all(Array.from({ length: RACE_BURST }, (_, n) => send(targets[n % targets.length]!, `/chaos/${raceKeys[i]}/call`, `race${i}-${n}`)))
    const served = burst.filter((a) => a.status === 200).length
    const refused = burst.filter((a) => a.status === 402).length
    const unavailable = burst.filter((a) => a.status === 503).length
    const exited = exitedSince(workersBefore)
    report[`race ${i}`] = { answers: burst.length, ok: served, unavailable, wrong: [], notUnavailableWhileDown: 0, unavailableWhileUp: unavailable, exited }
    t.same(exited, [], `race ${i}: no process exited`)
    t.same({ served, refused, other: burst.length - served - refused }, { served: RACE_ALLOCATION, refused: RACE_BURST - RACE_ALLOCATION, other: 0 }, `race ${i}: exactly ${RACE_ALLOCATION} served, the rest 402, no 503`)
  }

  for (let round = 0; round < repeats; round++) {
    for (const mode of ['fast', 'immediate'] as const) {
      await outageCase(`PostgreSQL restart (${mode}) #${round + 1}`, async () => {
        const began = Date.now()
        await postgres.stop(mode)
        const from = Date.now()
        await pause(DOWN_MS)
        const restarting = Date.now()
        await postgres.start()
        return { began, from, to: Date.now(), graceMs: 0, restarting }
      })
    }
    await outageCase(`Redis restart #${round + 1}`, async () => {
      const began = Date.now()
      await redis.kill()
      const from = Date.now()
      await pause(DOWN_MS + REDIS_GRACE_MS)
      const restarting = Date.now()
      await redis.start()
      return { began, from, to: Date.now(), graceMs: REDIS_GRACE_MS, restarting }
    })
    await outageCase(`Redis FLUSHALL #${round + 1}`, async () => {
      const began = Date.now()
      await redis.flushAll()
      return { began, from: began, to: began, graceMs: 0 }
    })
  }

  await outageCase('kill -9 of instance a', async () => {
    const began = Date.now()
    targets[0]!.alive = false
    gateways.a!.child.kill('SIGKILL')
    await gateways.a!.exited
    return { began, from: began, to: began, graceMs: 0, killed: 'a' }
  })

  currentCase = 'stop'
  stopping = true
  await Promise.all(loops)

  // No process exited but the one killed; no worker of the --workers gateway was replaced.
  t.equal(gateways.b!.child.exitCode, null, 'instance b is still running')
  t.equal(gateways.w!.child.exitCode, null, 'the --workers 2 gateway is still running')
  t.same(gateways.w!.output.filter((line) => /worker exited unexpectedly/.test(line)), [], 'no worker exited')
  t.same([...gateways.a!.output, ...gateways.b!.output, ...gateways.w!.output].filter((line) => /unhandled|uncaught/i.test(line)), [], 'no unhandled rejection or exception was logged')

  // The background tasks met the outages and were counted (core/proxy/resilience.ts), not thrown.
  const metrics = await (await fetch(`${gateways.b!.adminUrl}/metrics`)).text()
  const counted = [...metrics.matchAll(/^tollgate_background_errors_total\{task="([^"]+)"\} (\d+)/gm)].filter((m) => Number(m[2]) > 0).map((m) => m[1])
  // The lease upkeep ops (give-back, end) of the chaos project's leases meet every PostgreSQL outage too.
  t.ok(['workstations-tick', 'store-heartbeat', 'credit-lease-upkeep'].every((task) => counted.includes(task)), `background failures counted per task: ${counted.join(', ')}`)

  // The ledger: every 200 has exactly one committed charge; a charge without a 200 only for a request that failed in flight.
  const client = new pg.Client({ connectionString: postgres.url })
  await client.connect()
  t.teardown(() => client.end().catch(() => {}))
  const deadline = Date.now() + 30_000
  let pending = Infinity
  while (Date.now() < deadline) {
    const { rows } = await client.query<{ n: number }>("SELECT count(*)::int AS n FROM credit_holds WHERE state = 'pending' AND api_type <> 'lease'")
    pending = rows[0]!.n
    if (pending === 0) break
    await pause(250)
  }
  t.equal(pending, 0, 'no reservation left pending')
  const { rows } = await client.query<{ id: string }>("SELECT id FROM credit_holds WHERE project_id = 'chaos' AND state = 'committed'")
  const committed = new Map<string, number>()
  for (const row of rows) committed.set(row.id.split(':')[0]!, (committed.get(row.id.split(':')[0]!) ?? 0) + 1)
  const acknowledged = new Set(answers.filter((a) => a.status === 200).map((a) => a.id))
  const failedInFlight = new Set(answers.filter((a) => a.status !== 200).map((a) => a.id))
  const lost = [...acknowledged].filter((id) => !committed.has(id))
  const doubled = [...committed].filter(([, n]) => n > 1).map(([id]) => id)
  const unexplained = [...committed.keys()].filter((id) => !acknowledged.has(id) && !failedInFlight.has(id))
  const inFlightCharged = [...committed.keys()].filter((id) => failedInFlight.has(id)).length
  t.same({ lost, doubled, unexplained }, { lost: [], doubled: [], unexplained: [] }, `ledger: ${acknowledged.size} acknowledged ≤ ${committed.size} charged ≤ ${acknowledged.size} + ${failedInFlight.size} in flight (${inFlightCharged} of them charged)`)
  const used = await client.query<{ p: string; used: number }>("SELECT project_id AS p, used::int AS used FROM credit_balances WHERE project_id LIKE 'race-%' ORDER BY 1")
  t.ok(used.rows.every((row) => row.used === RACE_ALLOCATION), `race periods charged exactly ${RACE_ALLOCATION} each (${used.rows.map((row) => row.used).join(', ')})`)
  // Per case (by the case a request was sent in): acknowledged ≤ charged ≤ acknowledged + in flight.
  const ledgerOf = (name: string) => {
    const sent = answers.filter((a) => a.case === name)
    const acked = sent.filter((a) => a.status === 200)
    const inFlight = sent.filter((a) => a.status !== 200)
    const charged = sent.filter((a) => committed.has(a.id)).length
    return { acknowledged: acked.length, charged, inFlight: inFlight.length, inFlightCharged: inFlight.filter((a) => committed.has(a.id)).length }
  }
  for (const [name, v] of Object.entries(report)) {
    const ledger = name.startsWith('race ') ? undefined : ledgerOf(name)
    t.comment(
      `${name}: processes exited ${v.exited.length}; answers ${v.answers} (${v.ok} 200, ${v.unavailable} 503 store_unavailable); ` +
        `non-503 while down ${v.notUnavailableWhileDown}; 503 while up ${v.unavailableWhileUp}; ` +
        (ledger === undefined
          ? `served ${v.ok} of ${RACE_ALLOCATION} credits, ${v.answers - v.ok - v.unavailable} refused 402; `
          : `acknowledged ${ledger.acknowledged} ≤ ledger ${ledger.charged} ≤ acknowledged + in flight ${ledger.acknowledged + ledger.inFlight} (${ledger.inFlightCharged} of ${ledger.inFlight} in flight charged); `) +
        `resume ${v.resumeMs === undefined ? '-' : `${v.resumeMs} ms`}`,
    )
  }
})
