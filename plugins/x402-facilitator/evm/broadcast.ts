/**
 * Sends the facilitator's transferWithAuthorization transaction.
 *
 * - Transactions of one signer on one chain go out one at a time (a per-signer promise queue), each
 *   with the node's pending nonce read inside the queue, so concurrent settlements never collide on
 *   a nonce ("nonce too low", "replacement transaction underpriced"). Receipts are awaited outside.
 * - The transaction is signed locally first, so its hash is known before it is sent: when the send
 *   fails ambiguously (timeout, connection reset) the caller still has the hash and answers
 *   `settlement_pending` instead of a failure that would make the client pay twice.
 */
import { BaseError, encodeFunctionData, keccak256, RpcRequestError, type Address, type Hex } from 'viem'
import { eip3009Abi } from './abi.ts'
import type { EvmChainContext } from './context.ts'
import { transferArgs, type PreparedTransfer } from './verify.ts'

const queues = new Map<string, Promise<void>>()

/**
 * Runs `task` after every earlier task of the same key has finished (whatever their outcome).
 *
 * @example
 * ```ts
 * const hash = await runSerialised(`84532:${signer}`, () => wallet.sendTransaction(tx))
 * ```
 */
export function runSerialised<T>(key: string, task: () => Promise<T>): Promise<T> {
  const previous = queues.get(key) ?? Promise.resolve()
  const run = previous.then(task)
  const tail = run.then(() => undefined, () => undefined)
  queues.set(key, tail)
  void tail.then(() => {
    if (queues.get(key) === tail) queues.delete(key)
  })
  return run
}

/** A send that failed. `maybeSent`: the node may have received it (no definite JSON-RPC rejection). */
export class BroadcastError extends Error {
  readonly hash: Hex
  readonly maybeSent: boolean
  constructor(hash: Hex, maybeSent: boolean, cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause), { cause })
    this.name = 'BroadcastError'
    this.hash = hash
    this.maybeSent = maybeSent
  }
}

const nonceConflict = /nonce too low|nonce has already been used|replacement transaction underpriced/i

/** Gas headroom over the estimate, in percent: ERC-1271 wallets may vary their verification cost. */
const gasHeadroomPercent = 25n

function isDefiniteRejection(error: unknown): boolean {
  return error instanceof BaseError && error.walk((e) => e instanceof RpcRequestError) instanceof RpcRequestError
}

/**
 * Estimates gas (which simulates the transfer once more), then prepares, signs and sends the
 * transaction in the signer's queue. `onSigned(hash)` runs before each send so the hash can be made
 * durable first. Estimation reverts and preparation errors are thrown unchanged (nothing was sent);
 * send errors are thrown as {@link BroadcastError}.
 */
export async function broadcastTransfer(
  ctx: EvmChainContext, transfer: PreparedTransfer, onSigned: (hash: Hex) => Promise<void>,
): Promise<Hex> {
  return broadcastCall(ctx, transferCall(transfer), onSigned)
}

/** A contract call the facilitator sends: target and calldata. */
export interface SettlementCall {
  to: Address
  data: Hex
}

/** The token's transferWithAuthorization call for a verified EIP-3009 transfer. */
export function transferCall(transfer: PreparedTransfer): SettlementCall {
  return {
    to: transfer.bound.asset.address,
    data: encodeFunctionData({ abi: eip3009Abi, functionName: 'transferWithAuthorization', args: transferArgs(transfer) as any }),
  }
}

/** {@link broadcastTransfer} for any settlement call (the EIP-3009 token, a Permit2 proxy). */
export async function broadcastCall(
  ctx: EvmChainContext, call: SettlementCall, onSigned: (hash: Hex) => Promise<void>,
): Promise<Hex> {
  const { to, data } = call
  const account = ctx.walletClient.account
  const estimate = await ctx.publicClient.estimateGas({ account, to, data })
  const gas = estimate + (estimate * gasHeadroomPercent) / 100n
  return runSerialised(`${ctx.chainId}:${ctx.signerAddress.toLowerCase()}`, async () => {
    for (let attempt = 0; ; attempt++) {
      const nonce = await ctx.publicClient.getTransactionCount({ address: ctx.signerAddress, blockTag: 'pending' })
      const request = await ctx.walletClient.prepareTransactionRequest({ account, to, data, gas, nonce, chain: ctx.walletClient.chain })
      const serializedTransaction = await ctx.walletClient.signTransaction(request as any)
      const hash = keccak256(serializedTransaction)
      await onSigned(hash)
      try {
        await ctx.publicClient.sendRawTransaction({ serializedTransaction })
        return hash
      } catch (error) {
        const definite = isDefiniteRejection(error)
        // The node already holds this very transaction (a retried send): it is sent.
        if (definite && /already known/i.test((error as Error).message)) return hash
        // Another process using the same key, or a lagging RPC replica: read the nonce again.
        if (definite && attempt < 2 && nonceConflict.test((error as Error).message)) continue
        throw new BroadcastError(hash, !definite, error)
      }
    }
  })
}
