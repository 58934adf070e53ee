/**
 * A small Solana JSON-RPC front over an in-process LiteSVM, on loopback: the methods the
 * `@x402/svm` client, its facilitator and ours call, with the real wire shapes
 * (`{context: {slot}, value}` envelopes, base64 account data, base58 signatures, errors as
 * Solana's JSON `TransactionError`).
 *
 * LiteSVM executes a transaction when it is sent, so every landed transaction is "finalized" at
 * once. `hold()` models a slow cluster: sends are accepted (signature returned) but queued, and
 * their status stays unknown until `release()`.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import {
  address as toAddress, getBase58Decoder, getBase64Encoder, getTransactionDecoder, type Address,
} from '@solana/kit'
import type { LiteSVM } from 'litesvm'
import { transactionErrorJson } from './errors.ts'
import { LOOKUP_TABLE_PROGRAM, tokenAmountOf, TOKEN_2022_PROGRAM, TOKEN_PROGRAM } from './accounts.ts'

interface Status {
  slot: number
  err: unknown
}

export interface SvmRpcFront {
  url: string
  /** Queue sends instead of executing them (a cluster that does not confirm). */
  hold(): void
  /** Execute the queued sends, in order, and resume normal operation. */
  release(): void
  /** Signatures sent and executed so far, in order (landed or failed on chain). */
  readonly executed: string[]
  close(): Promise<void>
}

class RpcError extends Error {
  constructor(readonly code: number, message: string, readonly data?: unknown) {
    super(message)
  }
}

const base58 = getBase58Decoder()
const base64 = getBase64Encoder()
const txDecoder = getTransactionDecoder()

/** Errors that keep a transaction from landing at all (no fee charged, no status recorded). */
const notLanded = new Set([
  'BlockhashNotFound', 'AlreadyProcessed', 'SignatureFailure', 'InsufficientFundsForFee', 'AccountNotFound',
  'SanitizeFailure', 'MissingSignatureForFee', 'InvalidAccountForFee', 'AddressLookupTableNotFound',
  'InvalidAddressLookupTableIndex', 'InvalidAddressLookupTableData', 'InvalidAddressLookupTableOwner',
])

function encodedAccount(svm: LiteSVM, addr: string, encoding: string | undefined) {
  const account = svm.getAccount(toAddress(addr))
  if (!account.exists) return null
  const data = Buffer.from(account.data)
  const base = {
    executable: account.executable, lamports: Number(account.lamports), owner: account.programAddress,
    rentEpoch: 18446744073709551615n, space: data.length,
  }
  if (encoding === 'jsonParsed' && data.length === 165 && (account.programAddress === TOKEN_PROGRAM || account.programAddress === TOKEN_2022_PROGRAM)) {
    const amount = tokenAmountOf(data).toString()
    return {
      ...base,
      data: {
        program: account.programAddress === TOKEN_PROGRAM ? 'spl-token' : 'spl-token-2022', space: 165,
        parsed: { type: 'account', info: { mint: base58.decode(data.subarray(0, 32)), owner: base58.decode(data.subarray(32, 64)), tokenAmount: { amount } } },
      },
    }
  }
  if (encoding === 'jsonParsed' && account.programAddress === LOOKUP_TABLE_PROGRAM && data.length >= 56) {
    const addresses: string[] = []
    for (let at = 56; at + 32 <= data.length; at += 32) addresses.push(base58.decode(data.subarray(at, at + 32)))
    const view = new DataView(data.buffer, data.byteOffset, data.byteLength)
    return {
      ...base,
      data: {
        program: 'address-lookup-table', space: data.length,
        parsed: {
          type: 'lookupTable',
          info: {
            addresses, authority: data[21] === 1 ? base58.decode(data.subarray(22, 54)) : undefined,
            deactivationSlot: view.getBigUint64(4, true).toString(), lastExtendedSlot: view.getBigUint64(12, true).toString(),
            lastExtendedSlotStartIndex: data[20],
          },
        },
      },
    }
  }
  return { ...base, data: [data.toString('base64'), 'base64'] }
}

function stringify(value: unknown): string {
  // u64 fields (rentEpoch) exceed 2^53: written as bare digits, as a Solana node does.
  return JSON.stringify(value, (_, v) => (typeof v === 'bigint' ? `__big${v}__` : v)).replace(/"__big(\d+)__"/g, '$1')
}

/**
 * Serves `svm` on `http://host:port/`.
 *
 * @example
 * ```ts
 * const front = await startSvmRpc(svm, { port: 0 })
 * const rpc = createSolanaRpc(front.url)
 * ```
 */
