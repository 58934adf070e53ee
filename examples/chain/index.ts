/**
 * A local EVM chain for `npm start` and tests: hardhat's in-process network behind its JSON-RPC
 * server on loopback, with an EIP-3009 token ("USDC", version "2", 6 decimals by default) and an
 * ERC-1271 smart wallet deployed, a payer funded with tokens and every account funded with ETH.
 * Permit2 and the x402 exact and upto Permit2 proxies sit at their canonical addresses (test
 * stand-ins written to the published interfaces, see contracts/), and the payer has approved
 * Permit2 for the token, as a wallet does once before its first Permit2 payment.
 *
 * Only hardhat's well-known development accounts are used (mnemonic
 * "test test test test test test test test test test test junk"); never use them anywhere real.
 *
 * Standalone: `node --import tsx examples/chain/index.ts --port 18545 [--chain-id 84532] [--with-keys]`
 * prints what it deployed as JSON and runs until SIGINT/SIGTERM.
 */
import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'
import {
  createPublicClient, createWalletClient, defineChain, getAddress, http,
  type Address, type Chain, type Hex, type PublicClient,
} from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { compileContracts } from './compile.ts'

export interface ChainAccount {
  address: Address
  privateKey: Hex
}

export interface LocalChain {
  rpcUrl: string
  chainId: number
  /** The EIP-3009 token. */
  token: Address
  /** Token metadata as deployed (the EIP-712 domain's name and version). */
  tokenInfo: { name: string; version: string; symbol: string; decimals: number }
  /** ERC-1271 wallet owned by `accounts.walletOwner`, funded with tokens. */
  wallet1271: Address
  /** Canonical addresses where the Permit2 stand-in and the x402 proxies run. */
  permit2: { permit2: Address; exactProxy: Address; uptoProxy: Address }
  accounts: {
    /** Deployed the contracts; the token's minter. */
    deployer: ChainAccount
    /** Pays gas for settlements. */
    facilitator: ChainAccount
    /** Holds `payerTokens` tokens. */
    payer: ChainAccount
    /** Receives payments; holds no tokens at start. */
    payee: ChainAccount
    /** Holds no tokens. */
    poor: ChainAccount
    /** Signs for `wallet1271`; holds no tokens itself. */
    walletOwner: ChainAccount
  }
  /** Token amount (atomic units) minted to the payer and to the ERC-1271 wallet. */
  payerTokens: bigint
  /** A viem chain definition for this chain. */
  viemChain: Chain
  /** Raw JSON-RPC call, for test controls such as `evm_setAutomine` and `evm_mine`. */
  request(method: string, params?: unknown[]): Promise<unknown>
  close(): Promise<void>
}

export interface LocalChainOptions {
  /** Loopback address to listen on; default 127.0.0.1. */
  host?: string
  /** Port; default 0 (any free port). */
  port?: number
  /** Default 84532 (Base Sepolia), so payments look like the spec's testnet ones. */
  chainId?: number
  token?: { name?: string; version?: string; symbol?: string; decimals?: number }
  /** Tokens (atomic units) for the payer and the wallet; default 1,000,000 whole tokens. */
  payerTokens?: bigint
}

const devKeys = {
  deployer: '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80',
  facilitator: '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d',
  payer: '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a',
  payee: '0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6',
  poor: '0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a',
  walletOwner: '0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba',
} as const satisfies Record<keyof LocalChain['accounts'], Hex>

const tenThousandEth = 10_000n * 10n ** 18n

/** Canonical addresses: Permit2 (same on every chain) and the x402 proxies (CREATE2, same on every chain). */
export const permit2Addresses = {
  permit2: '0x000000000022D473030F116dDEE9F6B43aC78BA3',
  exactProxy: '0x402085c248EeA27D92E8b30b2C58ed07f9E20001',
  uptoProxy: '0x4020A4f3b7b90ccA423B9fabCc0CE57C6C240002',
} as const satisfies Record<string, Address>

interface Eip1193 {
  request(args: { method: string; params?: unknown[] }): Promise<unknown>
}
interface HardhatRpcServer {
  listen(): Promise<{ address: string; port: number }>
  close(): Promise<void>
}

/** hardhat 2 has no public API for an in-process node without a config file; these internals are stable across 2.x. */
async function startHardhat(chainId: number, host: string, port: number) {
  const require = createRequire(import.meta.url)
  const { createHardhatNetworkProvider } = require('hardhat/internal/hardhat-network/provider/provider')
  const { JsonRpcServer } = require('hardhat/internal/hardhat-network/jsonrpc/server')
  const provider: Eip1193 = await createHardhatNetworkProvider(
    {
      hardfork: 'prague', chainId, networkId: chainId, blockGasLimit: 30_000_000, minGasPrice: 0n,
      automine: true, intervalMining: 0, mempoolOrder: 'priority', chains: new Map(),
      genesisAccounts: Object.values(devKeys).map((privateKey) => ({ privateKey, balance: tenThousandEth.toString() })),
      allowUnlimitedContractSize: false, throwOnTransactionFailures: true, throwOnCallFailures: true,
      allowBlocksWithSameTimestamp: false, enableTransientStorage: false, enableRip7212: false,
    },
    { enabled: false },
  )
  const server: HardhatRpcServer = new JsonRpcServer({ hostname: host, port, provider })
  const address = await server.listen()
  return { provider, server, port: address.port }
}

function account(privateKey: Hex): ChainAccount {
  return { address: privateKeyToAccount(privateKey).address, privateKey }
}

