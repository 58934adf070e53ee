/**
 * Privnet figures (non-asserting; prints a table). One run, everything interleaved:
 *
 * 1. prove-batch fan-out: a batch of 20 proofs against a stand-in proof server that takes 200 ms
 *    per proof, versus one single proof through the same gateway. Target: batch ≤ 1.2 × single.
 * 2. Binary validation of a 1 MB /prove-tx payload: p50 latency of the validated route minus the
 *    same route without binary-validator (same auth, gates and metering). Target: ≤ 1 ms. The
 *    validator itself only reads ≤ 513 bytes; most of the difference is the core buffering the
 *    body (the validator needs it read) instead of streaming it.
 *
 * Usage: node --import tsx bench/privnet-bench.ts [--rounds 15] [--iterations 300]
 * Everything it starts (two stand-ins in-process, one gateway process) is stopped at the end.
 */
import { Agent, request } from 'undici'
import { argValue } from './lib/args.ts'
import { startGatewayProcess, type GatewayProcess } from '../test/helpers/gateway-process.ts'
import { privnetConfig, privnetEnv } from '../test/helpers/privnet.ts'
import { startProofServer, type StandIn } from '../examples/upstreams/proof-server.ts'
import { buildProvePayload, buildProveTxPayload, PROOF_TAGS } from '../examples/upstreams/tagged.ts'
import { compileTaggedCheck } from '../plugins/binary-validator/tagged-header.ts'

const argv = process.argv.slice(2)
const rounds = Math.min(100, Number(argValue(argv, 'rounds') ?? 15))
const iterations = Math.min(5000, Number(argValue(argv, 'iterations') ?? 300))
const KEY = 'bench-privnet-key-0001'
const DELAY_MS = 200

/** The same single-proof route without binary-validator, for the comparison. */
const UNVALIDATED_ROUTE = `
  - name: bench-prove-tx-unvalidated
    methods: [POST]
    path: /bench/unvalidated/:apiKey/prove-tx
    rewrite: /prove-tx
    upstream: proof-relay
    apiType: PRIVNET_ZKPAAS
    maxBodyBytes: 33554432
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: zkpaas, plans: [enterprise] } }
      - { name: zk-features, config: { sponsored: {}, tee: { upstream: proof-tee } } }
      - { name: credit-meter, config: { apiType: PRIVNET_ZKPAAS, cost: 1 } }
  - name: bench-prove-tx-validated
    methods: [POST]
    path: /bench/validated/:apiKey/prove-tx
    rewrite: /prove-tx
    upstream: proof-relay
    apiType: PRIVNET_ZKPAAS
    maxBodyBytes: 33554432
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: zkpaas, plans: [enterprise] } }
      - { name: zk-features, config: { sponsored: {}, tee: { upstream: proof-tee } } }
      - { name: credit-meter, config: { apiType: PRIVNET_ZKPAAS, cost: 1 } }
      - name: binary-validator
        config: { tags: ['${PROOF_TAGS.proveTx.request.slice('midnight:'.length, -1)}'] }
`

const quantile = (values: number[], q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]
}
const fmt = (ms: number) => ms.toFixed(3).padStart(9)

async function timed(agent: Agent, url: string, body: Buffer | string, contentType: string): Promise<number> {
  const started = performance.now()
  const res = await request(url, { method: 'POST', body, headers: { 'content-type': contentType }, dispatcher: agent })
  await res.body.dump()
  const ms = performance.now() - started
  if (res.statusCode !== 200) throw new Error(`${url.replace(KEY, '***')} answered ${res.statusCode}`)
  return ms
}

