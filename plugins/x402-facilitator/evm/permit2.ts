/**
 * x402 over Permit2 on EVM: `exact` (v1 and v2) and `upto` (v2). The payer signs a Permit2
 * PermitWitnessTransferFrom whose spender is the x402 proxy; the facilitator settles by calling
 * the proxy, which moves the tokens to `witness.to` through Permit2.
 *
 * Verify order (first failure wins), the reference's with our binding checks added:
 * schema → scheme → network → asset allow-list → EIP-712 extra → v2 accepted == requirements →
 * spender == proxy → witness.to == payTo → (upto) witness.facilitator == our signer →
 * deadline ≥ now + 6 s → validAfter ≤ now → amount (exact: permitted == amount; upto verify:
 * permitted == amount, upto settle: amount ≤ permitted) → permitted.token == asset → signature →
 * asset has code → Permit2 and proxy have code → Permit2 nonce unused → balance → allowance to
 * Permit2 → simulation of the proxy's settle from our signer.
 *
 * Chain round trips: as for EIP-3009 (verify.ts), every read and the simulation leave in one
 * JSON-RPC batch; the code of the asset, Permit2 and the proxy is read until first seen.
 */
import {
  decodeErrorResult, encodeFunctionData, getAddress, hashTypedData, isErc6492Signature, parseErc6492Signature, size,
  type Address, type Hex,
} from 'viem'
import { eip3009Abi } from './abi.ts'
import { permit2Address, exactPermit2ProxyAddress, uptoPermit2ProxyAddress, deadlineMarginSeconds, uint256Limit, permit2Abi, exactProxyAbi, uptoProxyAbi, allowanceAbi, simulationAbi, witnessTypes, type Permit2Kind } from './permit2-abi.ts'
import { checkRequirements, type Failure, type RequirementsView } from './binding.ts'
import type { SettlementCall } from './broadcast.ts'
import type { EvmAssetInfo } from './chains.ts'
import type { EvmChainContext } from './context.ts'
import { reasons } from './errors.ts'
import { revertText, safeMessage } from './reverts.ts'
import { parsePermit2Request } from './schema.ts'
import { expandCompactSignature, splitSignature, verifyAuthorizationSignature } from './signature.ts'
import type { Permit2Authorization, Permit2Request, VerifyResponse } from './types.ts'


/** The signed Permit2 fields as EIP-712 values. */
interface TypedPermit {
  from: Address
  token: Address
  permitted: bigint
  spender: Address
  nonce: bigint
  deadline: bigint
  to: Address
  validAfter: bigint
  facilitator?: Address
}

interface Permit2View extends RequirementsView {
  kind: Permit2Kind
  auth: Permit2Authorization
  signature: Hex
}

/** What settle needs: the proxy call, the transfer it must produce, and the durable key. */
export interface Permit2Settlement {
  call: SettlementCall
  asset: EvmAssetInfo
  typed: TypedPermit
  /** The amount that moves: permitted (exact) or the settled amount (upto). */
  amount: bigint
}

export interface Permit2Outcome {
  response: VerifyResponse
  settlement?: Permit2Settlement
}

function viewOf(request: Permit2Request): Permit2View {
  const { payload } = request.paymentPayload
  const common = { auth: payload.permit2Authorization, signature: payload.signature as Hex, payer: payload.permit2Authorization.from }
  const r = request.paymentRequirements
  if (request.x402Version === 1) {
    return {
      ...common, kind: 'exact', version: 1, network: request.paymentPayload.network, scheme: request.paymentPayload.scheme,
      requirements: { scheme: r.scheme, network: r.network, amount: (r as any).maxAmountRequired, asset: r.asset, payTo: r.payTo, extra: r.extra },
    }
  }
  const accepted = request.paymentPayload.accepted
  return {
    ...common, kind: accepted.scheme === 'upto' ? 'upto' : 'exact', version: 2, network: accepted.network, scheme: accepted.scheme, accepted,
    requirements: { scheme: r.scheme, network: r.network, amount: (r as any).amount, asset: r.asset, payTo: r.payTo, extra: r.extra },
  }
}

