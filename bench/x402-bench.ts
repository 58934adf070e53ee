/**
 * x402 verify throughput (non-asserting; prints a table): POST verify through tollgate (auth, rate
 * limit, credit metering, the in-process EVM facilitator) versus the official `x402Facilitator.verify`
 * (@x402/core + @x402/evm ExactEvmScheme) called in this process, both on the same local chain,
 * which runs in a process of its own. Same signed payments (official SDK, v2), same concurrency,
 * rounds interleaved; the ratio is tollgate / official.
 *
 * Both do real chain reads per verify (ours: payer code, authorizationState, balanceOf and an
 * eth_call simulation in one JSON-RPC batch, the asset's code once; the official one: payer and
 * asset code, then the simulation), so on this hardhat chain the RPC is most of the cost for both.
 * Every row reaches the chain through the same counting proxy (test/helpers/rpc-counter.ts), so
 * each pays the same hop per round trip, and the table reports the JSON-RPC calls and HTTP round
 * trips per completed verify of each row (under concurrency ours also batches across verifies).
 *
 * A third, diagnostic row calls our evm/verify in this process: the gap between it and the
 * official row is the chain access, the gap between it and the tollgate row is the gateway itself
 * (HTTP, auth, rate limit, credit metering).
 *
 * Usage: node --import tsx bench/x402-bench.ts [--seconds 5] [--rounds 3] [--concurrency 16] [--chain solana]
 * Everything it starts (the chain process, one gateway process) is stopped at the end.
 */
import { x402Facilitator } from '@x402/core/facilitator'
import { toFacilitatorEvmSigner } from '@x402/evm'
import { ExactEvmScheme as OfficialExactEvm } from '@x402/evm/exact/facilitator'
import { Agent, request } from 'undici'
import { createWalletClient, defineChain, http, publicActions, type Hex } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { argValue } from './lib/args.ts'
import { startGatewayProcess, type GatewayProcess } from '../test/helpers/gateway-process.ts'
import { x402Config } from '../test/helpers/x402.ts'
import { startRpcCounter } from '../test/helpers/rpc-counter.ts'
import { sdkBodyV2, sdkSigner } from '../test/plugins/x402-facilitator/evm-helpers.ts'
import { createEvmChainContext } from '../plugins/x402-facilitator/evm/context.ts'
import { verifyExact } from '../plugins/x402-facilitator/evm/verify.ts'
import { closedLoop, startWithKeys } from './lib/closed-loop.ts'

const argv = process.argv.slice(2)
const seconds = Math.min(60, Number(argValue(argv, 'seconds') ?? 5))
const rounds = Math.min(10, Number(argValue(argv, 'rounds') ?? 3))
const concurrency = Math.min(256, Number(argValue(argv, 'concurrency') ?? 16))
const KEY = 'bench-x402-key-0001'

interface ChainInfo {
  rpcUrl: string
  chainId: number
  token: `0x${string}`
  tokenInfo: { name: string; version: string; decimals: number }
  accounts: Record<'facilitator' | 'payer' | 'payee', { address: `0x${string}`; privateKey: Hex }>
}

