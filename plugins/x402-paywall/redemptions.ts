/**
 * The paywall's own memory of payments, in the store (so it holds across processes and restarts):
 *
 * - `delivered:<authorization>`: the content was released for this payment. Claimed atomically
 *   after a successful settlement, so one payment releases content once, even when the same
 *   payment header arrives twice at once (both settlements answer with the same transaction).
 * - `pending:<authorization>`: the settlement was broadcast but not mined within the bound, so the
 *   client got 402 `settlement_pending` with the transaction hash. A retry with the same header is
 *   then let through (verify would call the nonce used) and delivered once the settlement is known,
 *   instead of the client paying a second time.
 */
import type { DocumentCollection } from '../../core/store/types.ts'

const OWNER = 'x402-paywall'

export interface Redemptions {
  /** True for exactly one caller per payment. */
  claimDelivery(key: string, transaction: string): Promise<boolean>
  markPending(key: string, transaction: string): Promise<void>
  isPending(key: string): Promise<boolean>
}

/**
 * @example
 * ```ts
 * const redemptions = redemptionsFrom(init.store.documents('x402-paywall'))
 * if (await redemptions.claimDelivery(key, tx)) releaseContent()
 * ```
 */
export function redemptionsFrom(collection: DocumentCollection): Redemptions {
  return {
    async claimDelivery(key, transaction) {
      const { created } = await collection.insertIfAbsent(`delivered:${key}`, OWNER, { transaction, at: Date.now() })
      if (created) await collection.delete(`pending:${key}`)
      return created
    },
    async markPending(key, transaction) {
      await collection.insertIfAbsent(`pending:${key}`, OWNER, { transaction, at: Date.now() })
    },
    async isPending(key) {
      return (await collection.get(`pending:${key}`)) !== undefined
    },
  }
}
