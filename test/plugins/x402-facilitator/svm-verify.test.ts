/**
 * Solana verify on the local SVM: official client payments (v1, v2) are valid; every attack of
 * anchors-2.md §1 and every malformed payload is refused with its code. Parity: each case also
 * goes through the official @x402/svm facilitator on the same SVM; verdicts agree except where
 * ours is stricter on purpose (`stricter: true`), and where both refuse so do the reason codes,
 * except where they differ on purpose (`officialReason`). Both lists are in
 * plugins/x402-facilitator/README.md.
 */
import t from 'tap'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import pino from 'pino'
import { getBase58Encoder, type Address } from '@solana/kit'
import { devAccount } from '../../../examples/svm/index.ts'
import { SvmFacilitator } from '../../../plugins/x402-facilitator/svm/facilitator.ts'
import { signerFromSecretKey } from '../../../plugins/x402-facilitator/svm/keys.ts'
import { svmNetworkForPath } from '../../../plugins/x402-facilitator/svm/networks.ts'
import { bodyV2, craft, ix, officialBody, officialVerdict, settings, standard, startSvmFixture, type SvmFixture } from './svm-helpers.ts'

const f = await startSvmFixture()
t.teardown(() => f.close())

/** A v0 wire transaction without lookups, given one more that loads no account. */
function withEmptyLookup(wire: Buffer, table: Address): Buffer {
  if (wire.at(-1) !== 0) throw new Error('expected a v0 transaction without lookups')
  return Buffer.concat([wire.subarray(0, -1), Buffer.from([1]), Buffer.from(getBase58Encoder().encode(table)), Buffer.from([0, 0])])
}

/** Signs `wire`'s (changed) message again as the payer, in slot 1. */
async function resign(f: SvmFixture, wire: Buffer): Promise<string> {
  wire.set(signerFromSecretKey(f.local.accounts.payer.secretKey).sign(wire.subarray(1 + 64 * wire[0]!)), 65)
  return wire.toString('base64')
}

interface Case {
  name: string
  body: (f: SvmFixture) => Promise<unknown>
  status?: number
  reason: string | null
  /** Ours refuses what the official facilitator accepts. */
  stricter?: boolean
  /**
   * Both refuse, under different codes on purpose: the official facilitator's code (ours is
   * `reason`). Listed in plugins/x402-facilitator/README.md with the stricter cases.
   */
  officialReason?: string
  /** Skip the parity run (the official facilitator cannot judge it, e.g. a body its types reject). */
  noParity?: boolean
}

