/**
 * Permit2 and the x402 Permit2 proxies as the facilitator sees them: canonical addresses, the ABI
 * fragments it calls or decodes, and the EIP-712 types of a PermitWitnessTransferFrom. The checks
 * that use them are in permit2.ts.
 */
import { parseAbi, type Address } from 'viem'

/** Canonical addresses, the same on every chain (Permit2; the x402 proxies are CREATE2 deployments). */
export const permit2Address: Address = '0x000000000022D473030F116dDEE9F6B43aC78BA3'
export const exactPermit2ProxyAddress: Address = '0x402085c248EeA27D92E8b30b2C58ed07f9E20001'
export const uptoPermit2ProxyAddress: Address = '0x4020A4f3b7b90ccA423B9fabCc0CE57C6C240002'

/** Seconds the deadline must lie ahead of now (the reference's block-time buffer). */
export const deadlineMarginSeconds = 6n
export const uint256Limit = 2n ** 256n

export const permit2Abi = parseAbi([
  'function nonceBitmap(address owner, uint256 wordPos) view returns (uint256)',
  'error SignatureExpired(uint256 signatureDeadline)',
  'error InvalidNonce()',
  'error InvalidSignature()',
  'error InvalidSignatureLength()',
  'error InvalidSigner()',
  'error InvalidContractSignature()',
])
export const proxyErrors = [
  'error InvalidAmount()', 'error InvalidDestination()', 'error InvalidOwner()', 'error PaymentTooEarly()',
  'error AmountExceedsPermitted()', 'error UnauthorizedFacilitator()',
] as const
export const permitStructs = [
  'struct TokenPermissions { address token; uint256 amount; }',
  'struct PermitTransferFrom { TokenPermissions permitted; uint256 nonce; uint256 deadline; }',
] as const
export const exactProxyAbi = parseAbi([
  ...permitStructs,
  'struct Witness { address to; uint256 validAfter; }',
  'function settle(PermitTransferFrom permit, address owner, Witness witness, bytes signature)',
  ...proxyErrors,
])
export const uptoProxyAbi = parseAbi([
  ...permitStructs,
  'struct UptoWitness { address to; address facilitator; uint256 validAfter; }',
  'function settle(PermitTransferFrom permit, uint256 amount, address owner, UptoWitness witness, bytes signature)',
  ...proxyErrors,
])
export const allowanceAbi = parseAbi(['function allowance(address owner, address spender) view returns (uint256)'])
/** The simulation decodes reverts from the proxy and from Permit2 underneath it. */
export const simulationAbi = (kind: Permit2Kind) => [...(kind === 'exact' ? exactProxyAbi : uptoProxyAbi), ...permit2Abi.slice(1)]

export const tokenPermissions = [{ name: 'token', type: 'address' }, { name: 'amount', type: 'uint256' }] as const
export const permitFields = [
  { name: 'permitted', type: 'TokenPermissions' }, { name: 'spender', type: 'address' },
  { name: 'nonce', type: 'uint256' }, { name: 'deadline', type: 'uint256' }, { name: 'witness', type: 'Witness' },
] as const
export const witnessTypes = {
  exact: { PermitWitnessTransferFrom: permitFields, TokenPermissions: tokenPermissions, Witness: [{ name: 'to', type: 'address' }, { name: 'validAfter', type: 'uint256' }] },
  upto: {
    PermitWitnessTransferFrom: permitFields, TokenPermissions: tokenPermissions,
    Witness: [{ name: 'to', type: 'address' }, { name: 'facilitator', type: 'address' }, { name: 'validAfter', type: 'uint256' }],
  },
} as const

export type Permit2Kind = 'exact' | 'upto'
