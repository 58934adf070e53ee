/**
 * x402 `exact` settle on Solana: re-verify (with simulation), co-sign as fee payer, send, confirm
 * with a bounded poll.
 *
 * Exactly once: the payment's identity is the sha256 of its message, so a copy re-signed with
 * other signature bytes is the same payment. A durable record under that key is claimed before
 * anything is sent (store `insertIfAbsent`, shared by every gateway on a shared store), and
 * concurrent settles in this process share one promise. A settle that finds the record answers
 * from it: `settled` → the original answer, `pending` → polls the stored signature again,
 * `claimed` → `duplicate_settlement` (or takes over a claim older than `staleClaimMs`).
 *
 * Trust rule: a stored (or in-flight) answer is given only to the same signed transaction — the
 * fingerprint covers the payer's signatures, not just the message. Any other copy of the message
 * (re-signed, or with a forged signature) is verified in full, simulation included, and gets that
 * verdict's refusal, never the stored `success: true`.
 *
 * Never a failure that invites paying twice: past the confirmation bound the answer is
 * `settlement_pending` with the signature; a later settle of the same payment reconciles it
 * (landed → the success, expired blockhash and never landed → a failure and the record released).
 */
import type { SettleResponse } from '../evm/types.ts'
import { settlementFingerprint, type SettlementRecord, type SettlementRecords } from '../evm/records.ts'
import type { SvmContext } from './context.ts'
import { svmReasons as reasons } from './errors.ts'
import { SvmRpcRejection } from './rpc.ts'
import { checkSvmPayment, type VerifiedPayment } from './verify.ts'

export interface SvmSettleLogger {
  info(fields: Record<string, unknown>, message: string): void
  warn(fields: Record<string, unknown>, message: string): void
  error(fields: Record<string, unknown>, message: string): void
}

export interface SvmSettleOptions {
  records: SettlementRecords
  /** Longest wait for confirmation before answering `settlement_pending`. */
  confirmTimeoutMs: number
  pollingIntervalMs: number
  log: SvmSettleLogger
  /** A claim this old without a sent transaction is presumed abandoned; default 120 s. */
  staleClaimMs?: number
}

export type SvmSettleResult = SettleResponse & { malformed?: boolean }

const inFlight = new WeakMap<SettlementRecords, Map<string, { fingerprint: string; result: Promise<SvmSettleResult> }>>()

function networkOf(body: unknown, fallback: string): string {
  const b = body as any
  for (const candidate of [b?.paymentPayload?.accepted?.network, b?.paymentPayload?.network, b?.paymentRequirements?.network]) {
    if (typeof candidate === 'string' && candidate.length > 0 && candidate.length <= 128) return candidate
  }
  return fallback
}

