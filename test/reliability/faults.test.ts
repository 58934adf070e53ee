/**
 * Upstream faults: a fault proxy in front of each real stand-in (proof server, node JSON-RPC,
 * mirror node, EVM chain) refuses, resets before and after the head, stalls the head, stalls the
 * body, answers garbage or announces a wrong length. For every fault, on every route family:
 * - the client gets 502/504 (or, once a streamed head has gone out, a cut answer), within a deadline;
 * - the ledger grows by exactly the answers that completed with a 2xx (faults are refunded);
 * - the gateway's open file descriptors and RSS do not grow over the run.
 */
import t from 'tap'
import { Agent } from 'undici'
import { buildProvePayload } from '../../examples/upstreams/tagged.ts'
import { startGatewayProcess } from '../helpers/gateway-process.ts'
import { AFTER_HEAD, FAULTS, type Fault } from './harness/fault-proxy.ts'
import { KEY, startUpstreams, suiteConfig, suiteEnv, type UpstreamName } from './harness/environment.ts'
import { call, inBatches, type Outcome } from './harness/client.ts'
import { creditsUsed, settledCreditsUsed } from './harness/admin.ts'
import { fdCount, HAS_PROC, rssKiB, settledFdCount } from './harness/process-stats.ts'
import { FILE_TIMEOUT_MS, scale, START_TIMEOUT_MS } from './harness/scale.ts'

t.setTimeout(FILE_TIMEOUT_MS)

const TIMEOUTS = { connectMs: 500, headersMs: 400, bodyMs: 400 }
/** Longest a faulty exchange may take: the upstream deadlines plus generous scheduling slack. */
const DEADLINE_MS = TIMEOUTS.connectMs + TIMEOUTS.headersMs + TIMEOUTS.bodyMs + 4000

interface Probe {
  name: string
  upstream: UpstreamName
  /** Credits the answer should cost when it completed with a 2xx. */
  charged(outcome: Outcome): number
  send(base: string, dispatcher: Agent): Promise<Outcome>
  /** Statuses a fault before the head may produce (the answer's own convention). */
  failure: number[]
}

const provePayload = buildProvePayload(Buffer.from('reliability'))
const json = { 'content-type': 'application/json' }

const PROBES: Probe[] = [
  {
    name: 'zkpaas /prove (streamed forward)',
    upstream: 'proof',
    failure: [502, 504],
    charged: (o) => (o.complete && o.status === 200 ? 1 : 0),
    send: (base, dispatcher) =>
      call(base, `/privnet/zkpaas/${KEY}/prove`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: provePayload, deadlineMs: DEADLINE_MS, dispatcher }),
  },
  {
    name: 'zkpaas /prove-batch (handler fan-out)',
    upstream: 'proof',
    failure: [502, 504],
    charged: (o) => (o.complete && o.status === 200 ? JSON.parse(o.body).results.filter((r: { ok: boolean }) => r.ok).length : 0),
    send: (base, dispatcher) =>
      call(base, `/privnet/zkpaas/${KEY}/prove-batch`, {
        method: 'POST',
        headers: json,
        body: JSON.stringify({ proofs: [0, 1].map(() => ({ endpoint: 'prove', payload: provePayload.toString('base64') })) }),
        deadlineMs: DEADLINE_MS,
        dispatcher,
      }),
  },
  {
    name: 'privnet RPC POST privnet_chainInfo (composed calls)',
    upstream: 'node',
    failure: [502, 504],
    charged: (o) => (o.complete && o.status === 200 ? 1 : 0),
    send: (base, dispatcher) =>
      call(base, `/privnet/rpc/${KEY}`, { method: 'POST', headers: json, body: '{"jsonrpc":"2.0","id":1,"method":"privnet_chainInfo","params":[]}', deadlineMs: DEADLINE_MS, dispatcher }),
  },
  {
    name: 'privnet RPC GET system_chain',
    upstream: 'node',
    failure: [502, 504],
    charged: (o) => (o.complete && o.status === 200 ? 1 : 0),
    send: (base, dispatcher) => call(base, `/privnet/rpc/${KEY}?method=system_chain&params=%5B%5D&id=7`, { deadlineMs: DEADLINE_MS, dispatcher }),
  },
  {
    name: 'mirror GET /accounts (buffered body, links rewritten)',
    upstream: 'mirror',
    failure: [502, 504],
    charged: (o) => (o.complete && o.status === 200 ? 1 : 0),
    send: (base, dispatcher) => call(base, '/ledger/testnet/api/v1/accounts?limit=2', { headers: { 'x-api-key': KEY }, deadlineMs: DEADLINE_MS, dispatcher }),
  },
  {
    name: 'x402 /health (chain read)',
    upstream: 'chain',
    // The facilitator's health answers 503 `unavailable` when its chain cannot be read.
    failure: [502, 503, 504],
    charged: (o) => (o.complete && o.status === 200 ? 1 : 0),
    send: (base, dispatcher) => call(base, `/x402/base/testnet/${KEY}/health`, { deadlineMs: DEADLINE_MS, dispatcher }),
  },
]