async function main(): Promise<void> {
  let slow: StandIn | undefined
  let fast: StandIn | undefined
  let gw: GatewayProcess | undefined
  const agent = new Agent({ connections: 64 })
  try {
    // Slow pool (200 ms per proof) as the default upstream; fast pool (no delay) for the 1 MB runs.
    slow = await startProofServer({ provingDelayMs: DELAY_MS, recordLimit: 10 })
    fast = await startProofServer({ recordLimit: 10 })
    const config = privnetConfig(
      [{ id: 'bench', key: KEY, allocation: 100_000_000, features: { proveBatch: true, sponsoredWallet: true, tee: true } }],
      { adminToken: 'bench-admin-token' },
    ).replace(/\nroutes:\n/, `\nlog: { level: info, access: false }\nroutes:\n${UNVALIDATED_ROUTE}`)
    gw = await startGatewayProcess(config, { env: privnetEnv({ proof: slow.url, tee: slow.url, relay: fast.url }) })

    // 1. Batch of 20 vs one proof, interleaved.
    const single = buildProvePayload(Buffer.from('single'))
    const batch = JSON.stringify({
      proofs: Array.from({ length: 20 }, (_, i) => ({ endpoint: 'prove', payload: buildProvePayload(Buffer.from(`item-${i}`)).toString('base64') })),
    })
    const singleMs: number[] = []
    const batchMs: number[] = []
    await timed(agent, `${gw.url}/privnet/zkpaas/${KEY}/prove`, single, 'application/octet-stream')
    await timed(agent, `${gw.url}/privnet/zkpaas/${KEY}/prove-batch`, batch, 'application/json')
    for (let i = 0; i < rounds; i++) {
      singleMs.push(await timed(agent, `${gw.url}/privnet/zkpaas/${KEY}/prove`, single, 'application/octet-stream'))
      batchMs.push(await timed(agent, `${gw.url}/privnet/zkpaas/${KEY}/prove-batch`, batch, 'application/json'))
    }

    // 2. 1 MB payload, validated vs not, interleaved (order alternates each iteration).
    const big = buildProveTxPayload(Buffer.alloc(1024 * 1024, 7))
    const routes = {
      validated: `${gw.url}/bench/validated/${KEY}/prove-tx`,
      unvalidated: `${gw.url}/bench/unvalidated/${KEY}/prove-tx`,
      direct: `${fast.url}/prove-tx`,
    }
    const samples: Record<keyof typeof routes, number[]> = { validated: [], unvalidated: [], direct: [] }
    const names = Object.keys(routes) as (keyof typeof routes)[]
    for (let i = 0; i < 20; i++) for (const name of names) await timed(agent, routes[name], big, 'application/octet-stream')
    for (let i = 0; i < iterations; i++) {
      const order = i % 2 === 0 ? names : [...names].reverse()
      for (const name of order) samples[name].push(await timed(agent, routes[name], big, 'application/octet-stream'))
    }
    // The check alone, in this process.
    const check = compileTaggedCheck({ tags: [PROOF_TAGS.proveTx.request.slice('midnight:'.length, -1)] })
    const checkUs: number[] = []
    for (let i = 0; i < 20000; i++) {
      const started = performance.now()
      check(big)
      checkUs.push((performance.now() - started) * 1000)
    }

    const singleP50 = quantile(singleMs, 0.5)
    const batchP50 = quantile(batchMs, 0.5)
    console.log(`\nprove-batch fan-out (stand-in proving delay ${DELAY_MS} ms, ${rounds} rounds interleaved)`)
    console.log('                 p50 ms    p90 ms    max ms')
    console.log(`single proof  ${fmt(singleP50)} ${fmt(quantile(singleMs, 0.9))} ${fmt(Math.max(...singleMs))}`)
    console.log(`batch of 20   ${fmt(batchP50)} ${fmt(quantile(batchMs, 0.9))} ${fmt(Math.max(...batchMs))}`)
    console.log(`ratio batch/single at p50: ${(batchP50 / singleP50).toFixed(3)} (target ≤ 1.2)`)

    console.log(`\n1 MB /prove-tx payload (${iterations} iterations each, interleaved; stand-in without delay)`)
    console.log('                     p50 ms    p90 ms    p99 ms')
    for (const name of names) {
      const values = samples[name]
      console.log(`${name.padEnd(16)} ${fmt(quantile(values, 0.5))} ${fmt(quantile(values, 0.9))} ${fmt(quantile(values, 0.99))}`)
    }
    const added = quantile(samples.validated, 0.5) - quantile(samples.unvalidated, 0.5)
    console.log(`added by binary-validator at p50: ${added.toFixed(3)} ms (target ≤ 1 ms)`)
    console.log(`the check alone on 1 MB: p50 ${quantile(checkUs, 0.5).toFixed(2)} µs, p99 ${quantile(checkUs, 0.99).toFixed(2)} µs`)
  } finally {
    await agent.close()
    await gw?.stop('SIGTERM')
    await slow?.close()
    await fast?.close()
  }
}

await main()
