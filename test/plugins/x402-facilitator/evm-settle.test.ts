/**
 * settle on a real local chain (Base Sepolia's chain id) with settlement records in the SQLite
 * store: transfers checked by on-chain balances, exactly-once under concurrency, ERC-1271 payers,
 * bounded receipt waits that answer `settlement_pending` with the hash.
 */
import { createServer, type Server } from 'node:http'
import t from 'tap'
import { createWalletClient, http, parseAbi, type Address } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { settleExact, type SettleLogger, type SettleOptions } from '../../../plugins/x402-facilitator/evm/settle.ts'
import { settlementKey, type SettlementRecords } from '../../../plugins/x402-facilitator/evm/records.ts'
import { createEvmChainContext } from '../../../plugins/x402-facilitator/evm/context.ts'
import { reasonForRevert, revertText } from '../../../plugins/x402-facilitator/evm/reverts.ts'
import { eip3009Abi } from '../../../plugins/x402-facilitator/evm/abi.ts'
import { verifyExact } from '../../../plugins/x402-facilitator/evm/verify.ts'
import {
  bodyV2, price, requirementsV2, sdkBodyV1, sdkBodyV2, sdkSigner, signAuthorization, startFixture,
} from './evm-helpers.ts'

const f = await startFixture(84532)
t.teardown(() => f.close())
const { accounts } = f.chain
const payer = sdkSigner(accounts.payer.privateKey)

const logs: { fields: Record<string, unknown>; message: string }[] = []
const log: SettleLogger = {
  info: (fields, message) => logs.push({ fields, message }),
  warn: (fields, message) => logs.push({ fields, message }),
  error: (fields, message) => logs.push({ fields, message }),
}
const opts: SettleOptions = { receiptTimeoutMs: 10_000, records: f.records, log }
const broadcasts = () => logs.filter((l) => l.fields.event === 'x402_broadcast').length

async function balances(...who: Address[]) {
  return Promise.all(who.map((a) => f.balanceOf(a)))
}

t.test('a v2 payment from the official SDK settles once; a repeat returns the stored result', async (t) => {
  const [payerBefore, payeeBefore] = await balances(accounts.payer.address, accounts.payee.address)
  const body = await sdkBodyV2(f, payer)
  const before = broadcasts()
  const result = await settleExact(f.ctx, body, opts)
  t.match(result, { success: true, errorReason: null, payer: accounts.payer.address, network: 'eip155:84532', transaction: /^0x[0-9a-f]{64}$/ })
  t.equal(result.pending, undefined)
  t.same(await balances(accounts.payer.address, accounts.payee.address), [payerBefore - BigInt(price), payeeBefore + BigInt(price)])
  t.equal(broadcasts() - before, 1)
  t.match(logs.find((l) => l.fields.tx === result.transaction && l.fields.event === 'x402_broadcast')?.fields,
    { chainId: 84532, payer: accounts.payer.address, asset: f.chain.token })

  const again = await settleExact(f.ctx, body, opts)
  t.same(again, result, 'same answer, same transaction')
  t.equal(broadcasts() - before, 1, 'nothing broadcast again')
  t.same(await balances(accounts.payer.address), [payerBefore - BigInt(price)])
  t.equal((await verifyExact(f.ctx, body)).invalidReason, 'invalid_exact_evm_nonce_already_used')

  // Another payment that reuses the nonce with other terms is not "already settled".
  const nonce = body.paymentPayload.payload.authorization.nonce
  const reuse = bodyV2(requirementsV2(f, { amount: '20000' }), await signAuthorization(f, { nonce, value: '20000' }))
  t.match(await settleExact(f.ctx, reuse, opts), { success: false, errorReason: 'invalid_exact_evm_nonce_already_used', transaction: '' })
})

t.test('a v1 payment from the official SDK settles and echoes the v1 network name', async (t) => {
  const [payeeBefore] = await balances(accounts.payee.address)
  const result = await settleExact(f.ctx, await sdkBodyV1(f, payer), opts)
  t.match(result, { success: true, network: 'base-sepolia', payer: accounts.payer.address })
  t.same(await balances(accounts.payee.address), [payeeBefore + BigInt(price)])
})