/** What a fault must look like to the client. */
function acceptable(probe: Probe, fault: Fault, o: Outcome): string | null {
  if (o.hung) return `no answer within ${DEADLINE_MS} ms (${o.error})`
  if (o.status >= 200 && o.status < 300 && o.complete && probe.name.includes('prove-batch')) {
    // The batch answers 200 with each failed item refunded and reported with its 502/504.
    const results = JSON.parse(o.body).results as { ok: boolean; error?: { status: number } }[]
    const bad = results.find((r) => !r.ok && !probe.failure.includes(r.error!.status))
    return bad ? `batch item failed with ${bad.error!.status}` : results.some((r) => r.ok) ? 'a batch item succeeded through a fault' : null
  }
  if (probe.failure.includes(o.status) && o.complete) {
    if (fault === 'stall-head' && o.status === 502) return 'a stalled head answered 502, not 504'
    if ((fault === 'refuse' || fault === 'garbage' || fault === 'reset-before-head') && o.status === 504) return `${fault} answered 504, not 502`
    return null
  }
  // Once the head of a streamed answer went out, all the gateway can do is cut the answer.
  if (AFTER_HEAD.has(fault) && o.status >= 200 && o.status < 300 && !o.complete) return null
  return `answered ${o.status || 'nothing'}${o.complete ? ' (complete)' : ` (cut: ${o.error})`}`
}

t.test('upstream faults give 502/504, refund the charge, and leak neither fds nor memory', async (t) => {
  const up = await startUpstreams({ chain: true })
  const gw = await startGatewayProcess(suiteConfig(up, { timeouts: TIMEOUTS }), { env: suiteEnv(up), startTimeoutMs: START_TIMEOUT_MS })
  const dispatcher = new Agent({ connections: 16, keepAliveTimeout: 1000 })
  t.teardown(async () => {
    await dispatcher.close()
    await gw.stop()
    await up.close()
  })
  const pid = gw.child.pid!

  // Sanity: with no fault every probe completes with a 2xx and is charged.
  for (const probe of PROBES) {
    const before = await creditsUsed(gw.adminUrl)
    const o = await probe.send(gw.url, dispatcher)
    t.equal(o.status, 200, `${probe.name} answers 200 with no fault (${o.body.slice(0, 120)})`)
    t.equal((await settledCreditsUsed(gw.adminUrl)) - before, probe.charged(o), `${probe.name} is charged when it succeeds`)
  }

  const perGroup = Math.max(1, Math.round(scale.faults / (FAULTS.length * PROBES.length)))
  const failures = new Map<string, number>()
  const examples = new Map<string, string>()
  let injected = 0
  let warm: { fd: number; rss: number } | undefined
  const samples: { injected: number; fd: number; rss: number }[] = []
  const rounds = 2
  for (let round = 0; round < rounds; round++) {
    for (const fault of FAULTS) {
      for (const probe of PROBES) {
        const proxy = up.proxies[probe.upstream]!
        await proxy.setMode(fault)
        const before = await creditsUsed(gw.adminUrl)
        const count = Math.ceil(perGroup / rounds)
        const outcomes = await inBatches(Array.from({ length: count }, () => () => probe.send(gw.url, dispatcher)), 12)
        await proxy.setMode('pass')
        injected += count
        const charged = outcomes.reduce((sum, o) => sum + probe.charged(o), 0)
        // Settled: a fault after the head is refunded in `done`, a moment after the client saw the cut.
        const delta = (await settledCreditsUsed(gw.adminUrl)) - before
        const key = `${probe.name} / ${fault}`
        for (const o of outcomes) {
          const wrong = acceptable(probe, fault, o)
          if (wrong) {
            failures.set(key, (failures.get(key) ?? 0) + 1)
            examples.set(key, wrong)
          }
        }
        if (delta !== charged) {
          failures.set(`${key}: ledger`, (failures.get(`${key}: ledger`) ?? 0) + 1)
          examples.set(`${key}: ledger`, `ledger grew by ${delta} for ${charged} completed 2xx answer(s)`)
        }
        if (gw.child.exitCode !== null || gw.child.signalCode !== null) break
      }
      if (HAS_PROC && gw.child.exitCode === null) samples.push({ injected, fd: fdCount(pid), rss: rssKiB(pid) })
    }
    // After the first round every code path has run once: that is the baseline for growth.
    if (round === 0 && HAS_PROC && gw.child.exitCode === null) warm = { fd: await settledFdCount(pid), rss: rssKiB(pid) }
  }
  t.equal(gw.child.exitCode, null, 'the gateway is still running')
  t.equal(gw.child.signalCode, null, 'the gateway was not killed by a signal')
  t.comment(`figure: ${injected} upstream faults injected (${FAULTS.length} kinds × ${PROBES.length} route families × ${perGroup})`)
  for (const [key, n] of failures) t.fail(`${key}: ${n} wrong — e.g. ${examples.get(key)}`)
  if (failures.size === 0) t.pass('every fault answered 502/504 (or a cut streamed answer) in time, and was refunded')

  // Measured before anything else runs, so new keep-alive connections are not counted as growth.
  const end = HAS_PROC && gw.child.exitCode === null ? { fd: await settledFdCount(pid), rss: rssKiB(pid) } : undefined

  // With every proxy passing again, the gateway serves as before.
  for (const probe of PROBES) t.equal((await probe.send(gw.url, dispatcher)).status, 200, `${probe.name} serves again after the faults`)

  if (warm && end) {
    t.comment(`figure: fds ${warm.fd} → ${end.fd}, RSS ${(warm.rss / 1024).toFixed(1)} → ${(end.rss / 1024).toFixed(1)} MiB over ${injected - injected / rounds} faults after warm-up`)
    t.comment(`samples (faults fd rssKiB): ${samples.map((s) => `${s.injected} ${s.fd} ${s.rss}`).join(' | ')}`)
    t.ok(end.fd <= warm.fd + 4, `no fd growth: ${warm.fd} after warm-up, ${end.fd} at the end`)
    t.ok(end.rss - warm.rss < 32 * 1024, `no RSS growth beyond 32 MiB: ${warm.rss} KiB → ${end.rss} KiB`)
  }
})
