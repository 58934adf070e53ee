/**
 * x402 `exact` verify on Solana: every check of the official `@x402/svm` facilitator, in its
 * order, plus the ones it leaves out (marked "stricter").
 *
 * Order (first failure wins): schema → scheme → network → v2 accepted == requirements →
 * extra.feePayer present and ours → asset accepted → decode → fee payer is account 0 → at most two
 * signers (stricter: the official facilitator does not cap them by default) → signatures of the
 * other signers →
 * lookup tables resolved (fail closed) → 3–7 instructions → SetComputeUnitLimit (stricter: capped)
 * → SetComputeUnitPrice (≤ cap) → TransferChecked (Token / Token-2022, no multisig) → authority is
 * not ours → mint → token program and decimals (stricter) → destination = ATA(payTo) → amount →
 * extras are Lighthouse or Memo → memo → fee payer in no instruction's accounts and no program
 * (stricter: official checks only the authority) → co-signed simulation with signature
 * verification, whose `BlockhashNotFound` is answered as its own reason, `…_blockhash_expired`
 * (the official facilitator reports it as a failed simulation); no separate RPC call for it. A
 * simulation the node refuses with "invalid params" (a transaction it cannot sanitize) is a failed
 * simulation too, not a 502.
 */
import { associatedTokenAccount, TOKEN_2022_PROGRAM, TOKEN_PROGRAM } from './ata.ts'
import type { SvmContext } from './context.ts'
import { svmReasons as reasons } from './errors.ts'
import { verifySignature, type SvmSigner } from './keys.ts'
import { SvmRpcRejection } from './rpc.ts'
import { parseSvmRequest, type SvmRequest } from './schema.ts'
import { addressBytes, decodeTransaction, messageHash, toBase58, withSignature, WireError, type DecodedTransaction } from './wire.ts'
import type { VerifyResponse } from '../evm/types.ts'

const COMPUTE_BUDGET = 'ComputeBudget111111111111111111111111111111'
const MEMO = 'MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr'
const LIGHTHOUSE = 'L2TExMFKdjpN9kozasaurPirfHy9P8sbXoAN1qA3S95'
const LOOKUP_TABLE_PROGRAM = 'AddressLookupTab1e1111111111111111111111111'
const LOOKUP_TABLE_HEADER = 56
/** JSON-RPC "invalid params": what a Solana node answers for a transaction it cannot sanitize. */
const INVALID_PARAMS = -32602

/** What settle needs from a payment verify approved. */
export interface VerifiedPayment {
  request: SvmRequest
  tx: DecodedTransaction
  /** Base64 wire transaction co-signed by the fee payer. */
  signedBase64: string
  /** The fee payer's signature: the transaction id. */
  signature: string
  messageHash: string
  payer: string
  feePayer: SvmSigner
}

export interface SvmCheckOutcome {
  response: VerifyResponse
  /** 400 for a malformed body. */
  malformed?: boolean
  payment?: VerifiedPayment
}

function invalid(reason: string, message: string, payer = '', details?: Record<string, unknown>): SvmCheckOutcome {
  const response: VerifyResponse = { isValid: false, invalidReason: reason, invalidMessage: message, payer }
  if (details) response.details = details
  return { response }
}

function sameTerms(accepted: Record<string, unknown>, requirements: Record<string, unknown>): string | undefined {
  for (const field of ['scheme', 'network', 'amount', 'asset', 'payTo'] as const) {
    if (accepted[field] !== requirements[field]) return field
  }
  const a = (accepted.extra as any)?.feePayer
  const r = (requirements.extra as any)?.feePayer
  if (a !== r) return 'extra.feePayer'
  return undefined
}

/** All account keys of the message: static, then looked-up writable, then looked-up readonly. */
async function resolveKeys(ctx: SvmContext, tx: DecodedTransaction): Promise<string[] | string> {
  if (tx.lookups.length === 0) return tx.staticKeys
  const tables = await Promise.all(tx.lookups.map((l) => ctx.rpc.account(l.table)))
  const writable: string[] = []
  const readonly: string[] = []
  for (const [i, lookup] of tx.lookups.entries()) {
    const table = tables[i]
    if (!table || table.owner !== LOOKUP_TABLE_PROGRAM || table.data.length < LOOKUP_TABLE_HEADER || (table.data.length - LOOKUP_TABLE_HEADER) % 32 !== 0) {
      return `lookup table ${lookup.table} could not be resolved`
    }
    const count = (table.data.length - LOOKUP_TABLE_HEADER) / 32
    const at = (index: number) => toBase58(table.data.subarray(LOOKUP_TABLE_HEADER + 32 * index, LOOKUP_TABLE_HEADER + 32 * index + 32))
    for (const [indexes, out] of [[lookup.writableIndexes, writable], [lookup.readonlyIndexes, readonly]] as const) {
      for (const index of indexes) {
        if (index >= count) return `lookup table ${lookup.table} has no entry ${index}`
        out.push(at(index))
      }
    }
  }
  return [...tx.staticKeys, ...writable, ...readonly]
}