const cases: Case[] = [
  { name: 'official client v2 payment', body: (f) => officialBody(f, 2), reason: null },
  { name: 'official client v1 payment', body: (f) => officialBody(f, 1), reason: null },
  { name: 'official client with extra.memo', body: (f) => officialBody(f, 2, { extra: { feePayer: f.feePayer, memo: 'order-42' } }), reason: null },
  { name: 'hand-built standard layout', body: async (f) => bodyV2(f, await craft(f, await standard(f))), reason: null },
  { name: 'Token-2022 mint', body: async (f) => bodyV2(f, await craft(f, await standard(f, { mint: f.local.mint2022, program: 'TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb' as Address })), { asset: f.local.mint2022 }), reason: null },
  // --- anchors-2.md §1 attacks
  { name: 'over-cap compute price', body: async (f) => bodyV2(f, await craft(f, [ix.limit(), ix.price(5_000_001n), await ix.transfer(f), ix.memo()])), reason: 'invalid_exact_svm_payload_transaction_instructions_compute_price_instruction_too_high' },
  { name: 'over-cap compute limit', body: async (f) => bodyV2(f, await craft(f, [ix.limit(1_400_000), ix.price(), await ix.transfer(f), ix.memo()])), reason: 'invalid_exact_svm_payload_transaction_instructions_compute_limit_instruction_too_high', stricter: true },
  {
    name: 'fee payer hidden in a memo instruction\'s accounts',
    body: async (f) => bodyV2(f, await craft(f, [ix.limit(), ix.price(), await ix.transfer(f), ix.memo('x', [f.feePayer as Address])])),
    reason: 'invalid_exact_svm_payload_transaction_fee_payer_included_in_instruction_accounts', stricter: true,
  },
  {
    name: 'fee payer as the transfer authority',
    body: async (f) => bodyV2(f, await craft(f, [ix.limit(), ix.price(), await ix.transfer(f, { authority: f.feePayer as Address }), ix.memo()])),
    reason: 'invalid_exact_svm_payload_transaction_fee_payer_transferring_funds',
  },
  {
    name: 'fee payer hidden in a lookup table',
    body: async (f) => {
      const table = devAccount('lookup table').address
      const payeeAta = (await ix.transfer(f)).accounts![2]!.address
      f.local.setLookupTable(table, [payeeAta, f.feePayer as Address])
      // The memo names the fee payer only through the table (a static key would be found directly).
      const memo = { ...ix.memo('y'), accounts: [{ address: f.feePayer as Address, role: 0 }] }
      return bodyV2(f, await craft(f, [ix.limit(), ix.price(), await ix.transfer(f), memo as any], { lookupTables: { [table]: [payeeAta, f.feePayer as Address] } }))
    },
    reason: 'invalid_exact_svm_payload_transaction_fee_payer_included_in_instruction_accounts', stricter: true,
  },
  {
    name: 'unresolvable lookup table',
    body: async (f) => {
      const payeeAta = (await ix.transfer(f)).accounts![2]!.address
      return bodyV2(f, await craft(f, [ix.limit(), ix.price(), await ix.transfer(f), ix.memo()], { lookupTables: { [devAccount('missing table').address]: [payeeAta] } }))
    },
    reason: 'invalid_exact_svm_payload_address_lookup_table_unresolved',
    // Its smart-wallet code (with the missing address after ': '); ours serves no smart wallets.
    officialReason: 'invalid_exact_svm_smart_wallet_alt_resolution_failed',
  },
  {
    name: 'an extra required signer',
    body: async (f) => {
      const other = f.local.accounts.poor
      return bodyV2(f, await craft(f, [ix.limit(), ix.price(), await ix.transfer(f), ix.memo('z', [other.address])].map((i, n) => n === 3 ? { ...i, accounts: [{ address: other.address, role: 2 }] } : i) as any, { extraSigners: [other] }))
    },
    reason: 'invalid_exact_svm_payload_excessive_signers', stricter: true,
  },
  { name: 'wrong mint', body: async (f) => bodyV2(f, await craft(f, await standard(f, { mint: f.local.mint2022, program: 'TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb' as Address }))), reason: 'invalid_exact_svm_payload_mint_mismatch' },
  { name: 'wrong destination (the payer\'s own account)', body: async (f) => bodyV2(f, await craft(f, await standard(f, { destinationOwner: f.payer.address }))), reason: 'invalid_exact_svm_payload_recipient_mismatch' },
  { name: 'amount one less', body: async (f) => bodyV2(f, await craft(f, await standard(f, { amount: 9_999n }))), reason: 'invalid_exact_svm_payload_amount_mismatch' },
  { name: 'wrong decimals', body: async (f) => bodyV2(f, await craft(f, await standard(f, { decimals: 9 }))), reason: 'invalid_exact_svm_payload_decimals_mismatch', officialReason: 'invalid_exact_svm_transaction_simulation_failed' },
  { name: 'unknown fourth instruction', body: async (f) => bodyV2(f, await craft(f, [ix.limit(), ix.price(), await ix.transfer(f), { ...ix.limit(), programAddress: 'Stake11111111111111111111111111111111111111' as Address }])), reason: 'invalid_exact_svm_payload_unknown_fourth_instruction' },
  { name: 'two instructions only', body: async (f) => bodyV2(f, await craft(f, [ix.limit(), await ix.transfer(f)])), reason: 'invalid_exact_svm_payload_transaction_instructions_length' },
  { name: 'compute price first', body: async (f) => bodyV2(f, await craft(f, [ix.price(), ix.limit(), await ix.transfer(f), ix.memo()])), reason: 'invalid_exact_svm_payload_transaction_instructions_compute_limit_instruction' },
  { name: 'memo differs from extra.memo', body: async (f) => bodyV2(f, await craft(f, await standard(f)), { extra: { feePayer: f.feePayer, memo: 'order-42' } }), reason: 'invalid_exact_svm_payload_memo_mismatch' },
  { name: 'fee payer not ours', body: async (f) => bodyV2(f, await craft(f, await standard(f)), { extra: { feePayer: f.local.accounts.poor.address } }), reason: 'invalid_exact_svm_fee_payer_not_managed_by_facilitator' },
  { name: 'extra.feePayer missing', body: async (f) => bodyV2(f, await craft(f, await standard(f)), { extra: {} }), reason: 'invalid_exact_svm_payload_missing_fee_payer' },
  { name: 'transaction fee payer differs from extra.feePayer', body: async (f) => bodyV2(f, await craft(f, await standard(f), { feePayer: f.local.accounts.poor.address })), reason: 'invalid_exact_svm_fee_payer_mismatch' },
  {
    name: 'payer signature does not verify',
    body: async (f) => {
      const wire = Buffer.from(await craft(f, await standard(f)), 'base64')
      wire[1 + 64 + 5] ^= 0xff
      return bodyV2(f, wire.toString('base64'))
    },
    reason: 'invalid_exact_svm_payload_signature_invalid',
  },
  { name: 'payer without tokens (simulation)', body: async (f) => bodyV2(f, await craft(f, await standard(f, { destinationOwner: f.local.accounts.payee.address, amount: 10n ** 13n })), { amount: String(10n ** 13n) }), reason: 'invalid_exact_svm_transaction_simulation_failed' },
  { name: 'scheme upto', body: async (f) => bodyV2(f, await craft(f, await standard(f)), { scheme: 'upto' }), reason: 'invalid_exact_svm_unsupported_scheme' },
  { name: 'devnet network', body: async (f) => bodyV2(f, await craft(f, await standard(f)), { network: 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1' }), reason: 'invalid_exact_svm_network_mismatch', stricter: true },
  // --- malformed payloads: 400 or isValid false, never 5xx
  { name: 'bad base64', body: async (f) => bodyV2(f, '!!!not base64!!!'), status: 400, reason: 'invalid_payload', noParity: true },
  { name: 'truncated transaction', body: async (f) => bodyV2(f, Buffer.from(await craft(f, await standard(f)), 'base64').subarray(0, 150).toString('base64')), reason: 'invalid_exact_svm_payload_transaction_could_not_be_decoded' },
  {
    name: 'message version 1',
    body: async (f) => {
      const wire = Buffer.from(await craft(f, await standard(f)), 'base64')
      wire[1 + 128] = 0x81
      return bodyV2(f, wire.toString('base64'))
    },
    reason: 'invalid_exact_svm_payload_transaction_could_not_be_decoded',
  },
  { name: 'empty-ish transaction', body: async (f) => bodyV2(f, 'AAAA'), reason: 'invalid_exact_svm_payload_transaction_could_not_be_decoded' },
  { name: 'missing payload.transaction', body: async (f) => ({ ...bodyV2(f, 'AAAA'), paymentPayload: { x402Version: 2, accepted: bodyV2(f, '').paymentRequirements, payload: {} } }), status: 400, reason: 'invalid_payload', noParity: true },
  { name: 'absurd amount', body: async (f) => bodyV2(f, await craft(f, await standard(f)), { amount: '99999999999999999999' }), status: 400, reason: 'invalid_payload', noParity: true },
  { name: 'amount not a string', body: async (f) => bodyV2(f, await craft(f, await standard(f)), { amount: 10000 }), status: 400, reason: 'invalid_payload', noParity: true },
  // Found by svm-fuzz.test.ts: a 36-character base58 payTo (27 bytes) threw in the ATA derivation (502).
  { name: 'payTo that is not 32 bytes', body: async (f) => bodyV2(f, await craft(f, await standard(f)), { payTo: 'QgWi3yn3FioBM1aA5YbPFFZ46kYwx1kgFqqt' }), status: 400, reason: 'invalid_payload', noParity: true },
  {
    // Solana's sanitize refuses it; a real node answers its simulation with a JSON-RPC error (was a 502).
    name: 'lookup table loading no account',
    body: async (f) => {
      const table = devAccount('empty lookup').address
      f.local.setLookupTable(table, [f.local.accounts.poor.address])
      return bodyV2(f, await resign(f, withEmptyLookup(Buffer.from(await craft(f, await standard(f)), 'base64'), table)))
    },
    reason: 'invalid_exact_svm_payload_transaction_could_not_be_decoded',
    officialReason: 'invalid_exact_svm_transaction_simulation_failed',
  },
  { name: 'x402Version 3', body: async (f) => ({ ...bodyV2(f, 'AAAA'), x402Version: 3 }), status: 400, reason: 'invalid_x402_version', noParity: true },
  { name: 'body is an array', body: async () => [], status: 400, reason: 'invalid_payload', noParity: true },
]

/** The official facilitator sometimes appends details after the code (`<code>: <message>`). */
const codeOf = (reason: string | undefined) => reason?.split(': ')[0]

const stricterSeen: string[] = []
for (const c of cases) {
  t.test(c.name, async (t) => {
    const body = await c.body(f)
    const { status, body: answer } = await f.facilitator.verify(body)
    t.equal(status, c.status ?? 200, 'status')
    t.equal(answer.invalidReason, c.reason, `reason: ${answer.invalidMessage ?? ''}`)
    t.equal(answer.isValid, c.reason === null, 'isValid')
    if (c.noParity) return
    const official = await officialVerdict(f, body)
    if (c.stricter) {
      stricterSeen.push(c.name)
      t.equal(official.isValid, true, `the official facilitator accepts it (${official.invalidReason ?? 'valid'}); ours is stricter on purpose`)
      return
    }
    t.equal(official.isValid, answer.isValid, `the official facilitator agrees (${official.invalidReason ?? 'valid'})`)
    // Where both refuse, the code is part of the verdict: the same one, or the one marked.
    if (!answer.isValid) {
      t.equal(codeOf(official.invalidReason), c.officialReason ?? c.reason, c.officialReason ? `the official code differs on purpose (ours ${c.reason})` : 'the same code')
    }
  })
}

t.test('an expired blockhash is refused before simulation', async (t) => {
  const body = await officialBody(f, 2)
  f.local.expireBlockhash()
  const { body: answer } = await f.facilitator.verify(body)
  t.equal(answer.invalidReason, 'invalid_exact_svm_payload_blockhash_expired')
  // Parity: the official facilitator refuses it too, in its simulation, under that code.
  const official = await officialVerdict(f, body)
  t.same([official.isValid, codeOf(official.invalidReason)], [false, 'invalid_exact_svm_transaction_simulation_failed'], `the official code differs on purpose (${official.invalidReason})`)
})

t.test('a transaction the node refuses to simulate (JSON-RPC invalid params) is a failed simulation, not a 502', async (t) => {
  // A stand-in for a real node: it answers simulateTransaction with the -32602 error a Solana node
  // gives a transaction it cannot sanitize, and passes every other call to the local SVM.
  let refuse = 'invalid'
  const front = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', async () => {
      const text = Buffer.concat(chunks).toString('utf8')
      const call = JSON.parse(text)
      res.writeHead(200, { 'content-type': 'application/json' })
      if (call.method === 'simulateTransaction') {
        const error = refuse === 'invalid' ? { code: -32602, message: 'invalid transaction: Transaction failed to sanitize accounts offsets correctly' } : { code: -32005, message: 'Node is unhealthy' }
        return res.end(JSON.stringify({ jsonrpc: '2.0', id: call.id, error }))
      }
      const answer = await fetch(f.local.rpcUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: text })
      res.end(await answer.text())
    })
  })
  await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${(front.address() as AddressInfo).port}`
  const facilitator = await SvmFacilitator.open('solana/testnet', svmNetworkForPath('testnet')!, [signerFromSecretKey(f.local.accounts.facilitator.secretKey)],
    settings(url, { assets: [{ address: f.local.mint, decimals: 6 }] }), f.records, pino({ level: 'silent' }))
  t.teardown(async () => {
    await facilitator.close()
    await new Promise((resolve) => front.close(resolve))
  })
  const body = await officialBody(f, 2)
  const verdict = await facilitator.verify(structuredClone(body))
  t.match(verdict, { status: 200, body: { isValid: false, invalidReason: 'invalid_exact_svm_transaction_simulation_failed', invalidMessage: /node refused the transaction/ } })
  const sent = f.local.front.executed.length
  const settled = await facilitator.settle(structuredClone(body))
  t.match(settled, { status: 200, body: { success: false, errorReason: 'invalid_exact_svm_transaction_simulation_failed', transaction: '' } })
  t.equal(f.local.front.executed.length, sent, 'nothing sent')
  // Any other refusal is the node's trouble: still a 502.
  refuse = 'unhealthy'
  const fault = await facilitator.verify(structuredClone(body)).then(() => undefined, (error: unknown) => error as { status?: number })
  t.equal(fault?.status, 502, 'an unhealthy node is a 502')
})