export async function startSvmRpc(svm: LiteSVM, opts: { host?: string; port?: number } = {}): Promise<SvmRpcFront> {
  const statuses = new Map<string, Status>()
  const executed: string[] = []
  const queue: Uint8Array[] = []
  let holding = false

  const slot = () => Number(svm.getClock().slot)
  const context = () => ({ slot: slot(), apiVersion: '2.2.0' })
  const envelope = (value: unknown) => ({ context: context(), value })

  const execute = (bytes: Uint8Array, signature: string) => {
    const result = svm.sendTransaction(txDecoder.decode(bytes))
    const err = 'err' in result && typeof (result as any).err === 'function' ? transactionErrorJson((result as any).err()) : null
    if (err !== null && typeof err === 'string' && notLanded.has(err)) return err
    if (!statuses.has(signature)) {
      statuses.set(signature, { slot: slot(), err })
      executed.push(signature)
    }
    return err
  }

  const decodeWire = (encoded: unknown, encoding: unknown): { bytes: Uint8Array; signature: string } => {
    if (typeof encoded !== 'string') throw new RpcError(-32602, 'invalid transaction: expected a string')
    if (encoding !== undefined && encoding !== 'base64') throw new RpcError(-32602, 'only base64 encoding is served')
    let bytes: Uint8Array
    try {
      bytes = new Uint8Array(base64.encode(encoded))
      const tx = txDecoder.decode(bytes)
      const first = Object.values(tx.signatures)[0]
      return { bytes, signature: first ? base58.decode(first) : base58.decode(new Uint8Array(64)) }
    } catch (error) {
      throw new RpcError(-32602, `failed to deserialize VersionedTransaction: ${(error as Error).message}`)
    }
  }

  const simulate = (bytes: Uint8Array, sigVerify: boolean) => {
    const tx = txDecoder.decode(bytes)
    svm.withSigverify(sigVerify)
    try {
      const result = svm.simulateTransaction(tx)
      const failed = typeof (result as any).err === 'function'
      const meta = result.meta()
      return {
        err: failed ? transactionErrorJson((result as any).err()) : null,
        logs: meta.logs(), accounts: null, unitsConsumed: Number(meta.computeUnitsConsumed()), returnData: null, innerInstructions: null,
      }
    } finally {
      svm.withSigverify(true)
    }
  }

  const methods: Record<string, (params: any[]) => unknown> = {
    getHealth: () => 'ok',
    getVersion: () => ({ 'solana-core': '2.2.0', 'feature-set': 0 }),
    // It stands in for Solana testnet, whose genesis hash this is.
    getGenesisHash: () => '4uhcVJyU9pJkvQyS88uRDiswHXSCkY3zQawwpjk2NsNY',
    getSlot: () => slot(),
    getBlockHeight: () => slot(),
    getLatestBlockhash: () => envelope({ blockhash: svm.latestBlockhash(), lastValidBlockHeight: slot() + 150 }),
    isBlockhashValid: ([hash]) => envelope(hash === svm.latestBlockhash()),
    getBalance: ([addr]) => envelope(Number(svm.getBalance(toAddress(String(addr))) ?? 0n)),
    getMinimumBalanceForRentExemption: ([size]) => Number(svm.minimumBalanceForRentExemption(BigInt(size ?? 0))),
    getAccountInfo: ([addr, config]) => envelope(encodedAccount(svm, String(addr), config?.encoding)),
    getMultipleAccounts: ([addrs, config]) => envelope((addrs as string[]).map((a) => encodedAccount(svm, String(a), config?.encoding))),
    getTokenAccountBalance: ([addr]) => {
      const account = svm.getAccount(toAddress(String(addr)))
      if (!account.exists || account.data.length < 165) throw new RpcError(-32602, 'Invalid param: not a Token account')
      const amount = tokenAmountOf(account.data).toString()
      return envelope({ amount, decimals: 6, uiAmount: null, uiAmountString: amount })
    },
    simulateTransaction: ([encoded, config]) => {
      const { bytes } = decodeWire(encoded, config?.encoding)
      return envelope(simulate(bytes, config?.sigVerify === true))
    },
    sendTransaction: ([encoded, config]) => {
      const { bytes, signature } = decodeWire(encoded, config?.encoding)
      if (config?.skipPreflight !== true) {
        const preflight = simulate(bytes, true)
        if (preflight.err !== null) {
          throw new RpcError(-32002, `Transaction simulation failed: ${stringify(preflight.err)}`, { ...preflight, err: preflight.err })
        }
      }
      if (holding) {
        queue.push(bytes)
        return signature
      }
      execute(bytes, signature)
      return signature
    },
    getSignatureStatuses: ([signatures]) => envelope((signatures as string[]).map((s) => {
      const status = statuses.get(String(s))
      if (!status) return null
      return {
        slot: status.slot, confirmations: null, err: status.err, confirmationStatus: 'finalized',
        status: status.err === null ? { Ok: null } : { Err: status.err },
      }
    })),
  }

  const handle = (call: any) => {
    const id = call?.id ?? null
    try {
      if (call?.jsonrpc !== '2.0' || typeof call.method !== 'string') throw new RpcError(-32600, 'Invalid request')
      const method = methods[call.method]
      if (!method) throw new RpcError(-32601, 'Method not found')
      return { jsonrpc: '2.0', id, result: method(Array.isArray(call.params) ? call.params : []) }
    } catch (error) {
      const e = error instanceof RpcError ? error : new RpcError(-32603, `Internal error: ${(error as Error).message}`)
      return { jsonrpc: '2.0', id, error: { code: e.code, message: e.message, ...(e.data === undefined ? {} : { data: e.data }) } }
    }
  }

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      let body: unknown
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
      } catch {
        body = undefined
      }
      const answer = body === undefined
        ? { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } }
        : Array.isArray(body) ? body.map(handle) : handle(body)
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(stringify(answer))
    })
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => resolve())
  })
  const { address, port } = server.address() as AddressInfo
  return {
    url: `http://${address}:${port}`,
    executed,
    hold() {
      holding = true
    },
    release() {
      holding = false
      for (const bytes of queue.splice(0)) {
        const tx = txDecoder.decode(bytes)
        execute(bytes, base58.decode(Object.values(tx.signatures)[0]!))
      }
    },
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    }),
  }
}

export type { Address }
