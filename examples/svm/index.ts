/**
 * A local Solana (SVM) for `npm start` and tests: LiteSVM in process (SPL Token, Token-2022,
 * Associated Token, Memo and Compute Budget programs built in) behind a loopback JSON-RPC front
 * (rpc.ts), with a USDC-like mint (6 decimals) under each token program, a funded payer and its
 * token accounts, an empty payee token account, and a facilitator (fee payer) account with SOL.
 *
 * Keys are derived from fixed names (accounts.ts `devAccount`); never use them anywhere real.
 *
 * Standalone: `node --import tsx examples/svm/index.ts --port 18899 [--with-keys]` prints what it
 * set up as JSON and runs until SIGINT/SIGTERM.
 */
import { pathToFileURL } from 'node:url'
import { lamports, type Address } from '@solana/kit'
import { LiteSVM } from 'litesvm'
import {
  associatedTokenAddress, devAccount, lookupTableData, mintData, tokenAccountData, tokenAmountOf,
  LOOKUP_TABLE_PROGRAM, TOKEN_2022_PROGRAM, TOKEN_PROGRAM, type SvmAccount,
} from './accounts.ts'
import { startSvmRpc, type SvmRpcFront } from './rpc.ts'

export { associatedTokenAddress, devAccount, TOKEN_2022_PROGRAM, TOKEN_PROGRAM, type SvmAccount } from './accounts.ts'

export interface LocalSvm {
  rpcUrl: string
  svm: LiteSVM
  /** USDC-like mint under the classic Token program. */
  mint: Address
  /** USDC-like mint under Token-2022. */
  mint2022: Address
  decimals: number
  accounts: {
    /** Fee payer of settlements (holds SOL only). */
    facilitator: SvmAccount
    /** Holds `payerTokens` of both mints. */
    payer: SvmAccount
    /** Receives payments; token accounts exist, empty. */
    payee: SvmAccount
    /** Has token accounts holding nothing. */
    poor: SvmAccount
    /** Mint authority. */
    authority: SvmAccount
  }
  payerTokens: bigint
  front: SvmRpcFront
  /** Token balance of `owner`'s associated account for `mint` (default `mint`), 0 when absent. */
  tokenBalance(owner: Address, mint?: Address): Promise<bigint>
  /** SOL balance in lamports. */
  lamports(owner: Address): bigint
  /** Writes an Address Lookup Table account holding `addresses`. */
  setLookupTable(table: Address, addresses: readonly Address[]): void
  /** Makes the current blockhash stale (transactions built on it no longer land). */
  expireBlockhash(): void
  close(): Promise<void>
}

export interface LocalSvmOptions {
  host?: string
  /** 0 (default) picks a free port. */
  port?: number
  /** Token amount (atomic units) the payer holds of each mint; default 1,000 tokens. */
  payerTokens?: bigint
}

const DECIMALS = 6

/**
 * Starts the local SVM and its RPC front.
 *
 * @example
 * ```ts
 * const local = await startLocalSvm()
 * try { console.log(local.rpcUrl, local.mint) } finally { await local.close() }
 * ```
 */
export async function startLocalSvm(opts: LocalSvmOptions = {}): Promise<LocalSvm> {
  const svm = new LiteSVM()
  const payerTokens = opts.payerTokens ?? 1_000_000_000n
  const accounts = {
    facilitator: devAccount('facilitator'),
    payer: devAccount('payer'),
    payee: devAccount('payee'),
    poor: devAccount('poor'),
    authority: devAccount('mint authority'),
  }
  const mint = devAccount('usdc mint').address
  const mint2022 = devAccount('usdc mint token-2022').address
  for (const account of Object.values(accounts)) svm.airdrop(account.address, lamports(10_000_000_000n))

  const rentFor = (size: number) => lamports(svm.minimumBalanceForRentExemption(BigInt(size)))
  const put = (address: Address, programAddress: Address, data: Uint8Array) => svm.setAccount({
    address, data, executable: false, lamports: rentFor(data.length), programAddress, space: BigInt(data.length),
  })
  for (const [mintAddress, program] of [[mint, TOKEN_PROGRAM], [mint2022, TOKEN_2022_PROGRAM]] as const) {
    put(mintAddress, program, mintData({ authority: accounts.authority.address, supply: payerTokens, decimals: DECIMALS }))
    for (const [owner, amount] of [[accounts.payer, payerTokens], [accounts.payee, 0n], [accounts.poor, 0n]] as const) {
      put(await associatedTokenAddress(owner.address, mintAddress, program), program, tokenAccountData({ mint: mintAddress, owner: owner.address, amount }))
    }
  }

  const front = await startSvmRpc(svm, { host: opts.host, port: opts.port })
  return {
    rpcUrl: front.url, svm, mint, mint2022, decimals: DECIMALS, accounts, payerTokens, front,
    async tokenBalance(owner, mintAddress = mint) {
      const program = mintAddress === mint2022 ? TOKEN_2022_PROGRAM : TOKEN_PROGRAM
      const account = svm.getAccount(await associatedTokenAddress(owner, mintAddress, program))
      return account.exists ? tokenAmountOf(account.data) : 0n
    },
    lamports: (owner) => BigInt(svm.getBalance(owner) ?? 0n),
    setLookupTable: (table, addresses) => put(table, LOOKUP_TABLE_PROGRAM, lookupTableData(addresses)),
    expireBlockhash: () => svm.expireBlockhash(),
    close: () => front.close(),
  }
}

async function main(args: string[]): Promise<void> {
  const flag = (name: string) => {
    const at = args.indexOf(name)
    return at >= 0 ? args[at + 1] : undefined
  }
  const local = await startLocalSvm({ port: Number(flag('--port') ?? 18899) })
  const withKeys = args.includes('--with-keys')
  const shown = Object.fromEntries(Object.entries(local.accounts).map(([name, a]) => [name, withKeys ? { address: a.address, secretKey: a.secretKeyBase58 } : a.address]))
  console.log(JSON.stringify({ rpcUrl: local.rpcUrl, mint: local.mint, mint2022: local.mint2022, decimals: local.decimals, accounts: shown }, null, 2))
  const stop = () => void local.close().then(() => process.exit(0))
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main(process.argv.slice(2))