t.test('failures before broadcast send nothing, and the same authorization can settle later', async (t) => {
  const body = bodyV2(requirementsV2(f), await signAuthorization(f, { key: accounts.poor.privateKey }))
  const before = broadcasts()
  const result = await settleExact(f.ctx, body, opts)
  t.same(result, {
    success: false, errorReason: 'invalid_exact_evm_insufficient_balance', errorMessage: 'ERC20: transfer amount exceeds balance',
    payer: accounts.poor.address, transaction: '', network: 'eip155:84532', details: { balance: '0', required: price },
  })
  t.equal(broadcasts(), before)

  // The payer tops up; retrying the very same authorization now settles.
  const minter = createWalletClient({ account: privateKeyToAccount(accounts.deployer.privateKey), chain: f.chain.viemChain, transport: http(f.chain.rpcUrl, { retryCount: 0 }) })
  const hash = await minter.writeContract({ address: f.chain.token, abi: parseAbi(['function mint(address, uint256)']), functionName: 'mint', args: [accounts.poor.address, BigInt(price)] })
  await f.ctx.publicClient.waitForTransactionReceipt({ hash, pollingInterval: 20 })
  t.match(await settleExact(f.ctx, body, opts), { success: true, payer: accounts.poor.address })
  t.same(await balances(accounts.poor.address), [0n])

  const malformed = await settleExact(f.ctx, { x402Version: 2, paymentPayload: { x402Version: 2, accepted: { network: 'eip155:84532' } } }, opts)
  t.match(malformed, { success: false, errorReason: 'invalid_payload', transaction: '', network: 'eip155:84532', errorMessage: 'paymentRequirements is required' })
  const expired = await settleExact(f.ctx, bodyV2(requirementsV2(f), await signAuthorization(f, { validBefore: Math.floor(Date.now() / 1000) - 1 })), opts)
  t.match(expired, { success: false, errorReason: 'invalid_exact_evm_payload_authorization_valid_before', transaction: '' })
})

t.test('an ERC-1271 smart wallet pays: official SDK signature, and a compact signature via the bytes overload', async (t) => {
  const wallet = f.chain.wallet1271
  const [walletBefore, payeeBefore] = await balances(wallet, accounts.payee.address)
  const body = await sdkBodyV2(f, sdkSigner(accounts.walletOwner.privateKey, wallet))
  t.same(await verifyExact(f.ctx, body), { isValid: true, invalidReason: null, payer: wallet })
  t.match(await settleExact(f.ctx, body, opts), { success: true, payer: wallet })
  t.same(await balances(wallet, accounts.payee.address), [walletBefore - BigInt(price), payeeBefore + BigInt(price)])

  // EIP-2098 64-byte signature: only the token's bytes overload can carry it.
  const signed = await signAuthorization(f, { key: accounts.walletOwner.privateKey, from: wallet })
  const r = signed.signature.slice(2, 66)
  const s = BigInt(`0x${signed.signature.slice(66, 130)}`)
  const yParity = Number.parseInt(signed.signature.slice(130), 16) - 27
  const compact = `0x${r}${((BigInt(yParity) << 255n) | s).toString(16).padStart(64, '0')}`
  t.match(await settleExact(f.ctx, bodyV2(requirementsV2(f), { ...signed, signature: compact }), opts), { success: true })
  t.same(await balances(wallet), [walletBefore - 2n * BigInt(price)])

  const notOwner = await signAuthorization(f, { key: accounts.poor.privateKey, from: wallet })
  t.match(await verifyExact(f.ctx, bodyV2(requirementsV2(f), notOwner)), {
    invalidReason: 'invalid_exact_evm_signature', invalidMessage: /ERC-1271 isValidSignature rejected/,
  })
})

t.test('50 concurrent settles of one authorization make one transfer and all get its hash', async (t) => {
  const [payerBefore, payeeBefore] = await balances(accounts.payer.address, accounts.payee.address)
  const body = await sdkBodyV2(f, payer)
  const before = broadcasts()
  const results = await Promise.all(Array.from({ length: 50 }, () => settleExact(f.ctx, structuredClone(body), opts)))
  const hashes = new Set(results.map((r) => r.transaction))
  t.equal(hashes.size, 1, 'one transaction hash')
  t.ok(results.every((r) => r.success), 'every caller learns of the success')
  t.equal(broadcasts() - before, 1, 'one broadcast')
  t.same(await balances(accounts.payer.address, accounts.payee.address), [payerBefore - BigInt(price), payeeBefore + BigInt(price)])
})