async function deploy(
  publicClient: PublicClient, rpcUrl: string, chain: Chain,
  tokenInfo: LocalChain['tokenInfo'], payerTokens: bigint, accounts: LocalChain['accounts'],
): Promise<{ token: Address; wallet1271: Address }> {
  const { Eip3009Token, OwnerWallet1271, Permit2Local, X402ExactPermit2ProxyLocal, X402UptoPermit2ProxyLocal } = compileContracts()
  const deployer = createWalletClient({
    account: privateKeyToAccount(accounts.deployer.privateKey), chain, transport: http(rpcUrl, { retryCount: 0 }),
  })
  const mined = async (hash: Hex) => {
    const receipt = await publicClient.waitForTransactionReceipt({ hash, pollingInterval: 20 })
    if (receipt.status !== 'success') throw new Error(`local chain setup transaction ${hash} reverted`)
    return receipt
  }
  const tokenReceipt = await mined(await deployer.deployContract({
    abi: Eip3009Token.abi, bytecode: Eip3009Token.bytecode,
    args: [tokenInfo.name, tokenInfo.version, tokenInfo.symbol, tokenInfo.decimals],
  }))
  const walletReceipt = await mined(await deployer.deployContract({
    abi: OwnerWallet1271.abi, bytecode: OwnerWallet1271.bytecode, args: [accounts.walletOwner.address],
  }))
  const token = getAddress(tokenReceipt.contractAddress!)
  const wallet1271 = getAddress(walletReceipt.contractAddress!)
  for (const to of [accounts.payer.address, wallet1271]) {
    await mined(await deployer.writeContract({ address: token, abi: Eip3009Token.abi, functionName: 'mint', args: [to, payerTokens] }))
  }
  // Deployed anywhere, then their runtime code is placed at the canonical addresses (they have
  // no constructor state and no immutables, so the code alone is the contract).
  const placements = [
    [Permit2Local, permit2Addresses.permit2], [X402ExactPermit2ProxyLocal, permit2Addresses.exactProxy],
    [X402UptoPermit2ProxyLocal, permit2Addresses.uptoProxy],
  ] as const
  for (const [compiled, at] of placements) {
    const receipt = await mined(await deployer.deployContract({ abi: compiled.abi, bytecode: compiled.bytecode }))
    const code = await publicClient.getCode({ address: receipt.contractAddress! })
    await publicClient.request({ method: 'hardhat_setCode' as any, params: [at, code] as any })
  }
  const payer = createWalletClient({
    account: privateKeyToAccount(accounts.payer.privateKey), chain, transport: http(rpcUrl, { retryCount: 0 }),
  })
  await mined(await payer.writeContract({
    address: token, abi: Eip3009Token.abi, functionName: 'approve', args: [permit2Addresses.permit2, 2n ** 256n - 1n],
  }))
  return { token, wallet1271 }
}

/**
 * Starts the chain and deploys the contracts; about one second (plus a one-off solc compile).
 *
 * @example
 * ```ts
 * const chain = await startLocalChain({ chainId: 11155111 })
 * try { console.log(chain.rpcUrl, chain.token) } finally { await chain.close() }
 * ```
 */
export async function startLocalChain(opts: LocalChainOptions = {}): Promise<LocalChain> {
  const chainId = opts.chainId ?? 84532
  const host = opts.host ?? '127.0.0.1'
  const tokenInfo = {
    name: opts.token?.name ?? 'USDC',
    version: opts.token?.version ?? '2',
    symbol: opts.token?.symbol ?? 'USDC',
    decimals: opts.token?.decimals ?? 6,
  }
  const payerTokens = opts.payerTokens ?? 1_000_000n * 10n ** BigInt(tokenInfo.decimals)
  const { provider, server, port } = await startHardhat(chainId, host, opts.port ?? 0)
  const rpcUrl = `http://${host}:${port}`
  try {
    const viemChain = defineChain({
      id: chainId, name: `local-${chainId}`,
      nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
      rpcUrls: { default: { http: [rpcUrl] } },
    })
    const publicClient = createPublicClient({ chain: viemChain, transport: http(rpcUrl, { retryCount: 0 }) })
    const accounts = {
      deployer: account(devKeys.deployer),
      facilitator: account(devKeys.facilitator),
      payer: account(devKeys.payer),
      payee: account(devKeys.payee),
      poor: account(devKeys.poor),
      walletOwner: account(devKeys.walletOwner),
    }
    const { token, wallet1271 } = await deploy(publicClient, rpcUrl, viemChain, tokenInfo, payerTokens, accounts)
    return {
      rpcUrl, chainId, token, tokenInfo, wallet1271, accounts, payerTokens, viemChain, permit2: { ...permit2Addresses },
      request: (method, params = []) => provider.request({ method, params }),
      close: () => server.close(),
    }
  } catch (error) {
    await server.close()
    throw error
  }
}

function argValue(args: string[], name: string): string | undefined {
  const at = args.indexOf(name)
  return at >= 0 ? args[at + 1] : undefined
}

async function main(args: string[]): Promise<void> {
  const port = argValue(args, '--port')
  const chainId = argValue(args, '--chain-id')
  const chain = await startLocalChain({
    host: argValue(args, '--host'),
    port: port === undefined ? undefined : Number(port),
    chainId: chainId === undefined ? undefined : Number(chainId),
  })
  const withKeys = args.includes('--with-keys')
  const accounts = Object.fromEntries(Object.entries(chain.accounts).map(([role, a]) =>
    [role, withKeys ? a : { address: a.address }]))
  process.stdout.write(`${JSON.stringify({
    rpcUrl: chain.rpcUrl, chainId: chain.chainId, token: chain.token, tokenInfo: chain.tokenInfo,
    wallet1271: chain.wallet1271, permit2: chain.permit2, payerTokens: chain.payerTokens.toString(), accounts,
  }, null, 2)}\n`)
  const stop = () => { void chain.close().then(() => process.exit(0)) }
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv.slice(2)).catch((error) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`)
    process.exit(1)
  })
}
