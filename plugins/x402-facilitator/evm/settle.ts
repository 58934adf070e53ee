/**
 * x402 `exact` settle on EVM: re-verify, then broadcast transferWithAuthorization from the
 * facilitator's account, exactly once per authorization.
 *
 * Exactly once: a durable record keyed by (chainId, asset, from, nonce) is claimed before anything
 * is sent (store `insertIfAbsent`), and concurrent identical settles inside this process share one
 * promise. A settle that finds the record answers from it: `settled` → the stored result, `pending`
 * → waits (bounded) on the stored transaction, `claimed` → `duplicate_settlement`. Even if two
 * gateways raced past the record, the token's own nonce check lets only one transfer happen.
 *
 * Trust rule: a stored (or in-flight) answer is given only to the same signed payload — the
 * fingerprint covers the terms AND the signature. Anything else with the same nonce (an all-zero
 * signature, one by another key) is verified in full first, so it gets the refusal verify gives
 * (`invalid_exact_evm_signature`, `invalid_permit2_signature`...), never the stored `success: true`.
 *
 * Never a bare failure after a broadcast: past the receipt bound the answer is
 * `settlement_pending` with the transaction hash, and a later settle reconciles it.
 */
import { parseEventLogs, TransactionNotFoundError, type Address, type Hex } from 'viem'
import { eip3009Abi } from './abi.ts'
import { checkBinding, viewOf } from './binding.ts'
import { BroadcastError, broadcastCall, transferCall, type SettlementCall } from './broadcast.ts'
import { checkPermit2, permit2ViewOf } from './permit2.ts'
import { permit2Address } from './permit2-abi.ts'
import type { EvmChainContext } from './context.ts'
import { reasons } from './errors.ts'
import { settlementFingerprint, settlementKey, type SettlementRecord, type SettlementRecords } from './records.ts'
import { reasonForRevert, revertText, safeMessage } from './reverts.ts'
import { isPermit2Body, parseFacilitatorRequest, parsePermit2Request } from './schema.ts'
import type { SettleResponse, VerifyResponse } from './types.ts'
import { checkPayment } from './verify.ts'

/** pino-compatible subset. */
export interface SettleLogger {
  info(fields: Record<string, unknown>, message: string): void
  warn(fields: Record<string, unknown>, message: string): void
  error(fields: Record<string, unknown>, message: string): void
}

export interface SettleOptions {
  /** Longest wait for the receipt before answering `settlement_pending`; keep it below the caller's timeout. */
  receiptTimeoutMs: number
  records: SettlementRecords
  log?: SettleLogger
  /** A record this old without a mined transaction is presumed abandoned by a crashed process; default 120 s. */
  staleClaimMs?: number
}

export type SettleResult = SettleResponse & { pending?: boolean }

const silent: SettleLogger = { info() {}, warn() {}, error() {} }

/** Identical settles in flight in this process, per records instance. */
const inFlight = new WeakMap<SettlementRecords, Map<string, { fingerprint: string; result: Promise<SettleResult> }>>()

/** The Transfer event a successful settlement must have emitted. */
interface ExpectedTransfer {
  asset: Address
  from: Address
  to: Address
  value: bigint
}

interface Job {
  ctx: EvmChainContext
  /** The payment payload's network and payer, echoed in answers. */
  view: { network: string; payer: string }
  expected: ExpectedTransfer
  /** Re-runs the checks (no simulation: gas estimation simulates) and gives the call to send. */
  prepare(): Promise<{ response: VerifyResponse; call?: SettlementCall }>
  /** Logged with the broadcast. */
  nonce: string
  /** upto: the settled amount, carried in every answer. */
  amount?: string
  key: string
  fingerprint: string
  opts: SettleOptions
  log: SettleLogger
}

function failure(
  network: string, payer: string, reason: string, message: string | undefined, transaction = '', details?: Record<string, unknown>,
): SettleResult {
  const result: SettleResult = { success: false, errorReason: reason, payer, transaction, network }
  if (message !== undefined) result.errorMessage = message
  if (details) result.details = details
  return result
}

function networkOf(body: unknown, fallback: string): string {
  const b = body as any
  for (const candidate of [b?.paymentPayload?.accepted?.network, b?.paymentPayload?.network, b?.paymentRequirements?.network]) {
    if (typeof candidate === 'string' && candidate.length > 0 && candidate.length <= 128) return candidate
  }
  return fallback
}

