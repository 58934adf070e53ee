/**
 * settle over Permit2 on a real local chain: exact (v2, v1) and upto, funds checked on chain —
 * exactly once, and for upto exactly the amount used, never above the signed maximum.
 */
import t from 'tap'
import { x402Facilitator } from '@x402/core/facilitator'
import { toFacilitatorEvmSigner } from '@x402/evm'
import { ExactEvmScheme as OfficialExact } from '@x402/evm/exact/facilitator'
import { createWalletClient, http, publicActions, type Address } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { settleExact, type SettleOptions } from '../../../plugins/x402-facilitator/evm/settle.ts'
import { permit2RequirementsV2, price, sdkBodyV2, sdkPermit2BodyV1, sdkSigner, sdkUptoBody, startFixture, uptoRequirements } from './evm-helpers.ts'

const f = await startFixture(84532)
t.teardown(() => f.close())
const { accounts } = f.chain
const payer = sdkSigner(accounts.payer.privateKey)
const opts: SettleOptions = { receiptTimeoutMs: 10_000, records: f.records }
const balances = (...who: Address[]) => Promise.all(who.map((a) => f.balanceOf(a)))
const parties = [accounts.payer.address, accounts.payee.address] as const

t.test('exact v2 over Permit2: one transfer through the proxy, a repeat answers the same', async (t) => {
  const [payerBefore, payeeBefore] = await balances(...parties)
  const body = await sdkBodyV2(f, payer, permit2RequirementsV2(f))
  const first = await settleExact(f.ctx, body, opts)
  t.match(first, { success: true, errorReason: null, payer: accounts.payer.address, transaction: /^0x[0-9a-f]{64}$/, network: f.v2Network })
  t.same(await balances(...parties), [payerBefore - BigInt(price), payeeBefore + BigInt(price)])
  const [again, concurrent] = await Promise.all([settleExact(f.ctx, body, opts), settleExact(f.ctx, body, opts)])
  t.same(again, first, 'idempotent')
  t.same(concurrent, first)
  t.same(await balances(...parties), [payerBefore - BigInt(price), payeeBefore + BigInt(price)], 'still exactly once')
})

t.test('exact v1 over Permit2 settles too', async (t) => {
  const [payerBefore, payeeBefore] = await balances(...parties)
  const result = await settleExact(f.ctx, await sdkPermit2BodyV1(f, payer), opts)
  t.match(result, { success: true, transaction: /^0x[0-9a-f]{64}$/, network: f.v1Network })
  t.same(await balances(...parties), [payerBefore - BigInt(price), payeeBefore + BigInt(price)])
})

t.test('the official facilitator settles on the same chain stand-ins (the contracts speak the published interface)', async (t) => {
  const account = privateKeyToAccount(accounts.facilitator.privateKey)
  const client = createWalletClient({ account, chain: f.chain.viemChain, transport: http(f.chain.rpcUrl, { retryCount: 0 }) }).extend(publicActions)
  const official = new x402Facilitator().register(f.v2Network as `${string}:${string}`,
    new OfficialExact(toFacilitatorEvmSigner(Object.assign(client, { address: account.address }) as any)))
  const [payeeBefore] = await balances(accounts.payee.address)
  const body = await sdkBodyV2(f, payer, permit2RequirementsV2(f))
  const result = await official.settle(body.paymentPayload, body.paymentRequirements)
  t.equal(result.success, true)
  t.same(await balances(accounts.payee.address), [payeeBefore + BigInt(price)])
  const ours = await settleExact(f.ctx, body, opts)
  t.equal(ours.success, false, 'the used Permit2 nonce is refused by us afterwards')
  t.equal(ours.errorReason, 'permit2_invalid_nonce')
})

