/**
 * The checks that need no chain access: the payment is bound to the requirements (scheme, network,
 * asset, EIP-712 domain, and for v2 `accepted` equal to the requirements) and is served here.
 */
import { getAddress, type Address, type Hex } from 'viem'
import { chainIdOfNetwork, type EvmAssetInfo } from './chains.ts'
import type { EvmChainContext } from './context.ts'
import { reasons } from './errors.ts'
import type { TypedAuthorization } from './signature.ts'
import type { Eip3009Authorization, FacilitatorRequest, PaymentRequirementsV2 } from './types.ts'

/** What the requirement checks read: the same for every payload kind. */
export interface RequirementsView {
  version: 1 | 2
  network: string
  scheme: string
  requirements: PaymentView['requirements']
  accepted?: PaymentRequirementsV2
  payer: string
}

/** One shape for both versions. */
export interface PaymentView {
  version: 1 | 2
  /** The payload's network string, echoed in settle answers. */
  network: string
  scheme: string
  requirements: {
    scheme: string
    network: string
    /** maxAmountRequired (v1) or amount (v2). */
    amount: string
    asset: string
    payTo: string
    extra?: { name?: string; version?: string } | null
  }
  accepted?: PaymentRequirementsV2
  authorization: Eip3009Authorization
  signature: Hex
  /** authorization.from as sent. */
  payer: string
}

export interface Failure {
  reason: string
  message: string
  details?: Record<string, unknown>
}

export interface BoundPayment {
  asset: EvmAssetInfo
  typed: TypedAuthorization
  domain: { name: string; version: string; chainId: number; verifyingContract: Address }
}

export function viewOf(request: FacilitatorRequest): PaymentView {
  const { payload } = request.paymentPayload
  const common = { authorization: payload.authorization, signature: payload.signature as Hex, payer: payload.authorization.from }
  if (request.x402Version === 1) {
    const r = request.paymentRequirements
    return {
      ...common, version: 1, network: request.paymentPayload.network, scheme: request.paymentPayload.scheme,
      requirements: { scheme: r.scheme, network: r.network, amount: r.maxAmountRequired, asset: r.asset, payTo: r.payTo, extra: r.extra },
    }
  }
  const r = request.paymentRequirements
  const accepted = request.paymentPayload.accepted
  return {
    ...common, version: 2, network: accepted.network, scheme: accepted.scheme, accepted,
    requirements: { scheme: r.scheme, network: r.network, amount: r.amount, asset: r.asset, payTo: r.payTo, extra: r.extra },
  }
}

const uint256Limit = 2n ** 256n

/** The signed fields as EIP-712 values; a Failure when a number does not fit uint256. */
function typedAuthorization(view: PaymentView): TypedAuthorization | Failure {
  const a = view.authorization
  const numbers = { value: BigInt(a.value), validAfter: BigInt(a.validAfter), validBefore: BigInt(a.validBefore) }
  for (const [field, n] of Object.entries(numbers)) {
    if (n >= uint256Limit) {
      return { reason: reasons.invalidPayload, message: `paymentPayload.payload.authorization.${field} does not fit uint256` }
    }
  }
  return { from: getAddress(a.from), to: getAddress(a.to), nonce: a.nonce as Hex, ...numbers }
}

function sameAddress(a: string, b: string): boolean {
  return a.toLowerCase() === b.toLowerCase()
}

