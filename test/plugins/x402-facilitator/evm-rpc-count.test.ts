/**
 * Chain round trips per verify, counted by a proxy on the chain's RPC: ours against the official
 * facilitator (@x402/evm 2.27) on the same chain, for the same official-SDK payments. Every check
 * still runs (the other verify tests prove each one still refuses); this file proves the reads
 * travel together and what cannot change (the asset's code) is read once.
 */
import t from 'tap'
import { x402Facilitator } from '@x402/core/facilitator'
import { toFacilitatorEvmSigner } from '@x402/evm'
import { ExactEvmScheme as OfficialExactEvmFacilitator } from '@x402/evm/exact/facilitator'
import { createWalletClient, http, publicActions } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { createEvmChainContext } from '../../../plugins/x402-facilitator/evm/context.ts'
import { verifyExact } from '../../../plugins/x402-facilitator/evm/verify.ts'
import { startRpcCounter, type RpcCounter } from '../../helpers/rpc-counter.ts'
import { permit2RequirementsV2, sdkBodyV2, sdkSigner, signAuthorization, bodyV2, requirementsV2, startFixture } from './evm-helpers.ts'

const f = await startFixture(84532)
t.teardown(() => f.close())
const { accounts } = f.chain
const counter: RpcCounter = await startRpcCounter(f.chain.rpcUrl)
t.teardown(() => counter.close())

const ours = createEvmChainContext({
  network: 84532, rpcUrl: counter.url, signerPrivateKey: accounts.facilitator.privateKey, assets: f.ctx.assets, pollingIntervalMs: 20,
})
const officialAccount = privateKeyToAccount(accounts.facilitator.privateKey)
const officialClient = createWalletClient({
  account: officialAccount, chain: f.chain.viemChain, transport: http(counter.url, { retryCount: 0 }),
}).extend(publicActions)
const official = new x402Facilitator().register(
  f.v2Network as `${string}:${string}`,
  new OfficialExactEvmFacilitator(toFacilitatorEvmSigner(Object.assign(officialClient, { address: officialAccount.address }) as any)),
)

const runs = 5
const bodies = await Promise.all(Array.from({ length: runs + 1 }, () => sdkBodyV2(f, sdkSigner(accounts.payer.privateKey))))

/** Verifies each body in turn (after one warm-up) and returns the mean counts per verify. */
async function perVerify(verify: (body: any) => Promise<boolean>) {
  t.equal(await verify(bodies[0]), true, 'warm-up payment is valid')
  counter.reset()
  for (const body of bodies.slice(1)) t.equal(await verify(body), true, 'valid')
  const c = counter.counts()
  return { roundTrips: c.roundTrips / runs, calls: c.calls / runs, byMethod: c.byMethod }
}

t.test('a valid verify: one round trip, no more chain calls than the official facilitator', async (t) => {
  const mine = await perVerify(async (body) => (await verifyExact(ours, body)).isValid)
  const theirs = await perVerify(async (body) => (await official.verify(body.paymentPayload, body.paymentRequirements)).isValid)
  t.comment(`per verify — tollgate: ${mine.roundTrips} round trips, ${mine.calls} RPC calls ${JSON.stringify(mine.byMethod)}`)
  t.comment(`per verify — official: ${theirs.roundTrips} round trips, ${theirs.calls} RPC calls ${JSON.stringify(theirs.byMethod)}`)
  t.equal(mine.roundTrips, 1, 'every read of a verify travels in one JSON-RPC batch')
  t.ok(mine.roundTrips < theirs.roundTrips, 'fewer round trips than the official facilitator')
  t.ok(mine.calls <= theirs.calls + 1, 'at most one call more than the official facilitator (the explicit nonce and balance reads, minus the cached asset code)')
})

t.test('a refused verify still answers in one round trip once the asset is known', async (t) => {
  const signed = await signAuthorization(f, { key: accounts.poor.privateKey })
  counter.reset()
  const result = await verifyExact(ours, bodyV2(requirementsV2(f), signed))
  t.equal(result.invalidReason, 'invalid_exact_evm_insufficient_balance')
  t.equal(result.payer, accounts.poor.address)
  t.equal(counter.counts().roundTrips, 1)
})

t.test('a Permit2 verify: one round trip once Permit2, the proxy and the asset are known', async (t) => {
  const payer = sdkSigner(accounts.payer.privateKey)
  t.equal((await verifyExact(ours, await sdkBodyV2(f, payer, permit2RequirementsV2(f)))).isValid, true, 'warm-up')
  const body = await sdkBodyV2(f, payer, permit2RequirementsV2(f))
  counter.reset()
  t.same(await verifyExact(ours, body), { isValid: true, invalidReason: null, payer: accounts.payer.address })
  const c = counter.counts()
  t.comment(`Permit2 verify — tollgate: ${c.roundTrips} round trip, ${c.calls} RPC calls ${JSON.stringify(c.byMethod)}`)
  t.equal(c.roundTrips, 1)
  t.equal(c.calls, 5, 'payer code, nonce bitmap, balance, allowance, simulation')
})