t.test('upto: settles exactly the amount used, refuses more than the signed maximum, zero sends nothing', async (t) => {
  const maximum = '50000'
  const used = '12345'
  const body = await sdkUptoBody(f, payer, uptoRequirements(f, maximum))
  const atSettle = (amount: string) => ({ ...body, paymentRequirements: { ...body.paymentRequirements, amount } })

  const [payerBefore, payeeBefore] = await balances(...parties)
  const above = await settleExact(f.ctx, atSettle('50001'), opts)
  t.match(above, { success: false, errorReason: 'invalid_upto_evm_payload_settlement_exceeds_amount', transaction: '', payer: accounts.payer.address })
  t.match(above.errorMessage, /exceeds the signed maximum/)
  t.same(await balances(...parties), [payerBefore, payeeBefore], 'nothing moved')

  const zero = await settleExact(f.ctx, atSettle('0'), opts)
  t.same(zero, { success: true, errorReason: null, payer: accounts.payer.address, transaction: '', network: f.v2Network, amount: '0' })

  const settled = await settleExact(f.ctx, atSettle(used), opts)
  t.match(settled, { success: true, transaction: /^0x[0-9a-f]{64}$/, amount: used })
  t.same(await balances(...parties), [payerBefore - BigInt(used), payeeBefore + BigInt(used)], 'exactly the amount used')
  t.same(await settleExact(f.ctx, atSettle(used), opts), settled, 'a repeat answers the same')
  const other = await settleExact(f.ctx, atSettle('20000'), opts)
  t.equal(other.success, false, 'the same permit cannot be settled again for another amount')
  t.same(await balances(...parties), [payerBefore - BigInt(used), payeeBefore + BigInt(used)], 'still exactly once')
})

t.test('upto: a permit naming another facilitator is refused before anything is sent', async (t) => {
  const body = await sdkUptoBody(f, payer, uptoRequirements(f, '5000', { extra: { name: 'USDC', version: '2', assetTransferMethod: 'permit2', facilitatorAddress: accounts.poor.address } }))
  const result = await settleExact(f.ctx, { ...body, paymentRequirements: { ...body.paymentRequirements, amount: '100' } }, opts)
  t.match(result, { success: false, errorReason: 'upto_facilitator_mismatch', transaction: '' })
})

t.test('a 64-byte EIP-2098 compact signature verifies and settles like its 65-byte form', async (t) => {
  const { parseSignature, serializeCompactSignature, signatureToCompactSignature } = await import('viem')
  const { verifyExact } = await import('../../../plugins/x402-facilitator/evm/verify.ts')
  const body = await sdkBodyV2(f, payer, permit2RequirementsV2(f))
  const full = body.paymentPayload.payload.signature as `0x${string}`
  const compact = serializeCompactSignature(signatureToCompactSignature(parseSignature(full)))
  t.equal((compact.length - 2) / 2, 64, 'the compact form is 64 bytes')
  const compactBody = { ...body, paymentPayload: { ...body.paymentPayload, payload: { ...body.paymentPayload.payload, signature: compact } } }
  t.match(await verifyExact(f.ctx, compactBody), { isValid: true, payer: accounts.payer.address })

  // One bit of r flipped: recovers to someone else.
  const flipped = `${compact.slice(0, 2)}${(Number.parseInt(compact.slice(2, 3), 16) ^ 1).toString(16)}${compact.slice(3)}` as `0x${string}`
  const bad = { ...body, paymentPayload: { ...body.paymentPayload, payload: { ...body.paymentPayload.payload, signature: flipped } } }
  t.match(await verifyExact(f.ctx, bad), { isValid: false, invalidReason: 'invalid_permit2_signature' })
  // 63 bytes: neither form.
  const short = { ...body, paymentPayload: { ...body.paymentPayload, payload: { ...body.paymentPayload.payload, signature: compact.slice(0, -2) } } }
  t.match(await verifyExact(f.ctx, short), { isValid: false })

  const [payerBefore, payeeBefore] = await balances(...parties)
  const settled = await settleExact(f.ctx, compactBody, opts)
  t.match(settled, { success: true, payer: accounts.payer.address, transaction: /^0x[0-9a-f]{64}$/ })
  t.same(await balances(...parties), [payerBefore - BigInt(price), payeeBefore + BigInt(price)], 'the price moved once')
})
