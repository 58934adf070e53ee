/**
 * Shared fixtures of the EVM facilitator tests: a local chain with a facilitator context, a SQLite
 * store for settlement records, and payments made with the official x402 SDK or viem directly.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { x402Client } from '@x402/core/client'
import { ExactEvmScheme } from '@x402/evm/exact/client'
import { ExactEvmSchemeV1 } from '@x402/evm/exact/v1/client'
import { createPublicClient, http, parseAbi, type Address, type Hex, type LocalAccount } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { startLocalChain, type LocalChain } from '../../../examples/chain/index.ts'
import { openSqliteStore } from '../../../core/store/sqlite.ts'
import { createEvmChainContext, type EvmChainContext } from '../../../plugins/x402-facilitator/evm/context.ts'
import { resolveEvmNetwork } from '../../../plugins/x402-facilitator/evm/chains.ts'
import { settlementRecordsFrom, type SettlementRecords } from '../../../plugins/x402-facilitator/evm/records.ts'
import { transferWithAuthorizationTypes } from '../../../plugins/x402-facilitator/evm/abi.ts'
import type {
  Eip3009Authorization, PaymentRequirementsV1, PaymentRequirementsV2,
} from '../../../plugins/x402-facilitator/evm/types.ts'

export const price = '10000' // 0.01 USDC

export interface Fixture {
  chain: LocalChain
  ctx: EvmChainContext
  records: SettlementRecords
  /** A second records view over the same store, as a second gateway instance would have. */
  otherRecords: SettlementRecords
  v2Network: string
  v1Network: string
  balanceOf(address: Address): Promise<bigint>
  close(): Promise<void>
}

export async function startFixture(chainId: number): Promise<Fixture> {
  const chain = await startLocalChain({ chainId })
  const dataDir = await mkdtemp(join(tmpdir(), 'x402-evm-'))
  const store = openSqliteStore({ dataDir })
  const ctx = createEvmChainContext({
    network: chainId, rpcUrl: chain.rpcUrl, signerPrivateKey: chain.accounts.facilitator.privateKey,
    assets: [{ address: chain.token, name: chain.tokenInfo.name, version: chain.tokenInfo.version, decimals: chain.tokenInfo.decimals }],
    pollingIntervalMs: 20,
  })
  const reader = createPublicClient({ chain: chain.viemChain, transport: http(chain.rpcUrl, { retryCount: 0 }) })
  const balanceAbi = parseAbi(['function balanceOf(address) view returns (uint256)'])
  return {
    chain, ctx,
    records: settlementRecordsFrom(store.documents('x402-settlements'), 'gateway-a'),
    otherRecords: settlementRecordsFrom(store.documents('x402-settlements'), 'gateway-b'),
    v2Network: `eip155:${chainId}`,
    v1Network: resolveEvmNetwork(chainId)?.v1Name ?? `eip155:${chainId}`,
    balanceOf: (address) => reader.readContract({ address: chain.token, abi: balanceAbi, functionName: 'balanceOf', args: [address] }),
    async close() {
      await store.close()
      await chain.close()
      await rm(dataDir, { recursive: true, force: true })
    },
  }
}

export function requirementsV2(f: Fixture, overrides: Partial<PaymentRequirementsV2> = {}): PaymentRequirementsV2 {
  return {
    scheme: 'exact', network: f.v2Network, amount: price, asset: f.chain.token, payTo: f.chain.accounts.payee.address,
    maxTimeoutSeconds: 60, extra: { name: 'USDC', version: '2' }, ...overrides,
  }
}

export function requirementsV1(f: Fixture, overrides: Partial<PaymentRequirementsV1> = {}): PaymentRequirementsV1 {
  return {
    scheme: 'exact', network: f.v1Network, maxAmountRequired: price, asset: f.chain.token,
    payTo: f.chain.accounts.payee.address, resource: 'http://127.0.0.1/paid', description: 'a paid thing',
    mimeType: 'application/json', maxTimeoutSeconds: 60, extra: { name: 'USDC', version: '2' }, ...overrides,
  }
}

/** The signer a wallet app would hand the SDK; for an ERC-1271 wallet its owner signs for the wallet's address. */
export function sdkSigner(key: Hex, asAddress?: Address) {
  const account = privateKeyToAccount(key)
  return asAddress ? { address: asAddress, signTypedData: account.signTypedData } : account
}

/** A v2 facilitator body made by the official client (`x402Client` + `ExactEvmScheme`). */
export async function sdkBodyV2(f: Fixture, signer: ReturnType<typeof sdkSigner>, reqs = requirementsV2(f)) {
  // Spend controls off: the local token is not one of the SDK's default assets.
  const client = x402Client.fromConfig({
    schemes: [{ network: f.v2Network as `${string}:${string}`, client: new ExactEvmScheme(signer as LocalAccount) }],
    spendControls: false,
  })
  const paymentPayload = await client.createPaymentPayload({
    x402Version: 2, resource: { url: 'http://127.0.0.1/paid', description: '', mimeType: 'application/json' }, accepts: [reqs as any],
  })
  return { x402Version: 2, paymentPayload, paymentRequirements: reqs } as any
}