/** v2: the accepted requirements must be the ones presented (stricter than the reference). */
function acceptedMismatch(view: RequirementsView): Failure | undefined {
  const accepted = view.accepted
  if (!accepted) return undefined
  const r = view.requirements
  const differs: [string, unknown, unknown][] = []
  if (!sameAddress(accepted.asset, r.asset)) differs.push(['asset', accepted.asset, r.asset])
  if (!sameAddress(accepted.payTo, r.payTo)) differs.push(['payTo', accepted.payTo, r.payTo])
  if (BigInt(accepted.amount) !== BigInt(r.amount)) differs.push(['amount', accepted.amount, r.amount])
  for (const key of ['name', 'version'] as const) {
    const a = accepted.extra?.[key]
    const b = r.extra?.[key]
    if (a !== undefined && b !== undefined && a !== b) differs.push([`extra.${key}`, a, b])
  }
  const [first] = differs
  if (!first) return undefined
  return {
    reason: reasons.invalidRequirements,
    message: `paymentPayload.accepted.${first[0]} (${String(first[1])}) differs from paymentRequirements.${first[0]} (${String(first[2])})`,
    details: { field: `paymentPayload.accepted.${first[0]}`, accepted: first[1], required: first[2] },
  }
}

/**
 * Scheme, network, asset, EIP-712 domain and v2 `accepted`, in the reference's order (scheme,
 * domain, network) with our allow-list and binding checks added where they first can run.
 */
export function checkBinding(ctx: EvmChainContext, view: PaymentView): BoundPayment | Failure {
  const checked = checkRequirements(ctx, view, 'exact')
  if ('reason' in checked) return checked
  const typed = typedAuthorization(view)
  if ('reason' in typed) return typed
  return { asset: checked.asset, typed, domain: checked.domain }
}

/**
 * The payload-independent part of {@link checkBinding}: scheme, network, asset allow-list, the
 * asset's EIP-712 domain and, for v2, `accepted` equal to the requirements.
 */
export function checkRequirements(
  ctx: EvmChainContext, view: RequirementsView, scheme: 'exact' | 'upto',
): { asset: EvmAssetInfo; domain: BoundPayment['domain'] } | Failure {
  const r = view.requirements
  if (view.scheme !== scheme || r.scheme !== scheme) {
    const offending = view.scheme !== scheme ? view.scheme : r.scheme
    return {
      reason: scheme === 'exact' ? reasons.invalidScheme : reasons.uptoInvalidScheme,
      message: `scheme must be "${scheme}", got "${offending}"`, details: { scheme: offending },
    }
  }
  if (view.network !== r.network) {
    return {
      reason: reasons.networkMismatch,
      message: `payment network "${view.network}" differs from the required network "${r.network}"`,
      details: { paid: view.network, required: r.network },
    }
  }
  const chainId = chainIdOfNetwork(r.network)
  if (chainId !== ctx.chainId) {
    const served = ctx.network ? `${ctx.caip2} ("${ctx.network.v1Name}")` : ctx.caip2
    return {
      reason: reasons.networkMismatch,
      message: `network "${r.network}" is not served here; this facilitator settles on ${served}`,
      details: { required: r.network, served: ctx.caip2 },
    }
  }
  const asset = ctx.assets.find((a) => sameAddress(a.address, r.asset))
  if (!asset) {
    return {
      reason: reasons.invalidRequirements,
      message: `asset ${r.asset} is not accepted on ${ctx.caip2}; accepted: ${ctx.assets.map((a) => a.address).join(', ')}`,
      details: { asset: r.asset, accepted: ctx.assets.map((a) => a.address) },
    }
  }
  if (r.extra?.name !== undefined && r.extra.name !== asset.name) {
    return {
      reason: reasons.tokenNameMismatch,
      message: `extra.name "${r.extra.name}" is not the token's EIP-712 name "${asset.name}"`,
      details: { required: r.extra.name, token: asset.name },
    }
  }
  if (r.extra?.version !== undefined && r.extra.version !== asset.version) {
    return {
      reason: reasons.tokenVersionMismatch,
      message: `extra.version "${r.extra.version}" is not the token's EIP-712 version "${asset.version}"`,
      details: { required: r.extra.version, token: asset.version },
    }
  }
  const mismatch = acceptedMismatch(view)
  if (mismatch) return mismatch
  return { asset, domain: { name: asset.name, version: asset.version, chainId: ctx.chainId, verifyingContract: asset.address } }
}