function u32(data: Uint8Array, at: number): number {
  return new DataView(data.buffer, data.byteOffset, data.byteLength).getUint32(at, true)
}
function u64(data: Uint8Array, at: number): bigint {
  return new DataView(data.buffer, data.byteOffset, data.byteLength).getBigUint64(at, true)
}

/**
 * Runs every check; `simulate: false` stops before the RPC (blockhash and simulation). Throws only
 * on RPC faults.
 */
export async function checkSvmPayment(ctx: SvmContext, body: unknown, opts: { simulate: boolean } = { simulate: true }): Promise<SvmCheckOutcome> {
  const parsed = parseSvmRequest(body)
  if (!parsed.ok) return { ...invalid(parsed.reason, parsed.message, '', { field: parsed.field }), malformed: true }
  const request = parsed.request
  const { requirements } = request
  if (request.paidScheme !== 'exact' || requirements.scheme !== 'exact') {
    return invalid(reasons.unsupportedScheme, `scheme must be "exact", got ${JSON.stringify(request.paidScheme === 'exact' ? requirements.scheme : request.paidScheme)}`)
  }
  const names = ctx.network.names
  if (!names.has(request.paidNetwork) || !names.has(requirements.network)) {
    const wrong = names.has(request.paidNetwork) ? requirements.network : request.paidNetwork
    return invalid(reasons.networkMismatch, `network ${JSON.stringify(wrong)} is not ${ctx.label} (${[...names].join(', ')})`)
  }
  if (request.accepted) {
    const differs = sameTerms(request.accepted, request.rawRequirements)
    if (differs) return invalid(reasons.invalidRequirements, `paymentPayload.accepted.${differs} differs from paymentRequirements.${differs}`, '', { field: `paymentPayload.accepted.${differs}` })
  }
  const feePayerAddress = requirements.extra?.feePayer
  if (typeof feePayerAddress !== 'string' || feePayerAddress === '') {
    return invalid(reasons.missingFeePayer, 'paymentRequirements.extra.feePayer is required (take it from supported)')
  }
  const feePayer = ctx.signers.get(feePayerAddress)
  if (!feePayer) return invalid(reasons.feePayerNotManaged, `fee payer ${feePayerAddress} is not a signer of this facilitator`)
  const asset = ctx.assets.get(requirements.asset)
  if (!asset) return invalid(reasons.invalidRequirements, `asset ${requirements.asset} is not accepted on ${ctx.label}`, '', { field: 'paymentRequirements.asset' })

  const wire = new Uint8Array(Buffer.from(request.transaction, 'base64'))
  let tx: DecodedTransaction
  try {
    tx = decodeTransaction(wire)
  } catch (error) {
    if (!(error instanceof WireError)) throw error
    return invalid(reasons.couldNotBeDecoded, `transaction could not be decoded: ${error.message}`)
  }
  if (tx.staticKeys[0] !== feePayerAddress) return invalid(reasons.feePayerMismatch, `the transaction's fee payer is ${tx.staticKeys[0]}, not ${feePayerAddress}`)
  if (tx.numRequiredSignatures > 2) {
    return invalid(reasons.excessiveSigners, `the transaction requires ${tx.numRequiredSignatures} signatures; only the fee payer and the payer may sign`)
  }
  // Every signer but the fee payer must have signed already (the official check, in its order).
  for (let i = 1; i < tx.numRequiredSignatures; i++) {
    if (!verifySignature(addressBytes(tx.staticKeys[i]!)!, tx.message, tx.signatures[i]!)) {
      return invalid(reasons.signatureInvalid, `the signature of ${tx.staticKeys[i]} does not verify`)
    }
  }

  const keys = await resolveKeys(ctx, tx)
  if (typeof keys === 'string') return invalid(reasons.lookupTableUnresolved, keys)
  const instructions = tx.instructions
  if (instructions.length < 3 || instructions.length > 7) {
    return invalid(reasons.instructionsLength, `the transaction has ${instructions.length} instructions; 3 to 7 are allowed`)
  }
  const programOf = (i: number) => keys[instructions[i]!.programIndex]!
  const limit = instructions[0]!
  if (programOf(0) !== COMPUTE_BUDGET || limit.data.length !== 5 || limit.data[0] !== 2) {
    return invalid(reasons.computeLimitInstruction, 'instruction 0 must be ComputeBudget SetComputeUnitLimit')
  }
  const units = u32(limit.data, 1)
  if (units > ctx.maxComputeUnits) return invalid(reasons.computeLimitTooHigh, `compute unit limit ${units} exceeds ${ctx.maxComputeUnits}`)
  const price = instructions[1]!
  if (programOf(1) !== COMPUTE_BUDGET || price.data.length !== 9 || price.data[0] !== 3) {
    return invalid(reasons.computePriceInstruction, 'instruction 1 must be ComputeBudget SetComputeUnitPrice')
  }
  const microLamports = u64(price.data, 1)
  if (microLamports > ctx.maxComputeUnitPrice) {
    return invalid(reasons.computePriceTooHigh, `compute unit price ${microLamports} µlamports exceeds ${ctx.maxComputeUnitPrice}`)
  }
  const transfer = instructions[2]!
  const tokenProgram = programOf(2)
  if ((tokenProgram !== TOKEN_PROGRAM && tokenProgram !== TOKEN_2022_PROGRAM) || transfer.data.length !== 10 || transfer.data[0] !== 12 || transfer.accountIndexes.length !== 4) {
    return invalid(reasons.noTransferInstruction, 'instruction 2 must be a single-signer TransferChecked of the Token or Token-2022 program')
  }
  const [, mint, destination, authority] = transfer.accountIndexes.map((i) => keys[i]!) as [string, string, string, string]
  const payer = authority
  if (ctx.signers.has(authority)) return invalid(reasons.feePayerTransferringFunds, 'the transfer authority is a facilitator signer', payer)
  if (mint !== requirements.asset) return invalid(reasons.mintMismatch, `the transfer moves mint ${mint}, not ${requirements.asset}`, payer)
  if (tokenProgram !== asset.tokenProgram) return invalid(reasons.mintMismatch, `the transfer runs under ${tokenProgram}, but ${mint} belongs to ${asset.tokenProgram}`, payer)
  const decimals = transfer.data[9]!
  if (decimals !== asset.decimals) return invalid(reasons.decimalsMismatch, `the transfer states ${decimals} decimals; ${mint} has ${asset.decimals}`, payer)
  const expectedDestination = await associatedTokenAccount(requirements.payTo, mint, tokenProgram)
  if (destination !== expectedDestination) {
    return invalid(reasons.recipientMismatch, `the transfer pays ${destination}, not the associated token account of ${requirements.payTo}`, payer)
  }
  const amount = u64(transfer.data, 1)
  if (amount !== BigInt(requirements.amount)) return invalid(reasons.amountMismatch, `the transfer moves ${amount}, the requirement is ${requirements.amount}`, payer)
  const memos: Uint8Array[] = []
  for (let i = 3; i < instructions.length; i++) {
    const program = programOf(i)
    if (program === MEMO) memos.push(instructions[i]!.data)
    else if (program !== LIGHTHOUSE) return invalid(reasons.unknownInstruction[i - 3]!, `instruction ${i} (program ${program}) is neither Memo nor Lighthouse`, payer)
  }
  const expectedMemo = requirements.extra?.memo
  if (typeof expectedMemo === 'string' && expectedMemo !== '') {
    if (memos.length !== 1) return invalid(reasons.memoCount, `the transaction has ${memos.length} memos; exactly one is required`, payer)
    if (Buffer.from(memos[0]!).toString('utf8') !== expectedMemo) return invalid(reasons.memoMismatch, 'the memo differs from extra.memo', payer)
  }
  for (const [i, ix] of instructions.entries()) {
    if (ctx.signers.has(programOf(i)) || ix.accountIndexes.some((a) => ctx.signers.has(keys[a]!))) {
      return invalid(reasons.feePayerInInstructionAccounts, `instruction ${i} names the fee payer among its accounts`, payer)
    }
  }
  if (keys.slice(tx.staticKeys.length).some((k) => ctx.signers.has(k))) {
    return invalid(reasons.feePayerInInstructionAccounts, 'a lookup table entry the transaction loads is the fee payer', payer)
  }

  const feePayerSignature = feePayer.sign(tx.message)
  const signed = withSignature(wire, tx, 0, feePayerSignature)
  const payment: VerifiedPayment = {
    request, tx, signedBase64: Buffer.from(signed).toString('base64'), signature: toBase58(feePayerSignature),
    messageHash: messageHash(tx), payer, feePayer,
  }
  if (opts.simulate) {
    // One RPC call: a stale blockhash shows as the simulation's BlockhashNotFound.
    let simulation
    try {
      simulation = await ctx.rpc.simulate(payment.signedBase64)
    } catch (error) {
      // -32602: the node refused the transaction itself (a real node answers a sanitize failure
      // so): the client's payment, not a fault of the chain. Other errors stay faults (502).
      if (!(error instanceof SvmRpcRejection) || error.code !== INVALID_PARAMS) throw error
      return invalid(reasons.simulationFailed, `simulation failed: the node refused the transaction: ${error.message.slice(0, 200)}`, payer)
    }
    if (simulation.err === 'BlockhashNotFound') return invalid(reasons.blockhashExpired, `recent blockhash ${tx.recentBlockhash} has expired; build the payment again`, payer)
    if (simulation.err !== null) {
      return invalid(reasons.simulationFailed, `simulation failed: ${JSON.stringify(simulation.err)}`, payer, { logs: simulation.logs.slice(-8) })
    }
  }
  return { response: { isValid: true, invalidReason: null, payer }, payment }
}
