/**
 * x402 `exact` verify on EVM: every check of the reference facilitator, in its order, plus the
 * explicit on-chain preconditions the reference only finds through simulation.
 *
 * Order (first failure wins): schema → scheme → network → asset allow-list → EIP-712 domain →
 * v2 accepted == requirements → signature → recipient → validBefore ≥ now + 6 s →
 * validAfter ≤ now → value == amount → asset has code → nonce unused → balance → simulation.
 *
 * Chain round trips: all reads (payer code, nonce state, balance, the simulation, and the asset's
 * code until it has been seen once) start in one tick and go out as one JSON-RPC batch; a verify
 * of an EOA payment is one round trip. Contract payers add their ERC-1271 call.
 */
import { isErc6492Signature, parseErc6492Signature, size, type Hex } from 'viem'
import { eip3009Abi } from './abi.ts'
import { checkBinding, viewOf, type BoundPayment, type Failure, type PaymentView } from './binding.ts'
import type { EvmChainContext } from './context.ts'
import { insufficientBalanceMessage, reasons } from './errors.ts'
import { reasonForRevert, revertText, safeMessage } from './reverts.ts'
import { isPermit2Body, parseFacilitatorRequest } from './schema.ts'
import { verifyPermit2 } from './permit2.ts'
import { authorizationDigest, splitSignature, verifyAuthorizationSignature } from './signature.ts'
import type { FacilitatorRequest, VerifyResponse } from './types.ts'

/** Seconds validBefore must lie ahead of now: the reference's "buffer for block time". */
export const validBeforeMarginSeconds = 6

/** Everything settle needs to broadcast the transfer verify approved. */
export interface PreparedTransfer {
  view: PaymentView
  bound: BoundPayment
  signature: Hex
  overload: 'vrs' | 'bytes'
}

export interface CheckOutcome {
  response: VerifyResponse
  transfer?: PreparedTransfer
}

function invalid(payer: string, failure: Failure): CheckOutcome {
  const response: VerifyResponse = { isValid: false, invalidReason: failure.reason, invalidMessage: failure.message, payer }
  if (failure.details) response.details = failure.details
  return { response }
}

/** Settled-style wrapper so reads can start early without unhandled rejections. */
function early<T>(read: () => Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  return read().then((value) => ({ ok: true as const, value }), (error: unknown) => ({ ok: false as const, error }))
}

async function must<T>(pending: Promise<{ ok: true; value: T } | { ok: false; error: unknown }>): Promise<T> {
  const result = await pending
  if (!result.ok) throw result.error
  return result.value
}

/** Arguments of the token's transferWithAuthorization for the chosen overload. */
export function transferArgs(transfer: PreparedTransfer) {
  const t = transfer.bound.typed
  const head = [t.from, t.to, t.value, t.validAfter, t.validBefore, t.nonce] as const
  if (transfer.overload === 'bytes') return [...head, transfer.signature] as const
  const { r, s, v } = splitSignature(transfer.signature)!
  return [...head, v, r, s] as const
}

/**
 * The transfer as it will be settled if the signature check takes the path its shape suggests:
 * a 65-byte signature with a valid v is an EOA's (v normalised to 27/28), anything else goes to
 * the bytes overload (ERC-6492 wrapper removed). Undefined when the shape settles nothing.
 */
function presumedTransfer(view: PaymentView, bound: BoundPayment): PreparedTransfer | undefined {
  let signature = view.signature
  if (isErc6492Signature(signature)) {
    try {
      signature = parseErc6492Signature(signature).signature
    } catch {
      return undefined
    }
    return { view, bound, signature, overload: 'bytes' }
  }
  const parts = size(signature) === 65 ? splitSignature(signature) : undefined
  if (!parts) return { view, bound, signature, overload: 'bytes' }
  return { view, bound, signature: `${signature.slice(0, 130)}${parts.v.toString(16)}` as Hex, overload: 'vrs' }
}

async function simulate(ctx: EvmChainContext, transfer: PreparedTransfer): Promise<Failure | undefined> {
  try {
    await ctx.publicClient.simulateContract({
      account: ctx.signerAddress, address: transfer.bound.asset.address, abi: eip3009Abi,
      functionName: 'transferWithAuthorization', args: transferArgs(transfer) as any,
    })
    return undefined
  } catch (error) {
    const text = revertText(error)
    if (text === undefined) throw error
    return reasonForRevert(text, reasons.simulationFailed)
  }
}

/**
 * Runs the checks on a schema-valid request. `simulate: false` skips the eth_call (settle
 * estimates gas instead, which simulates anyway). Throws only on RPC faults.
 */