const field = (name: string) => `paymentPayload.payload.permit2Authorization.${name}`

function typedPermit(view: Permit2View): TypedPermit | Failure {
  const a = view.auth
  const numbers = {
    'permitted.amount': BigInt(a.permitted.amount), nonce: BigInt(a.nonce),
    deadline: BigInt(a.deadline), 'witness.validAfter': BigInt(a.witness.validAfter),
  }
  for (const [name, n] of Object.entries(numbers)) {
    if (n >= uint256Limit) return { reason: reasons.invalidPayload, message: `${field(name)} does not fit uint256`, details: { field: field(name) } }
  }
  if (view.kind === 'upto' && a.witness.facilitator === undefined) {
    return { reason: reasons.invalidPayload, message: `${field('witness.facilitator')} is required for the upto scheme`, details: { field: field('witness.facilitator') } }
  }
  if (view.kind === 'exact' && a.witness.facilitator !== undefined) {
    return { reason: reasons.invalidPayload, message: `${field('witness.facilitator')} is not part of an exact Permit2 witness`, details: { field: field('witness.facilitator') } }
  }
  return {
    from: getAddress(a.from), token: getAddress(a.permitted.token), permitted: numbers['permitted.amount'],
    spender: getAddress(a.spender), nonce: numbers.nonce, deadline: numbers.deadline, to: getAddress(a.witness.to),
    validAfter: numbers['witness.validAfter'], facilitator: a.witness.facilitator === undefined ? undefined : getAddress(a.witness.facilitator),
  }
}

function digestOf(ctx: EvmChainContext, kind: Permit2Kind, t: TypedPermit): Hex {
  const witness = kind === 'upto' ? { to: t.to, facilitator: t.facilitator!, validAfter: t.validAfter } : { to: t.to, validAfter: t.validAfter }
  return hashTypedData({
    domain: { name: 'Permit2', chainId: ctx.chainId, verifyingContract: permit2Address },
    types: witnessTypes[kind] as any, primaryType: 'PermitWitnessTransferFrom',
    message: { permitted: { token: t.token, amount: t.permitted }, spender: t.spender, nonce: t.nonce, deadline: t.deadline, witness } as any,
  })
}

/** The proxy call for these terms, with the signature as it goes on chain. */
function settleCall(kind: Permit2Kind, t: TypedPermit, amount: bigint, signature: Hex): SettlementCall {
  const permit = { permitted: { token: t.token, amount: t.permitted }, nonce: t.nonce, deadline: t.deadline }
  if (kind === 'exact') {
    return {
      to: exactPermit2ProxyAddress,
      data: encodeFunctionData({ abi: exactProxyAbi, functionName: 'settle', args: [permit, t.from, { to: t.to, validAfter: t.validAfter }, signature] }),
    }
  }
  return {
    to: uptoPermit2ProxyAddress,
    data: encodeFunctionData({
      abi: uptoProxyAbi, functionName: 'settle',
      args: [permit, amount, t.from, { to: t.to, facilitator: t.facilitator!, validAfter: t.validAfter }, signature],
    }),
  }
}

/** The signature as Permit2 will check it if the payer turns out to have no code (v normalised), else the ERC-6492 inner one. */
function presumedSignature(signature: Hex): Hex {
  if (isErc6492Signature(signature)) {
    try {
      return parseErc6492Signature(signature).signature
    } catch {
      return signature
    }
  }
  const full = expandCompactSignature(signature)
  const parts = size(full) === 65 ? splitSignature(full) : undefined
  return parts ? `${full.slice(0, 130)}${parts.v.toString(16)}` as Hex : signature
}