/** A v1 facilitator body made by the official client (`x402Client` + `ExactEvmSchemeV1`). */
export async function sdkBodyV1(f: Fixture, signer: ReturnType<typeof sdkSigner>, reqs = requirementsV1(f)) {
  const client = x402Client.fromConfig({
    schemes: [{ network: reqs.network as `${string}:${string}`, client: new ExactEvmSchemeV1(signer as LocalAccount), x402Version: 1 }],
    spendControls: false,
  })
  const paymentPayload = await client.createPaymentPayload({ x402Version: 1, accepts: [reqs as any] } as any)
  return { x402Version: 1, paymentPayload, paymentRequirements: reqs } as any
}

export interface AuthorizationInput {
  /** Signing key; defaults to the payer's. */
  key?: Hex
  from?: Address
  to?: Address
  value?: string
  validAfter?: number
  validBefore?: number
  nonce?: Hex
  /** EIP-712 domain overrides (to sign for the wrong token or chain). */
  domain?: Partial<{ name: string; version: string; chainId: number; verifyingContract: Address }>
}

export function now(): number {
  return Math.floor(Date.now() / 1000)
}

export function randomNonce(): Hex {
  return generatePrivateKey()
}

/** An authorization signed with viem directly, any field overridable. */
export async function signAuthorization(f: Fixture, input: AuthorizationInput = {}) {
  const key = input.key ?? f.chain.accounts.payer.privateKey
  const account = privateKeyToAccount(key)
  const message = {
    from: input.from ?? account.address,
    to: input.to ?? f.chain.accounts.payee.address,
    value: BigInt(input.value ?? price),
    validAfter: BigInt(input.validAfter ?? now() - 600),
    validBefore: BigInt(input.validBefore ?? now() + 300),
    nonce: input.nonce ?? randomNonce(),
  }
  const signature = await account.signTypedData({
    domain: { name: 'USDC', version: '2', chainId: f.chain.chainId, verifyingContract: f.chain.token, ...input.domain },
    types: transferWithAuthorizationTypes, primaryType: 'TransferWithAuthorization', message,
  })
  const authorization: Eip3009Authorization = {
    from: message.from, to: message.to, value: message.value.toString(),
    validAfter: message.validAfter.toString(), validBefore: message.validBefore.toString(), nonce: message.nonce,
  }
  return { authorization, signature: signature as string }
}

export function bodyV2(reqs: PaymentRequirementsV2, signed: { authorization: Eip3009Authorization; signature: string }, accepted = reqs) {
  return {
    x402Version: 2,
    paymentPayload: { x402Version: 2, accepted, payload: signed, resource: { url: 'http://127.0.0.1/paid' } },
    paymentRequirements: reqs,
  } as any
}

export function bodyV1(reqs: PaymentRequirementsV1, signed: { authorization: Eip3009Authorization; signature: string }, network = reqs.network) {
  return {
    x402Version: 1,
    paymentPayload: { x402Version: 1, scheme: 'exact', network, payload: signed },
    paymentRequirements: reqs,
  } as any
}

/** v2 requirements asking for Permit2 (`extra.assetTransferMethod: "permit2"`), as a resource server advertises them. */
export function permit2RequirementsV2(f: Fixture, overrides: Partial<PaymentRequirementsV2> = {}): PaymentRequirementsV2 {
  return requirementsV2(f, { extra: { name: 'USDC', version: '2', assetTransferMethod: 'permit2' }, ...overrides })
}

/** v2 `upto` requirements: Permit2, the maximum as amount, our signer as the facilitator allowed to settle. */
export function uptoRequirements(f: Fixture, maximum: string, overrides: Partial<PaymentRequirementsV2> = {}): PaymentRequirementsV2 {
  return requirementsV2(f, {
    scheme: 'upto', amount: maximum,
    extra: { name: 'USDC', version: '2', assetTransferMethod: 'permit2', facilitatorAddress: f.ctx.signerAddress }, ...overrides,
  })
}

/** A v2 `upto` body made by the official client (`x402Client` + `UptoEvmScheme`). */
export async function sdkUptoBody(f: Fixture, signer: ReturnType<typeof sdkSigner>, reqs: PaymentRequirementsV2) {
  const { UptoEvmScheme } = await import('@x402/evm/upto/client')
  const client = x402Client.fromConfig({
    schemes: [{ network: f.v2Network as `${string}:${string}`, client: new UptoEvmScheme(signer as LocalAccount) }],
    spendControls: false,
  })
  const paymentPayload = await client.createPaymentPayload({
    x402Version: 2, resource: { url: 'http://127.0.0.1/metered', description: '', mimeType: 'application/json' }, accepts: [reqs as any],
  })
  return { x402Version: 2, paymentPayload, paymentRequirements: reqs } as any
}

/**
 * A v1 Permit2 body. The official v1 client signs only EIP-3009, so the official v2 client signs
 * the Permit2 authorization for the same terms and the payload is carried in a v1 envelope.
 */
export async function sdkPermit2BodyV1(f: Fixture, signer: ReturnType<typeof sdkSigner>, reqs = requirementsV1(f)) {
  const v2 = await sdkBodyV2(f, signer, permit2RequirementsV2(f, { amount: reqs.maxAmountRequired, asset: reqs.asset, payTo: reqs.payTo }))
  return {
    x402Version: 1,
    paymentPayload: { x402Version: 1, scheme: 'exact', network: reqs.network, payload: v2.paymentPayload.payload },
    paymentRequirements: reqs,
  } as any
}
