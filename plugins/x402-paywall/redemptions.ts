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
 * - `claim:<authorization>`: the principal (project id, or null on a route without auth) of the
 *   first request that presented this payment with a valid signature. Written once
 *   (`insertIfAbsent`, atomic on every engine and across instances), before anything is settled.
 *   Only requests of that principal may settle, retry or redeem the payment: once broadcast, an
 *   authorization is public (it is in the transaction), so a copy sent on another project's key
 *   must not buy that project the credits or the content.
 */
import type { DocumentCollection } from '../../core/store/types.ts'

const OWNER = 'x402-paywall'

export interface Redemptions {
  /** True for exactly one caller per payment. */
  claimDelivery(key: string, transaction: string): Promise<boolean>
  markPending(key: string, transaction: string): Promise<void>
  isPending(key: string): Promise<boolean>
  /**
   * Binds the payment to `principal` unless it is bound already; true when it is (now) bound to
   * `principal`, false when another principal presented it first. Call only for a payment whose
   * signature verified, so nobody can bind someone else's authorization in advance.
   */
  bind(key: string, principal: string | null): Promise<boolean>
  /** True when the payment is bound to a principal other than `principal` (a read; binds nothing). */
  boundElsewhere(key: string, principal: string | null): Promise<boolean>
}

interface Claim {
  principal: string | null
  at: number
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
    async bind(key, principal) {
      const { stored } = await collection.insertIfAbsent<Claim>(`claim:${key}`, OWNER, { principal, at: Date.now() })
      return stored.doc.principal === principal
    },
    async boundElsewhere(key, principal) {
      const stored = await collection.get<Claim>(`claim:${key}`)
      return stored !== undefined && stored.doc.principal !== principal
    },
  }
}