t.test('two gateway instances sharing the store settle one authorization once', async (t) => {
  const [payeeBefore] = await balances(accounts.payee.address)
  const body = await sdkBodyV2(f, payer)
  const before = broadcasts()
  const results = await Promise.all(Array.from({ length: 20 }, (_, i) =>
    settleExact(f.ctx, structuredClone(body), { ...opts, records: i % 2 === 0 ? f.records : f.otherRecords })))
  t.equal(broadcasts() - before, 1, 'one broadcast')
  const successes = results.filter((r) => r.success)
  t.ok(successes.length >= 10, 'at least the winning instance\'s callers succeed')
  t.equal(new Set(successes.map((r) => r.transaction)).size, 1)
  for (const r of results.filter((x) => !x.success)) t.equal(r.errorReason, 'duplicate_settlement', 'losers are told it is in progress')
  t.same(await balances(accounts.payee.address), [payeeBefore + BigInt(price)])
  t.match(await settleExact(f.ctx, body, { ...opts, records: f.otherRecords }), { success: true, transaction: successes[0]!.transaction },
    'afterwards either instance answers with the stored result')
})

t.test('concurrent settles of different authorizations all land (facilitator nonces serialised)', async (t) => {
  const [payeeBefore] = await balances(accounts.payee.address)
  const bodies = await Promise.all(Array.from({ length: 10 }, () => sdkBodyV2(f, payer)))
  const results = await Promise.all(bodies.map((b) => settleExact(f.ctx, b, opts)))
  t.ok(results.every((r) => r.success), results.map((r) => r.errorReason ?? 'ok').join(','))
  t.equal(new Set(results.map((r) => r.transaction)).size, 10)
  t.same(await balances(accounts.payee.address), [payeeBefore + 10n * BigInt(price)])
})

t.test('a receipt not seen in time answers settlement_pending with the hash; a later settle reconciles', async (t) => {
  const [payeeBefore] = await balances(accounts.payee.address)
  const body = await sdkBodyV2(f, payer)
  await f.chain.request('evm_setAutomine', [false])
  t.teardown(() => f.chain.request('evm_setAutomine', [true]))
  const pending = await settleExact(f.ctx, body, { ...opts, receiptTimeoutMs: 300 })
  t.match(pending, { success: false, errorReason: 'settlement_pending', pending: true, transaction: /^0x[0-9a-f]{64}$/ })
  const stillPending = await settleExact(f.ctx, body, { ...opts, receiptTimeoutMs: 200 })
  t.match(stillPending, { errorReason: 'settlement_pending', transaction: pending.transaction }, 'a retry waits on the same transaction')
  t.same(await balances(accounts.payee.address), [payeeBefore])

  await f.chain.request('evm_mine', [])
  const settled = await settleExact(f.ctx, body, opts)
  t.match(settled, { success: true, transaction: pending.transaction })
  t.same(await balances(accounts.payee.address), [payeeBefore + BigInt(price)])
})

t.test('records: a fresh claim elsewhere is a duplicate, an abandoned one is taken over, a store fault sends nothing', async (t) => {
  const body = await sdkBodyV2(f, payer)
  const auth = body.paymentPayload.payload.authorization
  const key = settlementKey(84532, f.chain.token, auth.from, auth.nonce)
  const { created } = await f.records.claim(key, { state: 'claimed', fingerprint: 'other-terms', claimedAt: Date.now() })
  t.ok(created)
  t.match(await settleExact(f.ctx, body, opts), { errorReason: 'duplicate_settlement', transaction: '' })
  await f.records.release(key)

  // Claimed by a process that died three minutes ago without broadcasting: taken over.
  const other = await sdkBodyV2(f, payer)
  const auth2 = other.paymentPayload.payload.authorization
  await f.records.claim(settlementKey(84532, f.chain.token, auth2.from, auth2.nonce), { state: 'claimed', fingerprint: 'abandoned', claimedAt: Date.now() - 180_000 })
  t.match(await settleExact(f.ctx, other, { ...opts, staleClaimMs: 60_000 }), { success: true })
  t.match(await settleExact(f.ctx, other, opts), { success: true }, 'and its outcome is the stored one now')

  const broken: SettlementRecords = {
    claim: () => Promise.reject(new Error('disk I/O error')), update: async () => {}, release: async () => {},
  }
  const before = broadcasts()
  t.match(await settleExact(f.ctx, await sdkBodyV2(f, payer), { ...opts, records: broken }), {
    success: false, errorReason: 'unexpected_settle_error', transaction: '', errorMessage: /disk I\/O error/,
  })
  t.equal(broadcasts(), before)
})


