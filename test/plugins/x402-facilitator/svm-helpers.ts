/**
 * Shared fixtures of the Solana facilitator tests: the local SVM (examples/svm) with our
 * facilitator over its RPC front and settlement records in a SQLite store, the official
 * `@x402/svm` client and facilitator on the same SVM, and hand-built transactions for attacks.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  AccountRole, appendTransactionMessageInstructions, compileTransaction, compressTransactionMessageUsingAddressLookupTables,
  createKeyPairSignerFromBytes, createTransactionMessage, getBase64EncodedWireTransaction, partiallySignTransaction,
  pipe, setTransactionMessageFeePayer, setTransactionMessageLifetimeUsingBlockhash, type Address, type Blockhash,
  type Instruction, type KeyPairSigner,
} from '@solana/kit'
import { SOLANA_TESTNET_CAIP2, toFacilitatorSvmSigner } from '@x402/svm'
import { ExactSvmScheme as OfficialClient } from '@x402/svm/exact/client'
import { ExactSvmScheme as OfficialFacilitator } from '@x402/svm/exact/facilitator'
import { ExactSvmSchemeV1 as OfficialClientV1 } from '@x402/svm/exact/v1/client'
import { ExactSvmSchemeV1 as OfficialFacilitatorV1 } from '@x402/svm/exact/v1/facilitator'
import pino from 'pino'
import { openSqliteStore } from '../../../core/store/sqlite.ts'
import { associatedTokenAddress, startLocalSvm, TOKEN_PROGRAM, type LocalSvm, type SvmAccount } from '../../../examples/svm/index.ts'
import { settlementRecordsFrom, type SettlementRecords } from '../../../plugins/x402-facilitator/evm/records.ts'
import { SvmFacilitator, type SvmNetworkSettings } from '../../../plugins/x402-facilitator/svm/facilitator.ts'
import { signerFromSecretKey } from '../../../plugins/x402-facilitator/svm/keys.ts'
import { svmNetworkForPath } from '../../../plugins/x402-facilitator/svm/networks.ts'

export const price = '10000' // 0.01 of a 6-decimal token
export const network = SOLANA_TESTNET_CAIP2

export interface SvmFixture {
  local: LocalSvm
  facilitator: SvmFacilitator
  records: SettlementRecords
  otherRecords: SettlementRecords
  payer: KeyPairSigner
  feePayer: string
  officialV2: OfficialFacilitator
  officialV1: OfficialFacilitatorV1
  clientV2: OfficialClient
  clientV1: OfficialClientV1
  close(): Promise<void>
}

export const settings = (rpcUrl: string, overrides: Partial<SvmNetworkSettings> = {}): SvmNetworkSettings => ({
  rpcUrl, rpcTimeoutMs: 5000, confirmTimeoutMs: 3000, pollingIntervalMs: 20, maxComputeUnitPrice: 5_000_000,
  maxComputeUnits: 200_000, recheckIntervalMs: 1000, ...overrides,
})

export async function startSvmFixture(overrides: Partial<SvmNetworkSettings> = {}): Promise<SvmFixture> {
  const local = await startLocalSvm()
  const dataDir = await mkdtemp(join(tmpdir(), 'x402-svm-'))
  const store = openSqliteStore({ dataDir })
  const records = settlementRecordsFrom(store.documents('x402-settlements'), 'gateway-a')
  const facilitator = await SvmFacilitator.open('solana/testnet', svmNetworkForPath('testnet')!, [signerFromSecretKey(local.accounts.facilitator.secretKey)],
    settings(local.rpcUrl, { assets: [{ address: local.mint, decimals: 6 }, { address: local.mint2022, decimals: 6 }], ...overrides }),
    records, pino({ level: 'silent' }))
  const payer = await createKeyPairSignerFromBytes(local.accounts.payer.secretKey)
  const feeSigner = await createKeyPairSignerFromBytes(local.accounts.facilitator.secretKey)
  const officialSigner = toFacilitatorSvmSigner(feeSigner, { defaultRpcUrl: local.rpcUrl })
  return {
    local, facilitator, records, otherRecords: settlementRecordsFrom(store.documents('x402-settlements'), 'gateway-b'),
    payer, feePayer: feeSigner.address,
    officialV2: new OfficialFacilitator(officialSigner), officialV1: new OfficialFacilitatorV1(officialSigner),
    clientV2: new OfficialClient(payer, { rpcUrl: local.rpcUrl }), clientV1: new OfficialClientV1(payer, { rpcUrl: local.rpcUrl }),
    async close() {
      await facilitator.close()
      await store.close()
      await local.close()
      await rm(dataDir, { recursive: true, force: true })
    },
  }
}

export function requirementsV2(f: SvmFixture, overrides: Record<string, unknown> = {}) {
  return {
    scheme: 'exact', network, amount: price, asset: f.local.mint as string, payTo: f.local.accounts.payee.address as string,
    maxTimeoutSeconds: 60, extra: { feePayer: f.feePayer }, ...overrides,
  }
}

export function requirementsV1(f: SvmFixture, overrides: Record<string, unknown> = {}) {
  return {
    scheme: 'exact', network: 'solana-testnet', maxAmountRequired: price, asset: f.local.mint as string,
    payTo: f.local.accounts.payee.address as string, resource: 'http://127.0.0.1/paid', description: 'a paid thing',
    mimeType: 'application/json', maxTimeoutSeconds: 60, extra: { feePayer: f.feePayer }, ...overrides,
  }
}

/** A v2 facilitator body holding `transaction`. */
export function bodyV2(f: SvmFixture, transaction: string, overrides: Record<string, unknown> = {}) {
  const requirements = requirementsV2(f, overrides)
  return { x402Version: 2, paymentPayload: { x402Version: 2, accepted: requirements, payload: { transaction }, resource: { url: 'http://127.0.0.1/paid' } }, paymentRequirements: requirements }
}

