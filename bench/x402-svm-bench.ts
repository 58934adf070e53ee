/**
 * x402 verify throughput on Solana (non-asserting; prints a table): POST verify through tollgate
 * (auth, rate limit, credit metering, the in-process svm/ facilitator) versus the official
 * `@x402/svm` ExactSvmScheme facilitator called in this process, both against the same local SVM
 * (examples/svm in a process of its own, behind its JSON-RPC front). Same payments (official
 * client, v2), same concurrency, rounds interleaved; the ratio is tollgate / official.
 *
 * Work per verify: ours decodes, checks and co-signs in process, then makes one RPC call
 * (simulateTransaction with sigVerify); the official one checks and makes one (simulateTransaction
 * without sigVerify).
 *
 * Usage: node --import tsx bench/x402-bench.ts --chain solana [--seconds 5] [--rounds 3] [--concurrency 16]
 * (or this file directly). Everything it starts (the SVM process, one gateway process) is stopped at the end.
 */
import { fileURLToPath } from 'node:url'
import { createKeyPairSignerFromBytes, getBase58Encoder } from '@solana/kit'
import { SOLANA_TESTNET_CAIP2, toFacilitatorSvmSigner } from '@x402/svm'
import { ExactSvmScheme as OfficialClient } from '@x402/svm/exact/client'
import { ExactSvmScheme as OfficialFacilitator } from '@x402/svm/exact/facilitator'
import { Agent, request } from 'undici'
import { argValue } from './lib/args.ts'
import { startGatewayProcess, type GatewayProcess } from '../test/helpers/gateway-process.ts'
import { x402Config } from '../test/helpers/x402.ts'
import { closedLoop, startWithKeys } from './lib/closed-loop.ts'

const argv = process.argv.slice(2)
const seconds = Math.min(60, Number(argValue(argv, 'seconds') ?? 5))
const rounds = Math.min(10, Number(argValue(argv, 'rounds') ?? 3))
const concurrency = Math.min(256, Number(argValue(argv, 'concurrency') ?? 16))
const KEY = 'bench-x402-key-0001'

interface SvmInfo {
  rpcUrl: string
  mint: string
  accounts: Record<'facilitator' | 'payer' | 'payee', { address: string; secretKey: string }>
}

export async function runSvmBench(): Promise<void> {
  const { child, info } = await startWithKeys<SvmInfo>('../../examples/svm/index.ts', 'SVM')
  let gw: GatewayProcess | undefined
  const agent = new Agent({ connections: concurrency })
  try {
    const secret = (s: string) => new Uint8Array(getBase58Encoder().encode(s))
    const payer = await createKeyPairSignerFromBytes(secret(info.accounts.payer.secretKey))
    const feePayer = await createKeyPairSignerFromBytes(secret(info.accounts.facilitator.secretKey))
    const requirements = {
      scheme: 'exact', network: SOLANA_TESTNET_CAIP2, amount: '10000', asset: info.mint, payTo: info.accounts.payee.address,
      maxTimeoutSeconds: 60, extra: { feePayer: feePayer.address },
    }
    const client = new OfficialClient(payer, { rpcUrl: info.rpcUrl })
    const bodies = await Promise.all(Array.from({ length: 64 }, async () => {
      const created = await client.createPaymentPayload(2, requirements as any)
      return { x402Version: 2, paymentPayload: { x402Version: 2, accepted: requirements, payload: created.payload, resource: { url: 'http://127.0.0.1/bench' } }, paymentRequirements: requirements }
    }))
    const payloads = bodies.map((body) => JSON.stringify(body))

    const config = x402Config([{ id: 'bench', key: KEY, scopes: ['x402'], allocation: 1_000_000_000 }], (text) => text
      .replace(/capacity: \d+, refillPerSecond: \d+/g, 'capacity: 1000000, refillPerSecond: 1000000')
      .replace(/\nroutes:\n/, '\nlog: { level: info, access: false }\nroutes:\n'))
    gw = await startGatewayProcess(config, {
      env: {
        TOLLGATE_PORT: '0', TOLLGATE_ADMIN_PORT: '0', EVM_RPC_URL: 'http://127.0.0.1:9', X402_FACILITATOR_KEY: '11'.repeat(32),
        X402_ASSET: `0x${'22'.repeat(20)}`, X402_PAY_TO: `0x${'33'.repeat(20)}`,
        SOLANA_RPC_URL: info.rpcUrl, X402_SOLANA_FACILITATOR_KEY: info.accounts.facilitator.secretKey, X402_SOLANA_ASSET: info.mint,
      },
    })
    const verifyUrl = `${gw.url}/x402/solana/testnet/${KEY}/verify`
    const viaTollgate = async (i: number) => {
      const res = await request(verifyUrl, { method: 'POST', body: payloads[i % payloads.length], headers: { 'content-type': 'application/json' }, dispatcher: agent })
      const answer = (await res.body.json()) as { isValid?: boolean }
      return res.statusCode === 200 && answer.isValid === true
    }
    const official = new OfficialFacilitator(toFacilitatorSvmSigner(feePayer, { defaultRpcUrl: info.rpcUrl }))
    const inProcess = async (i: number) => {
      const body = bodies[i % bodies.length]!
      return (await official.verify(body.paymentPayload as any, body.paymentRequirements as any)).isValid === true
    }

    const tasks = { tollgate: viaTollgate, official: inProcess }
    type Name = keyof typeof tasks
    const names = Object.keys(tasks) as Name[]
    for (const name of names) await closedLoop(1000, concurrency, tasks[name])
    const results: Record<Name, number[]> = { tollgate: [], official: [] }
    let failures = 0
    for (let round = 0; round < rounds; round++) {
      for (const name of round % 2 === 0 ? names : [...names].reverse()) {
        const run = await closedLoop(seconds * 1000, concurrency, tasks[name])
        results[name].push(run.rps)
        failures += run.failures
      }
    }
    const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length
    const fmt = (n: number) => n.toFixed(1).padStart(9)
    console.log(`\nx402 verify on Solana (local SVM), valid v2 payments, concurrency ${concurrency}, ${rounds} rounds × ${seconds} s each, interleaved`)
    console.log(`                          ${Array.from({ length: rounds }, (_, i) => `round ${i + 1}`.padStart(9)).join(' ')}      mean`)
    console.log(`tollgate (HTTP)  req/s    ${results.tollgate.map(fmt).join(' ')} ${fmt(mean(results.tollgate))}`)
    console.log(`official (in-process)/s   ${results.official.map(fmt).join(' ')} ${fmt(mean(results.official))}`)
    console.log(`ratio tollgate/official: ${(mean(results.tollgate) / mean(results.official)).toFixed(3)}${failures ? `  (${failures} calls were not isValid:true)` : ''}`)
  } finally {
    await agent.close()
    await gw?.stop('SIGTERM')
    child.kill('SIGTERM')
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await runSvmBench()
