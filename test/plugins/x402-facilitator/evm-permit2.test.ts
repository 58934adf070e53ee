/**
 * x402 over Permit2 on a real local chain (Permit2 and the x402 proxies at their canonical
 * addresses): `exact` in v1 and v2, `upto` in v2. Payments come from the official @x402/evm
 * client; the official facilitator runs on the same chain as the oracle for verify.
 */
import t, { type Test } from 'tap'
import { x402Facilitator } from '@x402/core/facilitator'
import { toFacilitatorEvmSigner } from '@x402/evm'
import { ExactEvmScheme as OfficialExact } from '@x402/evm/exact/facilitator'
import { UptoEvmScheme as OfficialUpto } from '@x402/evm/upto/facilitator'
import { createWalletClient, http, parseAbi, publicActions } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { verifyExact } from '../../../plugins/x402-facilitator/evm/verify.ts'
import {
  permit2RequirementsV2, price, requirementsV1, sdkBodyV2, sdkPermit2BodyV1, sdkSigner, sdkUptoBody, startFixture, uptoRequirements,
} from './evm-helpers.ts'

const f = await startFixture(84532)
t.teardown(() => f.close())
const { accounts } = f.chain
const payer = sdkSigner(accounts.payer.privateKey)

const officialAccount = privateKeyToAccount(accounts.facilitator.privateKey)
const officialClient = createWalletClient({
  account: officialAccount, chain: f.chain.viemChain, transport: http(f.chain.rpcUrl, { retryCount: 0 }),
}).extend(publicActions)
const officialSigner = toFacilitatorEvmSigner(Object.assign(officialClient, { address: officialAccount.address }) as any)
const official = new x402Facilitator()
  .register(f.v2Network as `${string}:${string}`, new OfficialExact(officialSigner))
  .register(f.v2Network as `${string}:${string}`, new OfficialUpto(officialSigner))

/** Our verdict, and the official facilitator's for a v2 body. */
async function both(body: any) {
  const ours = await verifyExact(f.ctx, body)
  const theirs = body.x402Version === 2 ? await official.verify(body.paymentPayload, body.paymentRequirements) : undefined
  return { ours, theirs }
}

async function expectRefused(t: Test, body: any, reason: string, message?: RegExp) {
  const { ours, theirs } = await both(body)
  t.equal(ours.isValid, false, 'refused')
  t.equal(ours.invalidReason, reason)
  t.equal(ours.payer, accounts.payer.address, 'payer named')
  if (message) t.match(ours.invalidMessage, message)
  if (theirs) t.equal(theirs.isValid, false, 'the official facilitator refuses it too')
  return ours
}

t.test('official-client Permit2 payments verify, v2 and v1, like the official facilitator', async (t) => {
  const v2 = await sdkBodyV2(f, payer, permit2RequirementsV2(f))
  t.ok(v2.paymentPayload.payload.permit2Authorization, 'the official client signed a Permit2 authorization')
  const { ours, theirs } = await both(v2)
  t.same(ours, { isValid: true, invalidReason: null, payer: accounts.payer.address })
  t.equal(theirs!.isValid, true, 'official verdict')
  const v1 = await sdkPermit2BodyV1(f, payer)
  t.same(await verifyExact(f.ctx, v1), { isValid: true, invalidReason: null, payer: accounts.payer.address })
})

t.test('official-client upto payments verify against the signed maximum', async (t) => {
  const body = await sdkUptoBody(f, payer, uptoRequirements(f, '50000'))
  const { ours, theirs } = await both(body)
  t.same(ours, { isValid: true, invalidReason: null, payer: accounts.payer.address })
  t.equal(theirs!.isValid, true, 'official verdict')
})