function hasTransferLog(logs: readonly any[], expected: ExpectedTransfer): boolean {
  const events = parseEventLogs({
    abi: eip3009Abi, eventName: 'Transfer',
    logs: logs.filter((l) => String(l.address).toLowerCase() === expected.asset.toLowerCase()),
  })
  return events.some((e) => e.args.from.toLowerCase() === expected.from.toLowerCase()
    && e.args.to.toLowerCase() === expected.to.toLowerCase() && e.args.value === expected.value)
}

/** Adds the upto amount to an answer when the job settles one. */
function withAmount(job: Job, result: SettleResult): SettleResult {
  return job.amount === undefined ? result : { ...result, amount: job.amount }
}

/** Waits (bounded) for the receipt of `hash` and records the outcome. */
async function awaitOutcome(job: Job, hash: Hex, claimedAt: number): Promise<SettleResult> {
  const { ctx, view, key, opts, log } = job
  let receipt
  try {
    receipt = await ctx.publicClient.waitForTransactionReceipt({
      hash, timeout: opts.receiptTimeoutMs, pollingInterval: ctx.pollingIntervalMs,
    })
  } catch (error) {
    log.warn({ event: 'x402_settlement_pending', chainId: ctx.chainId, tx: hash, reason: safeMessage(error) }, 'x402 settlement receipt not seen in time')
    return { ...failure(view.network, view.payer, reasons.settlementPending, `transaction ${hash} not yet mined; settle again to learn the outcome`, hash), pending: true }
  }
  if (receipt.status !== 'success') {
    log.warn({ event: 'x402_settlement_reverted', chainId: ctx.chainId, tx: hash }, 'x402 settlement transaction reverted')
    await opts.records.release(key)
    return failure(view.network, view.payer, reasons.transactionFailed, `transaction ${hash} reverted`, hash)
  }
  const response: SettleResponse = withAmount(job, hasTransferLog(receipt.logs, job.expected)
    ? { success: true, errorReason: null, payer: view.payer, transaction: hash, network: view.network }
    : failure(view.network, view.payer, reasons.transferEventMismatch, `transaction ${hash} carries no matching Transfer event`, hash))
  try {
    await opts.records.update(key, { state: 'settled', fingerprint: job.fingerprint, claimedAt, transaction: hash, response })
  } catch (error) {
    log.error({ event: 'x402_record_failed', chainId: ctx.chainId, tx: hash, reason: safeMessage(error) }, 'x402 settlement outcome not recorded')
  }
  log.info({ event: 'x402_settled', chainId: ctx.chainId, tx: hash, success: response.success }, 'x402 settlement mined')
  return response
}

/** Whether the node has the transaction (mined or in its pool); RPC faults propagate. */
async function nodeKnows(ctx: EvmChainContext, hash: Hex): Promise<boolean> {
  try {
    await ctx.publicClient.getTransaction({ hash })
    return true
  } catch (error) {
    if (error instanceof TransactionNotFoundError) return false
    throw error
  }
}

/** The answer for a record someone else holds, or undefined to take the record over. */
async function answerFromRecord(job: Job, stored: SettlementRecord): Promise<SettleResult | undefined> {
  const { ctx, view, fingerprint, opts } = job
  // Same signed payload (signature included): the record is this payment's own answer.
  const samePayment = stored.fingerprint === fingerprint
  if (stored.state === 'settled') {
    if (samePayment && stored.response) return { ...stored.response, network: view.network }
    return refuseOther(job, failure(view.network, view.payer, reasons.nonceAlreadyUsed, 'this authorization nonce already settled a different payment'))
  }
  const stale = Date.now() - stored.claimedAt > (opts.staleClaimMs ?? 120_000)
  if (stored.state === 'pending' && stored.transaction) {
    const hash = stored.transaction as Hex
    // A stale hash the node has never heard of was dropped (or never sent): settle afresh.
    if (stale && !(await nodeKnows(ctx, hash))) return undefined
    if (samePayment) return awaitOutcome(job, hash, stored.claimedAt)
  } else if (stale) {
    return undefined // claimed by a process that died before broadcasting
  }
  if (samePayment) return failure(view.network, view.payer, reasons.duplicateSettlement, 'a settlement of this authorization is already in progress')
  return refuseOther(job, failure(view.network, view.payer, reasons.duplicateSettlement, 'a different payment with this authorization nonce is being settled'))
}

/**
 * The answer to a payload that shares its nonce with a recorded or in-flight settlement but is not
 * the same signed payload: verified in full first, so a forged or foreign signature gets verify's
 * own refusal; a payload that passes every check still never gets another payment's answer.
 */
async function refuseOther(job: Job, otherwise: SettleResult): Promise<SettleResult> {
  const { view } = job
  const checked = await job.prepare()
  const r = checked.response
  if (!r.isValid) return failure(view.network, view.payer, r.invalidReason ?? reasons.unexpectedSettleError, r.invalidMessage, '', r.details)
  return otherwise
}