/** An RPC in front of the chain that loses the answer to eth_sendRawTransaction (after forwarding it, or instead). */
async function lossyRpc(forward: boolean): Promise<{ url: string; server: Server }> {
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const body = Buffer.concat(chunks).toString()
    const isSend = /"eth_sendRawTransaction"/.test(body)
    if (isSend && !forward) return void req.socket.destroy()
    const upstream = await fetch(f.chain.rpcUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
    const text = await upstream.text()
    if (isSend) return void req.socket.destroy()
    res.writeHead(upstream.status, { 'content-type': 'application/json' }).end(text)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  return { url: `http://127.0.0.1:${port}`, server }
}

t.test('a send whose answer is lost is never a bare failure: settled if mined, else pending with the hash', async (t) => {
  const [payeeBefore] = await balances(accounts.payee.address)
  const contextVia = (rpcUrl: string) => createEvmChainContext({
    network: 84532, rpcUrl, signerPrivateKey: accounts.facilitator.privateKey, assets: f.ctx.assets, pollingIntervalMs: 20,
  })
  const delivered = await lossyRpc(true)
  t.teardown(() => delivered.server.close())
  const first = await settleExact(contextVia(delivered.url), await sdkBodyV2(f, payer), opts)
  t.match(first, { success: true, transaction: /^0x[0-9a-f]{64}$/ }, 'the node got it and mined it')

  const dropped = await lossyRpc(false)
  t.teardown(() => dropped.server.close())
  const body = await sdkBodyV2(f, payer)
  const lost = await settleExact(contextVia(dropped.url), body, { ...opts, receiptTimeoutMs: 300 })
  t.match(lost, { success: false, errorReason: 'settlement_pending', pending: true, transaction: /^0x[0-9a-f]{64}$/ })
  t.same(await balances(accounts.payee.address), [payeeBefore + BigInt(price)], 'only the first payment moved')

  // Retried once the record is old: the node never heard of that hash, so it is settled afresh.
  const retried = await settleExact(f.ctx, body, { ...opts, staleClaimMs: 0 })
  t.match(retried, { success: true, transaction: /^0x[0-9a-f]{64}$/ })
  t.same(await balances(accounts.payee.address), [payeeBefore + 2n * BigInt(price)])
})

t.test('revert texts from the node map to reference codes', async (t) => {
  const signed = await signAuthorization(f, { key: accounts.poor.privateKey })
  const a = signed.authorization
  const error = await f.ctx.publicClient.estimateContractGas({
    account: accounts.facilitator.address, address: f.chain.token, abi: eip3009Abi, functionName: 'transferWithAuthorization',
    args: [a.from as Address, a.to as Address, BigInt(a.value), BigInt(a.validAfter), BigInt(a.validBefore), a.nonce as `0x${string}`, signed.signature as `0x${string}`],
  }).catch((e: unknown) => e)
  t.equal(revertText(error), 'ERC20: transfer amount exceeds balance')
  t.same(reasonForRevert('FiatTokenV2: authorization is used or canceled', 'x'), { reason: 'invalid_exact_evm_nonce_already_used', message: 'FiatTokenV2: authorization is used or canceled' })
  t.same(reasonForRevert('FiatTokenV2: authorization is expired', 'x').reason, 'invalid_exact_evm_payload_authorization_valid_before')
  t.same(reasonForRevert('FiatTokenV2: invalid signature', 'x').reason, 'invalid_exact_evm_signature')
  t.same(reasonForRevert('Pausable: paused', 'fallback'), { reason: 'fallback', message: 'Pausable: paused' })
})