export async function checkPayment(
  ctx: EvmChainContext, request: FacilitatorRequest, opts: { simulate: boolean },
): Promise<CheckOutcome> {
  const view = viewOf(request)
  const bound = checkBinding(ctx, view)
  if ('reason' in bound) return invalid(view.payer, bound)
  const { typed, asset } = bound
  const client = ctx.publicClient
  // Start every read now, in one tick, so the transport sends them as one JSON-RPC batch (one
  // round trip); they are judged in the reference's order below. The asset's code is read once.
  const payerCode = early(() => client.getCode({ address: typed.from }))
  const assetKnown = ctx.assetsWithCode.has(asset.address.toLowerCase())
  const assetCode = assetKnown ? undefined : early(() => client.getCode({ address: asset.address }))
  const used = early(() => client.readContract({
    address: asset.address, abi: eip3009Abi, functionName: 'authorizationState', args: [typed.from, typed.nonce],
  }))
  const balance = early(() => client.readContract({
    address: asset.address, abi: eip3009Abi, functionName: 'balanceOf', args: [typed.from],
  }))
  // The simulation runs in the same batch with the signature form an EOA would use; its answer
  // counts only if every check before it passes and the signature check settles on that form.
  const presumed = opts.simulate ? presumedTransfer(view, bound) : undefined
  const presumedSimulation = presumed ? early(() => simulate(ctx, presumed)) : undefined

  const digest = authorizationDigest(bound.domain, typed)
  const verdict = await verifyAuthorizationSignature(ctx, digest, view.signature, typed.from, must(payerCode))
  if (!verdict.ok) return invalid(view.payer, { reason: verdict.reason!, message: verdict.message! })
  if (typed.to.toLowerCase() !== view.requirements.payTo.toLowerCase()) {
    return invalid(view.payer, {
      reason: reasons.recipientMismatch,
      message: `authorization.to ${view.authorization.to} is not payTo ${view.requirements.payTo}`,
      details: { to: view.authorization.to, payTo: view.requirements.payTo },
    })
  }
  const now = BigInt(ctx.now())
  if (typed.validBefore < now + BigInt(validBeforeMarginSeconds)) {
    return invalid(view.payer, {
      reason: reasons.validBefore,
      message: typed.validBefore <= now
        ? `authorization expired at ${typed.validBefore} (now ${now})`
        : `authorization expires at ${typed.validBefore}, less than ${validBeforeMarginSeconds} s from now (${now})`,
      details: { validBefore: typed.validBefore.toString(), now: now.toString() },
    })
  }
  if (typed.validAfter > now) {
    return invalid(view.payer, {
      reason: reasons.validAfter,
      message: `authorization is not valid before ${typed.validAfter} (now ${now})`,
      details: { validAfter: typed.validAfter.toString(), now: now.toString() },
    })
  }
  if (typed.value !== BigInt(view.requirements.amount)) {
    const field = view.version === 1 ? 'maxAmountRequired' : 'amount'
    return invalid(view.payer, {
      reason: view.version === 1 ? reasons.valueMismatchV1 : reasons.valueMismatchV2,
      message: `authorization.value ${typed.value} differs from paymentRequirements.${field} ${view.requirements.amount}`,
      details: { value: typed.value.toString(), required: view.requirements.amount },
    })
  }
  if (assetCode) {
    const code = await must(assetCode)
    if (code === undefined || code === '0x') {
      return invalid(view.payer, { reason: reasons.assetNotDeployed, message: `no contract deployed at asset ${asset.address}` })
    }
    ctx.assetsWithCode.add(asset.address.toLowerCase())
  }
  const usedResult = await used
  if (!usedResult.ok) {
    if (revertText(usedResult.error) === undefined) throw usedResult.error
    return invalid(view.payer, {
      reason: reasons.eip3009NotSupported, message: `asset ${asset.address} has no EIP-3009 authorizationState()`,
    })
  }
  if (usedResult.value) {
    return invalid(view.payer, {
      reason: reasons.nonceAlreadyUsed,
      message: `authorization nonce ${typed.nonce} of ${view.payer} is already used or canceled`,
    })
  }
  const held = await must(balance)
  if (held < typed.value) {
    return invalid(view.payer, {
      reason: reasons.insufficientBalance, message: insufficientBalanceMessage,
      details: { balance: held.toString(), required: typed.value.toString() },
    })
  }
  const transfer: PreparedTransfer = { view, bound, signature: verdict.signature, overload: verdict.overload }
  if (opts.simulate) {
    const samePresumed = presumed && presumedSimulation
      && presumed.overload === transfer.overload && presumed.signature === transfer.signature
    const failure = samePresumed ? await must(presumedSimulation) : await simulate(ctx, transfer)
    if (failure) return invalid(view.payer, failure)
  }
  return { response: { isValid: true, invalidReason: null, payer: view.payer }, transfer }
}

/**
 * POST verify for the EVM `exact` scheme, both x402 versions. Never throws: malformed bodies give
 * `invalid_payload` / `invalid_x402_version` (answer 400, see errors.ts `malformedRequestReasons`),
 * RPC faults give `unexpected_verify_error`, everything else is a 200-style verdict.
 *
 * @example
 * ```ts
 * const result = await verifyExact(ctx, JSON.parse(body))
 * const status = malformedRequestReasons.has(result.invalidReason ?? '') ? 400 : 200
 * ```
 */
export async function verifyExact(ctx: EvmChainContext, body: unknown): Promise<VerifyResponse> {
  if (isPermit2Body(body)) return verifyPermit2(ctx, body)
  const parsed = parseFacilitatorRequest(body)
  if (!parsed.ok) {
    return { isValid: false, invalidReason: parsed.reason, invalidMessage: parsed.message, payer: parsed.payer, details: { field: parsed.field } }
  }
  try {
    return (await checkPayment(ctx, parsed.request, { simulate: true })).response
  } catch (error) {
    return {
      isValid: false, invalidReason: reasons.unexpectedVerifyError,
      invalidMessage: `chain access failed: ${safeMessage(error)}`,
      payer: parsed.request.paymentPayload.payload.authorization.from,
    }
  }
}