async function settleClaimed(job: Job, claimedAt: number): Promise<SettleResult> {
  const { ctx, view, key, opts, log } = job
  const checked = await job.prepare().catch(async (error: unknown) => {
    await opts.records.release(key)
    throw error
  })
  if (!checked.call) {
    await opts.records.release(key)
    const r = checked.response
    return failure(view.network, view.payer, r.invalidReason ?? reasons.unexpectedSettleError, r.invalidMessage, '', r.details)
  }
  const call = checked.call
  let hash: Hex
  try {
    hash = await broadcastCall(ctx, call, async (signed) => {
      await opts.records.update(key, { state: 'pending', fingerprint: job.fingerprint, claimedAt, transaction: signed })
      log.info({
        event: 'x402_broadcast', chainId: ctx.chainId, tx: signed, payer: view.payer,
        asset: job.expected.asset, nonce: job.nonce, to: call.to,
      }, 'x402 settlement broadcast')
    })
  } catch (error) {
    if (error instanceof BroadcastError && error.maybeSent) {
      // The node may hold it: wait for it like any other broadcast (pending past the bound).
      log.warn({ event: 'x402_send_unconfirmed', chainId: ctx.chainId, tx: error.hash, reason: safeMessage(error.cause) }, 'x402 settlement send outcome unknown')
      return awaitOutcome(job, error.hash, claimedAt)
    }
    await opts.records.release(key)
    const cause = error instanceof BroadcastError ? error.cause : error
    const text = revertText(cause)
    if (text !== undefined) {
      const mapped = reasonForRevert(text, reasons.simulationFailed)
      return failure(view.network, view.payer, mapped.reason, mapped.message)
    }
    if (error instanceof BroadcastError) return failure(view.network, view.payer, reasons.transactionFailed, safeMessage(cause))
    throw error
  }
  return awaitOutcome(job, hash, claimedAt)
}

async function settleOnce(job: Job): Promise<SettleResult> {
  return withAmount(job, await settleOnceBare(job))
}

async function settleOnceBare(job: Job): Promise<SettleResult> {
  const fresh: SettlementRecord = { state: 'claimed', fingerprint: job.fingerprint, claimedAt: Date.now() }
  const { created, stored } = await job.opts.records.claim(job.key, fresh)
  if (!created) {
    const answer = await answerFromRecord(job, stored)
    if (answer) return answer
    job.log.warn({ event: 'x402_claim_takeover', chainId: job.ctx.chainId, tx: stored.transaction }, 'x402 taking over an abandoned settlement record')
    await job.opts.records.update(job.key, fresh)
  }
  return settleClaimed(job, fresh.claimedAt)
}

/**
 * POST settle for the EVM `exact` scheme, both x402 versions. Never throws. Malformed bodies give
 * `invalid_payload` / `invalid_x402_version` (answer 400); RPC or store faults before a broadcast give
 * `unexpected_settle_error`; `pending: true` marks a `settlement_pending` answer with its hash.
 *
 * @example
 * ```ts
 * const records = settlementRecordsFrom(store.documents('x402-settlements'), 'x402')
 * const result = await settleExact(ctx, body, { receiptTimeoutMs: 20_000, records, log })
 * ```
 */
export async function settleExact(ctx: EvmChainContext, body: unknown, opts: SettleOptions): Promise<SettleResult> {
  const planned = isPermit2Body(body) ? planPermit2(ctx, body) : planEip3009(ctx, body)
  if ('failed' in planned) return planned.failed
  const job: Job = { ...planned, opts, log: opts.log ?? silent }
  if (job.amount === '0') return zeroUpto(job)
  const { view, key, fingerprint } = job
  let running = inFlight.get(opts.records)
  if (!running) inFlight.set(opts.records, (running = new Map()))
  const fault = (error: unknown) => {
    job.log.error({ event: 'x402_settle_fault', chainId: ctx.chainId, reason: safeMessage(error) }, 'x402 settle failed unexpectedly')
    return failure(view.network, view.payer, reasons.unexpectedSettleError, `settlement failed: ${safeMessage(error)}`)
  }
  const same = running.get(key)
  if (same) {
    // Only the same signed payload shares the running settle's answer (see the trust rule above).
    if (same.fingerprint !== fingerprint) {
      const other = failure(view.network, view.payer, reasons.duplicateSettlement, 'a different payment with this authorization nonce is being settled')
      return withAmount(job, await refuseOther(job, other).catch(fault))
    }
    return { ...(await same.result), network: view.network }
  }
  const result = settleOnce(job).catch(fault)
  running.set(key, { fingerprint, result })
  try {
    return await result
  } finally {
    running.delete(key)
  }
}