/** Maps a revert of the proxy or of Permit2 to a reason. */
export function reasonForPermit2Revert(text: string): Failure {
  const table: [RegExp, string][] = [
    [/InvalidNonce/, reasons.permit2InvalidNonce],
    [/InvalidSigner|InvalidSignature|InvalidContractSignature|SignatureExpired/, reasons.permit2InvalidSignature],
    [/AmountExceedsPermitted/, reasons.uptoSettlementExceedsAmount],
    [/UnauthorizedFacilitator/, reasons.uptoFacilitatorMismatch],
    [/InvalidAmount/, reasons.permit2InvalidAmount],
    [/InvalidDestination/, reasons.permit2InvalidDestination],
    [/InvalidOwner/, reasons.permit2InvalidOwner],
    [/PaymentTooEarly/, reasons.permit2PaymentTooEarly],
    [/exceeds balance|insufficient balance/i, reasons.permit2InsufficientBalance],
    [/exceeds allowance|insufficient allowance/i, reasons.permit2AllowanceRequired],
  ]
  const hit = table.find(([pattern]) => pattern.test(text))
  return { reason: hit ? hit[1] : reasons.permit2SimulationFailed, message: text }
}

type Early<T> = Promise<{ ok: true; value: T } | { ok: false; error: unknown }>
function early<T>(read: () => Promise<T>): Early<T> {
  return read().then((value) => ({ ok: true as const, value }), (error: unknown) => ({ ok: false as const, error }))
}
async function must<T>(pending: Early<T>): Promise<T> {
  const result = await pending
  if (!result.ok) throw result.error
  return result.value
}

async function simulate(ctx: EvmChainContext, kind: Permit2Kind, call: SettlementCall): Promise<Failure | undefined> {
  try {
    await ctx.publicClient.call({ account: ctx.signerAddress, to: call.to, data: call.data })
    return undefined
  } catch (error) {
    const text = revertText(error) ?? decodedRevert(error, kind)
    if (text === undefined) throw error
    return reasonForPermit2Revert(text)
  }
}

/** A raw eth_call revert carries only data: decode it against the proxy's and Permit2's errors. */
function decodedRevert(error: unknown, kind: Permit2Kind): string | undefined {
  const data = findRevertData(error)
  if (!data) return undefined
  for (const item of simulationAbi(kind)) {
    if (item.type !== 'error') continue
    try {
      return decodeErrorResult({ abi: [item], data }).errorName
    } catch {
      // not this one
    }
  }
  return `reverted with data ${data.slice(0, 10)}`
}

function findRevertData(error: unknown): Hex | undefined {
  let e: any = error
  for (let depth = 0; e && depth < 8; depth++, e = e.cause) {
    const data = typeof e.data === 'string' ? e.data : typeof e.data?.data === 'string' ? e.data.data : undefined
    if (data && /^0x[0-9a-fA-F]*$/.test(data)) return data as Hex
  }
  return undefined
}

function invalid(payer: string, failure: Failure): Permit2Outcome {
  const response: VerifyResponse = { isValid: false, invalidReason: failure.reason, invalidMessage: failure.message, payer }
  if (failure.details) response.details = failure.details
  return { response }
}

export interface Permit2CheckOptions {
  simulate: boolean
  /** upto settle: the amount to settle (≤ permitted). Absent at verify, where the requirements' amount is the maximum. */
  settleAmount?: bigint
}

/** The code of these addresses is read once: code cannot go away once deployed. */
function codeRead(ctx: EvmChainContext, address: Address): Early<boolean> | undefined {
  if (ctx.assetsWithCode.has(address.toLowerCase())) return undefined
  return early(async () => {
    const code = await ctx.publicClient.getCode({ address })
    const deployed = code !== undefined && code !== '0x'
    if (deployed) ctx.assetsWithCode.add(address.toLowerCase())
    return deployed
  })
}

/**
 * Runs the checks on a schema-valid Permit2 request. Throws only on RPC faults.
 */