t.test('binding: spender, recipient, amount, token, deadline, start, nonce, signature', async (t) => {
  const fresh = () => sdkBodyV2(f, payer, permit2RequirementsV2(f))
  const tamper = async (edit: (auth: any, body: any) => void) => {
    const body = await fresh()
    edit(body.paymentPayload.payload.permit2Authorization, body)
    return body
  }
  await expectRefused(t, await tamper((a) => { a.spender = accounts.poor.address }), 'invalid_permit2_spender', /spender/)
  await expectRefused(t, await sdkBodyV2(f, payer, permit2RequirementsV2(f, { payTo: accounts.poor.address })).then((b) => {
    b.paymentRequirements = permit2RequirementsV2(f); b.paymentPayload.accepted = permit2RequirementsV2(f); return b
  }), 'invalid_permit2_recipient_mismatch', /witness\.to/)
  await expectRefused(t, await tamper((a) => { a.permitted.amount = '1' }), 'permit2_amount_mismatch', /permitted\.amount 1 differs from paymentRequirements\.amount 10000/)
  await expectRefused(t, await tamper((a) => { a.deadline = String(Math.floor(Date.now() / 1000) + 2) }), 'permit2_deadline_expired', /deadline/)
  await expectRefused(t, await tamper((a) => { a.witness.validAfter = String(Math.floor(Date.now() / 1000) + 600) }), 'permit2_not_yet_valid', /validAfter/)
  await expectRefused(t, await tamper((a) => { a.permitted.token = f.chain.wallet1271 }), 'permit2_token_mismatch', /permitted\.token/)
  await expectRefused(t, await tamper((a) => { a.nonce = (BigInt(a.nonce) ^ 1n).toString() }), 'invalid_permit2_signature')
})

t.test('on-chain preconditions: balance, allowance to Permit2', async (t) => {
  const poor = sdkSigner(accounts.poor.privateKey)
  const body = await sdkBodyV2(f, poor, permit2RequirementsV2(f))
  const ours = await verifyExact(f.ctx, body)
  t.equal(ours.invalidReason, 'permit2_insufficient_balance')
  t.equal(ours.payer, accounts.poor.address)
  // The official facilitator diagnoses through Multicall3, which this chain lacks, so only its verdict is compared.
  t.equal((await official.verify(body.paymentPayload, body.paymentRequirements)).isValid, false, 'the official facilitator refuses it too')

  // The deployer holds tokens but never approved Permit2.
  const { deployer } = accounts
  const minter = createWalletClient({ account: privateKeyToAccount(deployer.privateKey), chain: f.chain.viemChain, transport: http(f.chain.rpcUrl) })
  const mint = await minter.writeContract({ address: f.chain.token, abi: parseAbi(['function mint(address to, uint256 value)']), functionName: 'mint', args: [deployer.address, 10n ** 9n] })
  await f.ctx.publicClient.waitForTransactionReceipt({ hash: mint, pollingInterval: 20 })
  const unapproved = await verifyExact(f.ctx, await sdkBodyV2(f, sdkSigner(deployer.privateKey), permit2RequirementsV2(f)))
  t.equal(unapproved.invalidReason, 'permit2_allowance_required')
  t.match(unapproved.invalidMessage, /approve Permit2 first/)
})

t.test('malformed Permit2 payloads: 400-class reasons naming the field, payer kept', async (t) => {
  const body = await sdkBodyV2(f, payer, permit2RequirementsV2(f))
  const cases: [(a: any) => void, string][] = [
    [(a) => { a.nonce = '0x12' }, 'paymentPayload.payload.permit2Authorization.nonce'],
    [(a) => { delete a.witness }, 'paymentPayload.payload.permit2Authorization.witness'],
    [(a) => { a.permitted.token = 'usdc' }, 'paymentPayload.payload.permit2Authorization.permitted.token'],
    [(a) => { a.extra = 1 }, 'paymentPayload.payload.permit2Authorization.extra'],
    [(a) => { a.witness.facilitator = accounts.facilitator.address }, 'paymentPayload.payload.permit2Authorization.witness.facilitator'],
  ]
  for (const [edit, field] of cases) {
    const copy = structuredClone(body)
    edit(copy.paymentPayload.payload.permit2Authorization)
    const result = await verifyExact(f.ctx, copy)
    t.equal(result.invalidReason, 'invalid_payload', field)
    t.match(result.invalidMessage, field)
    t.equal(result.payer, accounts.payer.address)
  }
  const upto = await sdkUptoBody(f, payer, uptoRequirements(f, '50000'))
  delete upto.paymentPayload.payload.permit2Authorization.witness.facilitator
  const result = await verifyExact(f.ctx, upto)
  t.equal(result.invalidReason, 'invalid_payload')
  t.match(result.invalidMessage, 'witness.facilitator is required')
  t.equal(result.payer, accounts.payer.address)
})

t.test('v1 Permit2: the same checks, amount against maxAmountRequired', async (t) => {
  const body = await sdkPermit2BodyV1(f, payer, requirementsV1(f))
  body.paymentRequirements.maxAmountRequired = String(BigInt(price) + 1n)
  const result = await verifyExact(f.ctx, body)
  t.equal(result.invalidReason, 'permit2_amount_mismatch')
  t.match(result.invalidMessage, 'maxAmountRequired')
})