type Plan = Omit<Job, 'opts' | 'log'> | { failed: SettleResult }

function planEip3009(ctx: EvmChainContext, body: unknown): Plan {
  const parsed = parseFacilitatorRequest(body)
  if (!parsed.ok) return { failed: failure(networkOf(body, ctx.caip2), parsed.payer, parsed.reason, parsed.message, '', { field: parsed.field }) }
  const view = viewOf(parsed.request)
  const bound = checkBinding(ctx, view)
  if ('reason' in bound) return { failed: failure(view.network, view.payer, bound.reason, bound.message, '', bound.details) }
  const { typed, asset } = bound
  return {
    ctx, view: { network: view.network, payer: view.payer }, nonce: typed.nonce,
    expected: { asset: asset.address, from: typed.from, to: typed.to, value: typed.value },
    key: settlementKey(ctx.chainId, asset.address, typed.from, typed.nonce),
    fingerprint: settlementFingerprint({
      chainId: ctx.chainId, asset: asset.address, from: typed.from, to: typed.to, value: typed.value.toString(),
      validAfter: typed.validAfter.toString(), validBefore: typed.validBefore.toString(), nonce: typed.nonce,
      payTo: view.requirements.payTo, amount: view.requirements.amount,
      // The signature is part of the payment's identity: a stored answer is only for this exact payload.
      signature: view.signature.toLowerCase(),
    }),
    async prepare() {
      const checked = await checkPayment(ctx, parsed.request, { simulate: false })
      return { response: checked.response, call: checked.transfer && transferCall(checked.transfer) }
    },
  }
}

/**
 * Permit2 (exact, upto). The record key is the Permit2 nonce of the payer (Permit2 nonces are
 * per owner across tokens); for upto the settled amount is part of the terms, so a retry with
 * another amount is a different payment and is refused, never paid twice.
 */
function planPermit2(ctx: EvmChainContext, body: unknown): Plan {
  const parsed = parsePermit2Request(body)
  if (!parsed.ok) return { failed: failure(networkOf(body, ctx.caip2), parsed.payer, parsed.reason, parsed.message, '', { field: parsed.field }) }
  const request = parsed.request
  const view = permit2ViewOf(request)
  const auth = view.auth
  const upto = view.kind === 'upto'
  // Settle amount: the requirements' amount. For exact it must equal the permit (checked below).
  const settleAmount = upto ? BigInt(view.requirements.amount) : undefined
  const nonceHex = `0x${BigInt(auth.nonce).toString(16).padStart(64, '0')}`
  const value = settleAmount ?? BigInt(auth.permitted.amount)
  return {
    ctx, view: { network: view.network, payer: view.payer }, nonce: auth.nonce,
    amount: upto ? value.toString() : undefined,
    expected: { asset: auth.permitted.token as Address, from: auth.from as Address, to: auth.witness.to as Address, value },
    key: settlementKey(ctx.chainId, permit2Address, auth.from, nonceHex),
    fingerprint: settlementFingerprint({
      chainId: ctx.chainId, kind: view.kind, token: auth.permitted.token.toLowerCase(), from: auth.from.toLowerCase(),
      to: auth.witness.to.toLowerCase(), permitted: auth.permitted.amount, deadline: String(auth.deadline),
      validAfter: String(auth.witness.validAfter), nonce: auth.nonce, payTo: view.requirements.payTo.toLowerCase(),
      // As for EIP-3009: the signature is part of the payment's identity (a stored answer is only for this exact payload).
      amount: value.toString(), signature: view.signature.toLowerCase(),
    }),
    async prepare() {
      const checked = await checkPermit2(ctx, request, { simulate: false, settleAmount })
      return { response: checked.response, call: checked.settlement?.call }
    },
  }
}

/** upto with nothing used: the checks run, nothing is sent, the answer says amount "0". */
async function zeroUpto(job: Job): Promise<SettleResult> {
  const { view } = job
  try {
    const checked = await job.prepare()
    if (!checked.response.isValid) {
      const r = checked.response
      return withAmount(job, failure(view.network, view.payer, r.invalidReason ?? reasons.unexpectedSettleError, r.invalidMessage, '', r.details))
    }
  } catch (error) {
    return withAmount(job, failure(view.network, view.payer, reasons.unexpectedSettleError, `settlement failed: ${safeMessage(error)}`))
  }
  return { success: true, errorReason: null, payer: view.payer, transaction: '', network: view.network, amount: '0' }
}
