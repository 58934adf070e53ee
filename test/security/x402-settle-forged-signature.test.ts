/**
 * Issue 25, finding 2: settle answered `success: true` to a forged signature. After a genuine
 * settle of payment P (or while it is in flight), the same terms with an all-zero signature, or
 * with one made by another key, were answered from the stored record (or the in-flight promise):
 * the fingerprint covered the terms, not the signature, and the record was read before any check.
 *
 * The rule: a stored answer is given only to the same signed payload; anything else is verified
 * in full and gets verify's refusal (`invalid_exact_evm_signature`, `invalid_permit2_signature`),
 * as the official facilitator answers. Through a real gateway process (examples/config/x402.yaml,
 * its facilitator route) on the local hardhat chain. The Solana variant is in
 * x402-settle-forged-signature-solana.test.ts.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { call, x402Config, x402Env } from '../helpers/x402.ts'
import { permit2Address, witnessTypes } from '../../plugins/x402-facilitator/evm/permit2-abi.ts'
import {
  bodyV2, permit2RequirementsV2, requirementsV2, sdkBodyV1, sdkBodyV2, sdkSigner, signAuthorization, startFixture,
} from '../plugins/x402-facilitator/evm-helpers.ts'

t.setTimeout(600_000)

const KEY = `xk_forge_${randomBytes(10).toString('hex')}`
const f = await startFixture(84532)
const { accounts } = f.chain
const payer = sdkSigner(accounts.payer.privateKey)
/** A key that is not the payer's: its signatures over the payer's terms are forgeries. */
const strangerKey = generatePrivateKey()
const ZERO_SIGNATURE = `0x${'00'.repeat(65)}`
let gw: GatewayProcess

t.before(async () => {
  gw = await startGatewayProcess(x402Config([{ id: 'payments', key: KEY, scopes: ['x402'], allocation: 100000 }]), {
    env: x402Env(f.chain), startTimeoutMs: 90_000,
  })
})
t.teardown(async () => {
  await gw?.stop('SIGKILL')
  await f.close()
})

const settle = (body: unknown) => call(`${gw.url}/x402/base/testnet/${KEY}/settle`, { body })
const payeeBalance = () => f.balanceOf(accounts.payee.address)
const withSignature = (body: any, signature: string) => {
  const copy = structuredClone(body)
  copy.paymentPayload.payload.signature = signature
  return copy
}

/** The payer's EIP-3009 terms of `body`, signed by the stranger instead. */
async function strangerEip3009(body: any): Promise<string> {
  const a = body.paymentPayload.payload.authorization
  const signed = await signAuthorization(f, {
    key: strangerKey, from: a.from, to: a.to, value: a.value, validAfter: Number(a.validAfter), validBefore: Number(a.validBefore), nonce: a.nonce,
  })
  return signed.signature
}

/** The payer's Permit2 terms of `body`, signed by the stranger instead. */
async function strangerPermit2(body: any): Promise<string> {
  const a = body.paymentPayload.payload.permit2Authorization
  return privateKeyToAccount(strangerKey).signTypedData({
    domain: { name: 'Permit2', chainId: f.chain.chainId, verifyingContract: permit2Address },
    types: witnessTypes.exact as any, primaryType: 'PermitWitnessTransferFrom',
    message: {
      permitted: { token: a.permitted.token, amount: BigInt(a.permitted.amount) }, spender: a.spender, nonce: BigInt(a.nonce),
      deadline: BigInt(a.deadline), witness: { to: a.witness.to, validAfter: BigInt(a.witness.validAfter) },
    } as any,
  })
}

t.test('EIP-3009 (v2 and v1): after a genuine settle, a forged signature gets verify’s refusal, not the stored success', async (t) => {
  for (const genuine of [await sdkBodyV2(f, payer), await sdkBodyV1(f, payer)]) {
    const version = genuine.x402Version
    const settled = await settle(genuine)
    t.match(settled.json(), { success: true, transaction: /^0x[0-9a-f]{64}$/ }, `v${version}: the genuine payment settles`)
    const before = await payeeBalance()
    for (const [what, signature] of [['all-zero', ZERO_SIGNATURE], ['another key’s', await strangerEip3009(genuine)]] as const) {
      const forged = await settle(withSignature(genuine, signature))
      t.equal(forged.status, 200)
      t.match(forged.json(), { success: false, errorReason: 'invalid_exact_evm_signature', transaction: '' }, `v${version}: an ${what} signature is refused as verify refuses it`)
    }
    t.same((await settle(genuine)).json(), settled.json(), `v${version}: the same signed payload still gets its stored answer`)
    t.equal(await payeeBalance(), before, 'nothing more moved')
  }
})