async function main(): Promise<void> {
  const { child: chainProcess, info } = await startWithKeys<ChainInfo>('../../examples/chain/index.ts', 'chain')
  const counter = await startRpcCounter(info.rpcUrl)
  const rpcUrl = counter.url
  let gw: GatewayProcess | undefined
  const agent = new Agent({ connections: concurrency })
  try {
    const chain = defineChain({
      id: info.chainId, name: 'bench', nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
      rpcUrls: { default: { http: [info.rpcUrl] } },
    })
    // The helpers want a fixture; these are the fields they read.
    const fixture = { chain: { ...info, viemChain: chain }, v2Network: `eip155:${info.chainId}`, v1Network: 'base-sepolia' } as any
    const bodies = await Promise.all(Array.from({ length: 64 }, () => sdkBodyV2(fixture, sdkSigner(info.accounts.payer.privateKey))))
    const payloads = bodies.map((body) => JSON.stringify(body))

    const config = x402Config([{ id: 'bench', key: KEY, scopes: ['x402'], allocation: 1_000_000_000 }], (text) => text
      .replace(/capacity: \d+, refillPerSecond: \d+/g, 'capacity: 1000000, refillPerSecond: 1000000')
      .replace(/\nroutes:\n/, '\nlog: { level: info, access: false }\nroutes:\n'))
    gw = await startGatewayProcess(config, {
      env: {
        TOLLGATE_PORT: '0', TOLLGATE_ADMIN_PORT: '0', EVM_RPC_URL: rpcUrl,
        X402_FACILITATOR_KEY: info.accounts.facilitator.privateKey, X402_ASSET: info.token, X402_PAY_TO: info.accounts.payee.address,
      },
    })
    const verifyUrl = `${gw.url}/x402/base/testnet/${KEY}/verify`
    const viaTollgate = async (i: number) => {
      const res = await request(verifyUrl, { method: 'POST', body: payloads[i % payloads.length], headers: { 'content-type': 'application/json' }, dispatcher: agent })
      const answer = (await res.body.json()) as { isValid?: boolean }
      return res.statusCode === 200 && answer.isValid === true
    }

    const account = privateKeyToAccount(info.accounts.facilitator.privateKey)
    const client = createWalletClient({ account, chain, transport: http(rpcUrl, { retryCount: 0 }) }).extend(publicActions)
    const official = new x402Facilitator().register(
      `eip155:${info.chainId}`,
      new OfficialExactEvm(toFacilitatorEvmSigner(Object.assign(client, { address: account.address }) as any)),
    )
    const inProcess = async (i: number) => {
      const body = bodies[i % bodies.length]
      return (await official.verify(body.paymentPayload, body.paymentRequirements)).isValid === true
    }

    // Diagnostic third row: our evm/verify called in this process, i.e. tollgate without HTTP,
    // auth and metering; it tells the chain-read cost of our checks from the gateway's overhead.
    const ours = createEvmChainContext({
      network: info.chainId, rpcUrl, signerPrivateKey: info.accounts.facilitator.privateKey,
      assets: [{ address: info.token, ...info.tokenInfo }],
    })
    const oursInProcess = async (i: number) => (await verifyExact(ours, bodies[i % bodies.length])).isValid

    const tasks = { tollgate: viaTollgate, official: inProcess, ours: oursInProcess }
    type Name = keyof typeof tasks
    const names = Object.keys(tasks) as Name[]
    // Warm-up: JIT, keep-alive sockets, the chain's caches.
    for (const name of names) await closedLoop(1000, concurrency, tasks[name])
    const results: Record<Name, number[]> = { tollgate: [], official: [], ours: [] }
    const rpc: Record<Name, { calls: number; roundTrips: number; verifies: number }> = {
      tollgate: { calls: 0, roundTrips: 0, verifies: 0 }, official: { calls: 0, roundTrips: 0, verifies: 0 }, ours: { calls: 0, roundTrips: 0, verifies: 0 },
    }
    let failures = 0
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? names : [...names].reverse()
      for (const name of order) {
        counter.reset()
        const run = await closedLoop(seconds * 1000, concurrency, tasks[name])
        const counts = counter.counts()
        results[name].push(run.rps)
        rpc[name].calls += counts.calls
        rpc[name].roundTrips += counts.roundTrips
        rpc[name].verifies += run.completed
        failures += run.failures
      }
    }
    const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length
    const fmt = (n: number) => n.toFixed(1).padStart(9)
    console.log(`\nx402 verify, valid v2 payments, concurrency ${concurrency}, ${rounds} rounds × ${seconds} s each, interleaved`)
    console.log(`                          ${Array.from({ length: rounds }, (_, i) => `round ${i + 1}`.padStart(9)).join(' ')}      mean`)
    console.log(`tollgate (HTTP)  req/s    ${results.tollgate.map(fmt).join(' ')} ${fmt(mean(results.tollgate))}`)
    console.log(`official (in-process)/s   ${results.official.map(fmt).join(' ')} ${fmt(mean(results.official))}`)
    console.log(`ours (in-process)   /s    ${results.ours.map(fmt).join(' ')} ${fmt(mean(results.ours))}   (diagnostic: evm/verify without the gateway)`)
    const perVerify = (name: Name) => {
      const r = rpc[name]
      return `${(r.calls / r.verifies).toFixed(2)} RPC calls, ${(r.roundTrips / r.verifies).toFixed(2)} round trips`
    }
    console.log(`chain access per verify:  tollgate ${perVerify('tollgate')}; official ${perVerify('official')}; ours in-process ${perVerify('ours')}`)
    console.log(`ratio tollgate/official: ${(mean(results.tollgate) / mean(results.official)).toFixed(3)}${failures ? `  (${failures} calls were not isValid:true)` : ''}`)
  } finally {
    await agent.close()
    await gw?.stop('SIGTERM')
    await counter.close()
    chainProcess.kill('SIGTERM')
  }
}

// `--chain solana`: the same comparison on the local SVM (bench/x402-svm-bench.ts).
if (argValue(argv, 'chain') === 'solana') await (await import('./x402-svm-bench.ts')).runSvmBench()
else await main()