export async function checkPermit2(ctx: EvmChainContext, request: Permit2Request, opts: Permit2CheckOptions): Promise<Permit2Outcome> {
  const view = viewOf(request)
  const upto = view.kind === 'upto'
  const settling = opts.settleAmount !== undefined
  const checked = checkRequirements(ctx, settling ? { ...view, accepted: undefined } : view, view.kind)
  if ('reason' in checked) return invalid(view.payer, checked)
  if (settling && view.accepted && BigInt(view.accepted.amount) !== BigInt(view.auth.permitted.amount)) {
    return invalid(view.payer, {
      reason: reasons.invalidRequirements,
      message: `paymentPayload.accepted.amount (${view.accepted.amount}) differs from the permitted amount (${view.auth.permitted.amount})`,
    })
  }
  const { asset } = checked
  const t = typedPermit(view)
  if ('reason' in t) return invalid(view.payer, t)
  const proxy = upto ? uptoPermit2ProxyAddress : exactPermit2ProxyAddress
  const amount = opts.settleAmount ?? t.permitted

  const client = ctx.publicClient
  // Every read (and the presumed simulation) leaves in this tick: one JSON-RPC batch.
  const payerCode = early(() => client.getCode({ address: t.from }))
  const assetCode = codeRead(ctx, asset.address)
  const permit2Code = codeRead(ctx, permit2Address)
  const proxyCode = codeRead(ctx, proxy)
  const bitmap = early(() => client.readContract({ address: permit2Address, abi: permit2Abi, functionName: 'nonceBitmap', args: [t.from, t.nonce >> 8n] }))
  const balance = early(() => client.readContract({ address: asset.address, abi: eip3009Abi, functionName: 'balanceOf', args: [t.from] }))
  const allowance = early(() => client.readContract({ address: asset.address, abi: allowanceAbi, functionName: 'allowance', args: [t.from, permit2Address] }))
  const presumed = presumedSignature(view.signature)
  const presumedSimulation = opts.simulate ? early(() => simulate(ctx, view.kind, settleCall(view.kind, t, amount, presumed))) : undefined

  if (t.spender !== proxy) {
    return invalid(view.payer, {
      reason: reasons.permit2InvalidSpender, message: `${field('spender')} ${view.auth.spender} is not the x402 ${view.kind} Permit2 proxy ${proxy}`,
      details: { spender: view.auth.spender, expected: proxy },
    })
  }
  if (t.to.toLowerCase() !== view.requirements.payTo.toLowerCase()) {
    return invalid(view.payer, {
      reason: reasons.permit2RecipientMismatch, message: `${field('witness.to')} ${view.auth.witness.to} is not payTo ${view.requirements.payTo}`,
      details: { to: view.auth.witness.to, payTo: view.requirements.payTo },
    })
  }
  if (upto && t.facilitator !== ctx.signerAddress) {
    return invalid(view.payer, {
      reason: reasons.uptoFacilitatorMismatch,
      message: `${field('witness.facilitator')} ${t.facilitator} is not this facilitator's signer ${ctx.signerAddress}`,
      details: { facilitator: t.facilitator, expected: ctx.signerAddress },
    })
  }
  const now = BigInt(ctx.now())
  if (t.deadline < now + deadlineMarginSeconds) {
    return invalid(view.payer, {
      reason: reasons.permit2DeadlineExpired,
      message: `${field('deadline')} ${t.deadline} is ${t.deadline <= now ? 'past' : `less than ${deadlineMarginSeconds} s ahead`} (now ${now})`,
      details: { deadline: t.deadline.toString(), now: now.toString() },
    })
  }
  if (t.validAfter > now) {
    return invalid(view.payer, {
      reason: reasons.permit2NotYetValid, message: `${field('witness.validAfter')} ${t.validAfter} is in the future (now ${now})`,
      details: { validAfter: t.validAfter.toString(), now: now.toString() },
    })
  }
  const amountField = view.version === 1 ? 'maxAmountRequired' : 'amount'
  if (settling) {
    if (amount > t.permitted) {
      return invalid(view.payer, {
        reason: reasons.uptoSettlementExceedsAmount,
        message: `settlement amount ${amount} exceeds the signed maximum ${field('permitted.amount')} ${t.permitted}`,
        details: { amount: amount.toString(), permitted: t.permitted.toString() },
      })
    }
  } else if (t.permitted !== BigInt(view.requirements.amount)) {
    return invalid(view.payer, {
      reason: reasons.permit2AmountMismatch,
      message: `${field('permitted.amount')} ${t.permitted} differs from paymentRequirements.${amountField} ${view.requirements.amount}`,
      details: { permitted: t.permitted.toString(), required: view.requirements.amount },
    })
  }
  if (t.token !== asset.address) {
    return invalid(view.payer, {
      reason: reasons.permit2TokenMismatch, message: `${field('permitted.token')} ${view.auth.permitted.token} is not the asset ${asset.address}`,
      details: { token: view.auth.permitted.token, asset: asset.address },
    })
  }
  // Permit2 verifies 64-byte EIP-2098 signatures itself, so a compact one is as good as its 65-byte form.
  const verdict = await verifyAuthorizationSignature(ctx, digestOf(ctx, view.kind, t), view.signature, t.from, must(payerCode), { acceptCompact: true })
  if (!verdict.ok) {
    const reason = verdict.reason === reasons.invalidSignature ? reasons.permit2InvalidSignature : verdict.reason!
    return invalid(view.payer, { reason, message: verdict.message! })
  }
  if (assetCode && !(await must(assetCode))) {
    return invalid(view.payer, { reason: reasons.assetNotDeployed, message: `no contract deployed at asset ${asset.address}` })
  }
  for (const [code, where] of [[permit2Code, `Permit2 ${permit2Address}`], [proxyCode, `the x402 ${view.kind} Permit2 proxy ${proxy}`]] as const) {
    if (code && !(await must(code))) {
      return invalid(view.payer, { reason: reasons.permit2ProxyNotDeployed, message: `no contract deployed at ${where} on ${ctx.caip2}` })
    }
  }
  if (((await must(bitmap)) >> (t.nonce & 0xffn)) & 1n) {
    return invalid(view.payer, { reason: reasons.permit2InvalidNonce, message: `Permit2 nonce ${t.nonce} of ${view.payer} is already used` })
  }
  const held = await must(balance)
  if (held < amount) {
    return invalid(view.payer, {
      reason: reasons.permit2InsufficientBalance, message: `balance ${held} of ${view.payer} is below ${amount}`,
      details: { balance: held.toString(), required: amount.toString() },
    })
  }
  const allowed = await must(allowance)
  if (allowed < amount) {
    return invalid(view.payer, {
      reason: reasons.permit2AllowanceRequired,
      message: `${view.payer} has approved ${allowed} to Permit2 for ${asset.address}, below ${amount}; approve Permit2 first`,
      details: { allowance: allowed.toString(), required: amount.toString() },
    })
  }
  const call = settleCall(view.kind, t, amount, verdict.signature)
  if (presumedSimulation) {
    const failure = verdict.signature === presumed ? await must(presumedSimulation) : await simulate(ctx, view.kind, call)
    if (failure) return invalid(view.payer, failure)
  }
  return { response: { isValid: true, invalidReason: null, payer: view.payer }, settlement: { call, asset, typed: t, amount } }
}

/** POST verify for a Permit2 body (exact v1/v2, upto v2). Never throws; see verify.ts `verifyExact`. */
export async function verifyPermit2(ctx: EvmChainContext, body: unknown): Promise<VerifyResponse> {
  const parsed = parsePermit2Request(body)
  if (!parsed.ok) {
    return { isValid: false, invalidReason: parsed.reason, invalidMessage: parsed.message, payer: parsed.payer, details: { field: parsed.field } }
  }
  try {
    return (await checkPermit2(ctx, parsed.request, { simulate: true })).response
  } catch (error) {
    return {
      isValid: false, invalidReason: reasons.unexpectedVerifyError,
      invalidMessage: `chain access failed: ${safeMessage(error)}`, payer: parsed.request.paymentPayload.payload.permit2Authorization.from,
    }
  }
}

export { viewOf as permit2ViewOf }