t.test('EIP-3009: while the genuine settle is in flight, a forged copy does not share its answer', async (t) => {
  const genuine = bodyV2(requirementsV2(f), await signAuthorization(f))
  await f.chain.request('evm_setAutomine', [false])
  t.teardown(() => f.chain.request('evm_setAutomine', [true]))
  const broadcasts = () => gw.output.filter((line) => line.includes('"event":"x402_broadcast"')).length
  const seen = broadcasts()
  const first = settle(genuine)
  while (broadcasts() === seen) await new Promise((resolve) => setTimeout(resolve, 20))
  const forged = settle(withSignature(genuine, ZERO_SIGNATURE))
  const stranger = settle(withSignature(genuine, await strangerEip3009(genuine)))
  // Mine once both had time to reach the facilitator (before the fix they wait on the genuine settle).
  await new Promise((resolve) => setTimeout(resolve, 1000))
  await f.chain.request('evm_setAutomine', [true])
  await f.chain.request('evm_mine', [])
  t.match((await first).json(), { success: true, transaction: /^0x[0-9a-f]{64}$/ })
  t.match((await forged).json(), { success: false, errorReason: 'invalid_exact_evm_signature', transaction: '' }, 'all-zero signature')
  t.match((await stranger).json(), { success: false, errorReason: 'invalid_exact_evm_signature', transaction: '' }, 'another key’s signature')
})

t.test('Permit2: after a genuine settle, a forged signature gets verify’s refusal', async (t) => {
  const genuine = await sdkBodyV2(f, payer, permit2RequirementsV2(f))
  const settled = await settle(genuine)
  t.match(settled.json(), { success: true, transaction: /^0x[0-9a-f]{64}$/ }, 'the genuine Permit2 payment settles')
  const before = await payeeBalance()
  for (const [what, signature] of [['all-zero', ZERO_SIGNATURE], ['another key’s', await strangerPermit2(genuine)]] as const) {
    const forged = await settle(withSignature(genuine, signature))
    t.equal(forged.status, 200)
    t.match(forged.json(), { success: false, errorReason: 'invalid_permit2_signature', transaction: '' }, `an ${what} signature is refused as verify refuses it`)
  }
  t.same((await settle(genuine)).json(), settled.json(), 'the same signed payload still gets its stored answer')
  t.equal(await payeeBalance(), before)
})

t.test('Permit2: while the genuine settle is in flight, a forged copy does not share its answer', async (t) => {
  const genuine = await sdkBodyV2(f, payer, permit2RequirementsV2(f))
  const strangerSignature = await strangerPermit2(genuine)
  await f.chain.request('evm_setAutomine', [false])
  t.teardown(() => f.chain.request('evm_setAutomine', [true]))
  const broadcasts = () => gw.output.filter((line) => line.includes('"event":"x402_broadcast"')).length
  const seen = broadcasts()
  const first = settle(genuine)
  while (broadcasts() === seen) await new Promise((resolve) => setTimeout(resolve, 20))
  const forged = settle(withSignature(genuine, ZERO_SIGNATURE))
  const stranger = settle(withSignature(genuine, strangerSignature))
  // Mine once both had time to reach the facilitator (before the fix they wait on the genuine settle).
  await new Promise((resolve) => setTimeout(resolve, 1000))
  await f.chain.request('evm_setAutomine', [true])
  await f.chain.request('evm_mine', [])
  t.match((await first).json(), { success: true, transaction: /^0x[0-9a-f]{64}$/ })
  t.match((await forged).json(), { success: false, errorReason: 'invalid_permit2_signature', transaction: '' }, 'all-zero signature')
  t.match((await stranger).json(), { success: false, errorReason: 'invalid_permit2_signature', transaction: '' }, 'another key’s signature')
})