function failure(network: string, payer: string, reason: string, message?: string, transaction = '', details?: Record<string, unknown>): SvmSettleResult {
  const result: SvmSettleResult = { success: false, errorReason: reason, payer, transaction, network }
  if (message !== undefined) result.errorMessage = message
  if (details) result.details = details
  return result
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

interface Job {
  ctx: SvmContext
  payment: VerifiedPayment
  key: string
  fingerprint: string
  network: string
  opts: SvmSettleOptions
}

/** Polls the signature until confirmed, failed, dropped (blockhash expired) or the bound passes. */
async function awaitOutcome(job: Job, signature: string, claimedAt: number): Promise<SvmSettleResult> {
  const { ctx, payment, opts, network } = job
  const deadline = Date.now() + opts.confirmTimeoutMs
  for (;;) {
    let status = null
    try {
      status = await ctx.rpc.status(signature)
    } catch (error) {
      opts.log.warn({ event: 'x402_svm_status_failed', network: ctx.label, tx: signature, reason: (error as Error).message }, 'x402 solana status poll failed')
    }
    if (status && (status.confirmationStatus === 'confirmed' || status.confirmationStatus === 'finalized')) {
      const response: SettleResponse = status.err === null
        ? { success: true, errorReason: null, payer: payment.payer, transaction: signature, network }
        : failure(network, payment.payer, reasons.transactionFailed, `transaction failed on chain: ${JSON.stringify(status.err)}`, signature)
      await opts.records.update(job.key, { state: 'settled', fingerprint: job.fingerprint, claimedAt, transaction: signature, response })
        .catch((error: unknown) => opts.log.error({ event: 'x402_record_failed', network: ctx.label, tx: signature, reason: (error as Error).message }, 'x402 settlement outcome not recorded'))
      opts.log.info({ event: 'x402_settled', network: ctx.label, tx: signature, success: response.success }, 'x402 solana settlement confirmed')
      return response
    }
    if (!status) {
      // Not seen: once its blockhash has expired it can never land, so the payment may be retried.
      const alive = await ctx.rpc.isBlockhashValid(payment.tx.recentBlockhash).catch(() => true)
      if (!alive) {
        await opts.records.release(job.key)
        return failure(network, payment.payer, reasons.transactionFailed, `transaction ${signature} expired without landing; nothing was transferred`, signature)
      }
    }
    if (Date.now() + opts.pollingIntervalMs > deadline) break
    await sleep(opts.pollingIntervalMs)
  }
  opts.log.warn({ event: 'x402_settlement_pending', network: ctx.label, tx: signature }, 'x402 solana settlement not confirmed in time')
  return failure(network, payment.payer, reasons.settlementPending, `transaction ${signature} sent, not yet confirmed; settle again to learn the outcome`, signature)
}

async function sendClaimed(job: Job, claimedAt: number): Promise<SvmSettleResult> {
  const { ctx, payment, opts, network } = job
  const signature = payment.signature
  // Recorded before sending: after a crash the record knows what may be on chain.
  await opts.records.update(job.key, { state: 'pending', fingerprint: job.fingerprint, claimedAt, transaction: signature })
  try {
    await ctx.rpc.send(payment.signedBase64)
  } catch (error) {
    if (error instanceof SvmRpcRejection) {
      await opts.records.release(job.key)
      return failure(network, payment.payer, reasons.transactionFailed, `the node refused the transaction: ${error.message}`)
    }
    opts.log.warn({ event: 'x402_send_unconfirmed', network: ctx.label, tx: signature, reason: (error as Error).message }, 'x402 solana send outcome unknown')
  }
  opts.log.info({ event: 'x402_broadcast', network: ctx.label, tx: signature, payer: payment.payer }, 'x402 solana settlement sent')
  return awaitOutcome(job, signature, claimedAt)
}

/** The answer for a payment someone already claimed, or undefined to take an abandoned claim over. */
async function answerFromRecord(job: Job, stored: SettlementRecord, body: unknown): Promise<SvmSettleResult | undefined> {
  const { opts, network, payment } = job
  const stale = Date.now() - stored.claimedAt > (opts.staleClaimMs ?? 120_000)
  if (stored.fingerprint !== job.fingerprint && (stored.state !== 'claimed' || !stale)) {
    return refuseOther(job, body, 'a different copy of this payment was settled or is being settled')
  }
  if (stored.state === 'settled' && stored.response) return { ...stored.response, network }
  if (stored.state === 'pending' && stored.transaction) return awaitOutcome(job, stored.transaction, stored.claimedAt)
  if (!stale) return failure(network, payment.payer, reasons.duplicateSettlement, 'a settlement of this payment is already in progress')
  return undefined
}

/**
 * The answer to a copy of a recorded or in-flight payment that is not the same signed transaction:
 * verified in full (simulation included), so it gets that verdict's refusal; a copy that passes
 * every check still never gets the other copy's answer.
 */
async function refuseOther(job: Job, body: unknown, message: string): Promise<SvmSettleResult> {
  const { ctx, network, payment } = job
  const checked = await checkSvmPayment(ctx, body, { simulate: true })
  const r = checked.response
  if (!r.isValid) return failure(network, r.payer, r.invalidReason ?? reasons.unexpectedSettleError, r.invalidMessage, '', r.details)
  return failure(network, payment.payer, reasons.duplicateSettlement, message)
}

/** The payment's identity as signed: message hash, terms, and the signatures of every signer but our fee payer. */
function signedFingerprint(key: string, payment: VerifiedPayment): string {
  const signatures = payment.tx.signatures.slice(1).map((s) => Buffer.from(s).toString('hex')).join(',')
  return settlementFingerprint({ key, payTo: payment.request.requirements.payTo, amount: payment.request.requirements.amount, signatures })
}

async function settleNew(job: Job, body: unknown): Promise<SvmSettleResult> {
  const { ctx, opts, key, network } = job
  const claimedAt = Date.now()
  const fresh: SettlementRecord = { state: 'claimed', fingerprint: job.fingerprint, claimedAt }
  const { created, stored } = await opts.records.claim(key, fresh)
  if (!created) {
    // Settled or sent already: answered from the record, without simulating again (a landed
    // transaction no longer simulates: AlreadyProcessed, or the balance is spent).
    const answer = await answerFromRecord(job, stored, body)
    if (answer) return answer
    opts.log.warn({ event: 'x402_claim_takeover', network: ctx.label }, 'x402 taking over an abandoned solana settlement record')
    await opts.records.update(key, fresh)
  }
  let recheck
  try {
    recheck = await checkSvmPayment(ctx, body, { simulate: true })
  } catch (error) {
    await opts.records.release(key)
    throw error
  }
  if (!recheck.payment) {
    await opts.records.release(key)
    const r = recheck.response
    return failure(network, r.payer, r.invalidReason ?? reasons.unexpectedSettleError, r.invalidMessage, '', r.details)
  }
  return sendClaimed({ ...job, payment: recheck.payment }, claimedAt)
}

/**
 * POST settle for the Solana `exact` scheme, both x402 versions. Throws only on faults before
 * anything was sent (the caller answers 502).
 *
 * @example
 * ```ts
 * const result = await settleSvm(ctx, body, { records, confirmTimeoutMs: 20_000, pollingIntervalMs: 400, log })
 * ```
 */
export async function settleSvm(ctx: SvmContext, body: unknown, opts: SvmSettleOptions): Promise<SvmSettleResult> {
  const network = networkOf(body, ctx.network.caip2)
  const checked = await checkSvmPayment(ctx, body, { simulate: false })
  const payment = checked.payment
  if (!payment) {
    const r = checked.response
    return { ...failure(network, r.payer, r.invalidReason ?? reasons.unexpectedSettleError, r.invalidMessage, '', r.details), malformed: checked.malformed }
  }
  const key = `svm:${ctx.network.caip2}:${payment.messageHash}`
  const fingerprint = signedFingerprint(key, payment)
  const job: Job = { ctx, payment, key, fingerprint, network, opts }
  let running = inFlight.get(opts.records)
  if (!running) inFlight.set(opts.records, (running = new Map()))
  const same = running.get(key)
  if (same) {
    // Only the same signed transaction shares the running settle's answer (the trust rule above).
    if (same.fingerprint !== fingerprint) return refuseOther(job, body, 'a different copy of this payment is being settled')
    return { ...(await same.result), network }
  }
  const result = settleNew(job, body)
  running.set(key, { fingerprint, result })
  try {
    return await result
  } finally {
    running.delete(key)
  }
}

