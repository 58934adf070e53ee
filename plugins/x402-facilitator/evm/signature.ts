/**
 * Checks the payer's signature of an EIP-3009 TransferWithAuthorization with the semantics the
 * token itself applies (OpenZeppelin SignatureChecker, as in FiatToken v2.2):
 * - `from` has no code: a 65-byte ECDSA signature with low s must recover to `from`; for Permit2
 *   (`acceptCompact`) a 64-byte EIP-2098 compact one too, read as the 65-byte signature it encodes,
 *   which is the form put on chain (Permit2's SignatureVerification takes both). EIP-3009 tokens
 *   keep refusing 64 bytes, as the official facilitator does;
 * - `from` has code (a contract, or an EIP-7702 delegated EOA): `isValidSignature` must return
 *   the ERC-1271 magic value; there is no ECDSA fallback (the reference's fixed bypass);
 * - ERC-6492 wrapped signatures: for a deployed wallet the inner signature is checked as above;
 *   for an undeployed one we refuse, because deploying means broadcasting attacker-chosen factory
 *   calldata from our account, and no factory is allow-listed.
 */
import {
  compactSignatureToSignature, ContractFunctionExecutionError, hashTypedData, isErc6492Signature, parseCompactSignature,
  parseErc6492Signature, recoverAddress, serializeSignature, size, type Address, type Hex,
} from 'viem'
import { erc1271Abi, erc1271MagicValue, transferWithAuthorizationTypes } from './abi.ts'
import type { EvmChainContext } from './context.ts'
import { reasons } from './errors.ts'

const secp256k1HalfOrder = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n

export interface TypedAuthorization {
  from: Address
  to: Address
  value: bigint
  validAfter: bigint
  validBefore: bigint
  nonce: Hex
}

export interface SignatureVerdict {
  ok: boolean
  reason?: string
  message?: string
  /** The signature to put on chain (ERC-6492 wrapper removed). */
  signature: Hex
  /** Which token overload settles it: (v, r, s) for EOAs, bytes for contract payers. */
  overload: 'vrs' | 'bytes'
}

/** EIP-712 digest of the authorization under the token's domain. */
export function authorizationDigest(
  domain: { name: string; version: string; chainId: number; verifyingContract: Address },
  message: TypedAuthorization,
): Hex {
  return hashTypedData({ domain, types: transferWithAuthorizationTypes, primaryType: 'TransferWithAuthorization', message })
}

/** Splits a 65-byte signature; undefined when v is not 0, 1, 27 or 28. */
export function splitSignature(signature: Hex): { r: Hex; s: Hex; v: number } | undefined {
  const r = `0x${signature.slice(2, 66)}` as Hex
  const s = `0x${signature.slice(66, 130)}` as Hex
  let v = Number.parseInt(signature.slice(130, 132), 16)
  if (v === 0 || v === 1) v += 27
  return v === 27 || v === 28 ? { r, s, v } : undefined
}

/**
 * The 65-byte `r ‖ s ‖ v` (v 27 or 28) of an EIP-2098 compact signature (`r ‖ yParity·2^255 + s`);
 * any other length is returned unchanged.
 *
 * @example
 * ```ts
 * expandCompactSignature(compact) // 0x…1b or 0x…1c, 65 bytes
 * ```
 */
export function expandCompactSignature(signature: Hex): Hex {
  if (size(signature) !== 64) return signature
  return serializeSignature(compactSignatureToSignature(parseCompactSignature(signature)))
}

async function checkEcdsa(digest: Hex, given: Hex, from: Address, acceptCompact: boolean): Promise<SignatureVerdict> {
  const signature = acceptCompact ? expandCompactSignature(given) : given
  const fail = (message: string): SignatureVerdict => ({
    ok: false, reason: reasons.invalidSignature, message, signature, overload: 'vrs',
  })
  if (size(signature) !== 65) {
    return {
      ok: false, reason: reasons.undeployedSmartWallet, signature, overload: 'bytes',
      message: `payer ${from} has no contract code, so only a 65-byte ECDSA signature${acceptCompact ? ' (or a 64-byte EIP-2098 compact one)' : ''} can be valid (got ${size(signature)} bytes)`,
    }
  }
  const parts = splitSignature(signature)
  if (!parts) return fail('signature v must be 27 or 28')
  if (BigInt(parts.s) > secp256k1HalfOrder) return fail('signature s is in the upper half of the curve order (malleable)')
  const normalised = `${signature.slice(0, 130)}${parts.v.toString(16)}` as Hex
  let recovered: Address
  try {
    recovered = await recoverAddress({ hash: digest, signature: normalised })
  } catch {
    return fail('signature does not recover to any address')
  }
  if (recovered.toLowerCase() !== from.toLowerCase()) {
    return fail('signature was not made by authorization.from for this token, chain, amount and recipient')
  }
  return { ok: true, signature: normalised, overload: 'vrs' }
}

async function checkErc1271(ctx: EvmChainContext, digest: Hex, signature: Hex, from: Address): Promise<SignatureVerdict> {
  let answer: Hex
  try {
    answer = await ctx.publicClient.readContract({
      address: from, abi: erc1271Abi, functionName: 'isValidSignature', args: [digest, signature],
    })
  } catch (error) {
    // A revert (no such function, or the wallet rejects loudly) is a verdict; a transport fault is not.
    if (error instanceof ContractFunctionExecutionError) {
      return {
        ok: false, reason: reasons.invalidSignature, signature, overload: 'bytes',
        message: `payer ${from} is a contract and its ERC-1271 isValidSignature reverted`,
      }
    }
    throw error
  }
  if (answer.toLowerCase() !== erc1271MagicValue) {
    return {
      ok: false, reason: reasons.invalidSignature, signature, overload: 'bytes',
      message: `payer ${from} is a contract and its ERC-1271 isValidSignature rejected the signature`,
    }
  }
  return { ok: true, signature, overload: 'bytes' }
}

/**
 * Decides whether `signature` authorizes the transfer for `from`. Throws only on RPC faults.
 *
 * @example
 * ```ts
 * const verdict = await verifyAuthorizationSignature(ctx, digest, signature, from)
 * if (!verdict.ok) return invalid(verdict.reason!, verdict.message)
 * ```
 */
export async function verifyAuthorizationSignature(
  ctx: EvmChainContext, digest: Hex, signature: Hex, from: Address, payerCode: Promise<Hex | undefined>,
  options: { acceptCompact?: boolean } = {},
): Promise<SignatureVerdict> {
  let inner = signature
  const wrapped = isErc6492Signature(signature)
  if (wrapped) {
    try {
      inner = parseErc6492Signature(signature).signature
    } catch {
      return {
        ok: false, reason: reasons.invalidSignature, signature, overload: 'bytes',
        message: 'ERC-6492 signature wrapper could not be decoded',
      }
    }
  }
  const code = await payerCode
  const hasCode = code !== undefined && code !== '0x'
  if (!hasCode && wrapped) {
    return {
      ok: false, reason: reasons.eip6492FactoryNotAllowed, signature, overload: 'bytes',
      message: `payer ${from} is not deployed; this facilitator does not deploy ERC-6492 counterfactual wallets`,
    }
  }
  return hasCode ? checkErc1271(ctx, digest, inner, from) : checkEcdsa(digest, inner, from, options.acceptCompact ?? false)
}
