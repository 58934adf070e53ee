/**
 * Durable settlement records: the idempotency guard of settle. One record per authorization, keyed
 * by (chainId, asset, from, nonce) — the same identity the token uses to refuse a second transfer.
 */
import { createHash } from 'node:crypto'
import type { DocumentCollection } from '../../../core/store/types.ts'
import type { SettleResponse } from './types.ts'

export interface SettlementRecord {
  /**
   * `claimed`: a settle owns it and has not broadcast yet; `pending`: broadcast, receipt not seen;
   * `settled`: final answer known. Failures before or at broadcast delete the record, so a retry
   * (after a top-up, say) can settle the same authorization.
   */
  state: 'claimed' | 'pending' | 'settled'
  /**
   * Hash of the signed message, its signature and the requirements it paid: a stored answer is given
   * only to a settle with the same fingerprint (the same signed payload); any other is verified in full.
   */
  fingerprint: string
  /** Epoch ms when the current owner claimed it. */
  claimedAt: number
  /** Broadcast transaction hash (pending, settled). */
  transaction?: string
  /** The answer given (settled). */
  response?: SettleResponse
}

/** What settle needs from the store; `DocumentCollection` provides it through {@link settlementRecordsFrom}. */
export interface SettlementRecords {
  /** Atomically creates the record unless one exists; returns the stored one either way. */
  claim(key: string, record: SettlementRecord): Promise<{ created: boolean; stored: SettlementRecord }>
  update(key: string, record: SettlementRecord): Promise<void>
  /** Deletes the record so the authorization can be settled again. */
  release(key: string): Promise<void>
}

/**
 * The idempotency key: chain id, asset, payer and nonce, lower-cased.
 *
 * @example
 * ```ts
 * settlementKey(84532, '0xAsset…', '0xPayer…', '0xnonce…') // '84532:0xasset…:0xpayer…:0xnonce…'
 * ```
 */
export function settlementKey(chainId: number, asset: string, from: string, nonce: string): string {
  return `${chainId}:${asset.toLowerCase()}:${from.toLowerCase()}:${nonce.toLowerCase()}`
}

/** sha256 over the canonical terms of one payment. */
export function settlementFingerprint(terms: Record<string, string | number>): string {
  const canonical = Object.keys(terms).sort().map((k) => `${k}=${String(terms[k]).toLowerCase()}`).join('\n')
  return createHash('sha256').update(canonical).digest('hex')
}

/**
 * Adapts a store collection (SQLite or Redis engine) to {@link SettlementRecords}.
 *
 * @example
 * ```ts
 * const records = settlementRecordsFrom(init.store.documents('x402-settlements'), 'x402')
 * await settleExact(ctx, body, { receiptTimeoutMs: 20_000, records, log })
 * ```
 */
export function settlementRecordsFrom(collection: DocumentCollection, owner: string): SettlementRecords {
  return {
    async claim(key, record) {
      const { created, stored } = await collection.insertIfAbsent<SettlementRecord>(key, owner, record)
      return { created, stored: stored.doc }
    },
    async update(key, record) {
      if (!(await collection.update<SettlementRecord>(key, record))) {
        // Released meanwhile (a stale-claim takeover): write it back so the outcome is kept.
        await collection.insertIfAbsent<SettlementRecord>(key, owner, record)
      }
    },
    async release(key) {
      await collection.delete(key)
    },
  }
}
