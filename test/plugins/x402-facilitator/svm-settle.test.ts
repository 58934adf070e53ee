/**
 * Solana settle on the local SVM with records in a SQLite store: funds move exactly once (SVM
 * balances checked), repeats and re-signed copies return the original answer, concurrent settles
 * send one transaction, and a cluster that does not confirm gives settlement_pending with the
 * signature, reconciled by a later settle.
 */
import t from 'tap'
import { officialBody, price, startSvmFixture } from './svm-helpers.ts'

const f = await startSvmFixture({ confirmTimeoutMs: 600 })
t.teardown(() => f.close())
const payee = f.local.accounts.payee.address
const payer = f.local.accounts.payer.address

t.test('official v2 and v1 payments settle once; balances move exactly once', async (t) => {
  for (const version of [2, 1] as const) {
    const before = { payee: await f.local.tokenBalance(payee), payer: await f.local.tokenBalance(payer), fee: f.local.lamports(f.feePayer as any) }
    const sent = f.local.front.executed.length
    const body = await officialBody(f, version)
    const { status, body: answer } = await f.facilitator.settle(body)
    t.equal(status, 200)
    t.match(answer, { success: true, errorReason: null, payer })
    t.match(answer.transaction, /^[1-9A-HJ-NP-Za-km-z]{64,88}$/, 'a base58 signature')
    t.equal(await f.local.tokenBalance(payee), before.payee + BigInt(price), `v${version}: payee received the price`)
    t.equal(await f.local.tokenBalance(payer), before.payer - BigInt(price), `v${version}: payer paid the price`)
    t.ok(f.local.lamports(f.feePayer as any) < before.fee, 'the facilitator paid the fee')
    t.equal(f.local.front.executed.length, sent + 1, 'one transaction')
    const again = await f.facilitator.settle(body)
    t.same(again.body, answer, 'a repeat returns the original answer')
    t.equal(await f.local.tokenBalance(payee), before.payee + BigInt(price), 'and moves nothing')
  }
})

t.test('a re-signed duplicate (other fee-payer slot bytes) is the same payment', async (t) => {
  const body = await officialBody(f, 2)
  const first = await f.facilitator.settle(structuredClone(body))
  t.equal(first.body.success, true)
  const balance = await f.local.tokenBalance(payee)
  const wire = Buffer.from(body.paymentPayload.payload.transaction, 'base64')
  wire.fill(7, 1, 65) // the fee payer's slot
  const copy = structuredClone(body)
  copy.paymentPayload.payload.transaction = wire.toString('base64')
  const second = await f.facilitator.settle(copy)
  t.same(second.body, first.body, 'answered from the record')
  t.equal(await f.local.tokenBalance(payee), balance, 'no second transfer')
})

t.test('concurrent settles of one payment send one transaction', async (t) => {
  const body = await officialBody(f, 2)
  const before = await f.local.tokenBalance(payee)
  const sent = f.local.front.executed.length
  const answers = await Promise.all(Array.from({ length: 6 }, () => f.facilitator.settle(structuredClone(body))))
  const successes = answers.filter((a) => a.body.success)
  t.ok(successes.length >= 1, 'at least one success')
  t.equal(new Set(successes.map((a) => a.body.transaction)).size, 1, 'one signature')
  for (const a of answers) if (!a.body.success) t.equal(a.body.errorReason, 'duplicate_settlement')
  t.equal(f.local.front.executed.length, sent + 1, 'one transaction sent')
  t.equal(await f.local.tokenBalance(payee), before + BigInt(price), 'paid once')
})

t.test('not confirmed in time: settlement_pending with the signature, reconciled later', async (t) => {
  const body = await officialBody(f, 2)
  const before = await f.local.tokenBalance(payee)
  f.local.front.hold()
  const pending = await f.facilitator.settle(structuredClone(body))
  t.match(pending.body, { success: false, errorReason: 'settlement_pending' })
  t.match(pending.body.transaction, /^[1-9A-HJ-NP-Za-km-z]{64,88}$/, 'carries the signature')
  const stillPending = await f.facilitator.settle(structuredClone(body))
  t.equal(stillPending.body.errorReason, 'settlement_pending', 'a repeat while unconfirmed sends nothing new')
  f.local.front.release()
  const settled = await f.facilitator.settle(structuredClone(body))
  t.match(settled.body, { success: true, transaction: pending.body.transaction }, 'the same transaction, now confirmed')
  t.equal(await f.local.tokenBalance(payee), before + BigInt(price), 'paid once')
})

t.test('a sent transaction whose blockhash expires unlanded is released and may be paid anew', async (t) => {
  const body = await officialBody(f, 2)
  const before = await f.local.tokenBalance(payee)
  f.local.front.hold()
  const pending = await f.facilitator.settle(structuredClone(body))
  t.equal(pending.body.errorReason, 'settlement_pending')
  f.local.expireBlockhash()
  f.local.front.release() // the queued transaction now fails BlockhashNotFound and never lands
  const failed = await f.facilitator.settle(structuredClone(body))
  t.match(failed.body, { success: false, errorReason: 'invalid_exact_svm_transaction_failed' })
  t.match(failed.body.errorMessage, /expired without landing/)
  t.equal(await f.local.tokenBalance(payee), before, 'nothing moved')
  const fresh = await officialBody(f, 2)
  t.match((await f.facilitator.settle(fresh)).body, { success: true }, 'a new payment settles')
})

t.test('settle refuses what verify refuses, before sending anything', async (t) => {
  const body = await officialBody(f, 2, { amount: '20000' })
  body.paymentRequirements.amount = '10000'
  body.paymentPayload.accepted.amount = '10000'
  const sent = f.local.front.executed.length
  const answer = await f.facilitator.settle(body)
  t.match(answer.body, { success: false, errorReason: 'invalid_exact_svm_payload_amount_mismatch', transaction: '' })
  t.equal(f.local.front.executed.length, sent)
  const malformed = await f.facilitator.settle({ x402Version: 2 })
  t.equal(malformed.status, 400)
})

t.test('close lets go of the RPC connections (a reload replaces the facilitator)', async (t) => {
  const second = await startSvmFixture()
  t.same(await second.facilitator.health(), { ok: true }, 'healthy while open')
  await second.facilitator.close()
  t.equal((await second.facilitator.health()).ok, false, 'a closed facilitator no longer reaches its RPC')
  await second.close()
})