/** A payment made by the official client (v2 or v1), as a facilitator body. */
export async function officialBody(f: SvmFixture, version: 1 | 2 = 2, overrides: Record<string, unknown> = {}): Promise<any> {
  if (version === 2) {
    const requirements = requirementsV2(f, overrides)
    const created = await f.clientV2.createPaymentPayload(2, requirements as any)
    return { x402Version: 2, paymentPayload: { x402Version: 2, accepted: requirements, payload: created.payload, resource: { url: 'http://127.0.0.1/paid' } }, paymentRequirements: requirements }
  }
  const requirements = requirementsV1(f, overrides)
  const created = await f.clientV1.createPaymentPayload(1, requirements as any)
  return { x402Version: 1, paymentPayload: { ...created, scheme: 'exact', network: requirements.network }, paymentRequirements: requirements }
}

/** The same body judged by the official facilitator on the same SVM. */
export async function officialVerdict(f: SvmFixture, body: any): Promise<{ isValid: boolean; invalidReason?: string }> {
  try {
    return body.x402Version === 1
      ? await f.officialV1.verify(body.paymentPayload, body.paymentRequirements)
      : await f.officialV2.verify(body.paymentPayload, body.paymentRequirements)
  } catch (error) {
    return { isValid: false, invalidReason: `threw: ${(error as Error).message}` }
  }
}

const u32 = (n: number) => { const b = new Uint8Array(4); new DataView(b.buffer).setUint32(0, n, true); return b }
const u64 = (n: bigint) => { const b = new Uint8Array(8); new DataView(b.buffer).setBigUint64(0, n, true); return b }

export const ix = {
  limit: (units = 20_000): Instruction => ({ programAddress: 'ComputeBudget111111111111111111111111111111' as Address, accounts: [], data: new Uint8Array([2, ...u32(units)]) }),
  price: (micro = 1n): Instruction => ({ programAddress: 'ComputeBudget111111111111111111111111111111' as Address, accounts: [], data: new Uint8Array([3, ...u64(micro)]) }),
  memo: (text = 'a1b2c3d4e5f60718293a4b5c6d7e8f90', accounts: Address[] = []): Instruction => ({
    programAddress: 'MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr' as Address,
    accounts: accounts.map((address) => ({ address, role: AccountRole.READONLY })), data: new TextEncoder().encode(text),
  }),
  async transfer(f: SvmFixture, o: { mint?: Address; destinationOwner?: Address; destination?: Address; amount?: bigint; decimals?: number; authority?: Address; program?: Address } = {}): Promise<Instruction> {
    const mint = o.mint ?? f.local.mint
    const program = o.program ?? TOKEN_PROGRAM
    const authority = o.authority ?? f.payer.address
    return {
      programAddress: program,
      accounts: [
        { address: await associatedTokenAddress(authority, mint, program), role: AccountRole.WRITABLE },
        { address: mint, role: AccountRole.READONLY },
        { address: o.destination ?? await associatedTokenAddress(o.destinationOwner ?? f.local.accounts.payee.address, mint, program), role: AccountRole.WRITABLE },
        { address: authority, role: AccountRole.READONLY_SIGNER },
      ],
      data: new Uint8Array([12, ...u64(o.amount ?? BigInt(price)), o.decimals ?? 6]),
    }
  },
}

/**
 * A hand-built payment: `instructions` with the facilitator as fee payer, partially signed by the
 * payer (and `extraSigners`), optionally compressed through lookup tables.
 */
export async function craft(f: SvmFixture, instructions: Instruction[], o: { extraSigners?: SvmAccount[]; lookupTables?: Record<string, Address[]>; feePayer?: Address } = {}): Promise<string> {
  const blockhash = f.local.svm.latestBlockhash() as Blockhash
  let message: any = pipe(
    createTransactionMessage({ version: 0 }),
    (m) => setTransactionMessageFeePayer(o.feePayer ?? (f.feePayer as Address), m),
    (m) => setTransactionMessageLifetimeUsingBlockhash({ blockhash, lastValidBlockHeight: 1000n }, m),
    (m) => appendTransactionMessageInstructions(instructions, m),
  )
  if (o.lookupTables) message = compressTransactionMessageUsingAddressLookupTables(message, o.lookupTables as any)
  const compiled = compileTransaction(message)
  const candidates = [f.payer, ...await Promise.all((o.extraSigners ?? []).map((a) => createKeyPairSignerFromBytes(a.secretKey)))]
  const keys = candidates.filter((s) => s.address in compiled.signatures).map((s) => s.keyPair)
  const signed = await partiallySignTransaction(keys, compiled)
  return getBase64EncodedWireTransaction(signed)
}

/** The standard layout: limit, price, transfer, memo. */
export async function standard(f: SvmFixture, transfer: Partial<Parameters<typeof ix.transfer>[1]> = {}): Promise<Instruction[]> {
  return [ix.limit(), ix.price(), await ix.transfer(f, transfer), ix.memo(Math.random().toString(16).slice(2).padEnd(16, '0'))]
}
