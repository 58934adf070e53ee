/**
 * Event settings items (gateway spec "Event settings item"): their kinds, how a new one is built,
 * and the storage key that makes a duplicate create land on the existing item.
 */
import { randomUUID } from 'node:crypto'

export const ITEM_KINDS = ['contract', 'ethtopic', 'account'] as const
export type ItemKind = (typeof ITEM_KINDS)[number]

/**
 * type_id per kind. The spec shows 1 for an account and 2 and 5 in lists, without the mapping.
 * account = 1 and contract = 2 follow the mirror node's entity-type numbers (ACCOUNT 1, CONTRACT 2);
 * ethtopic takes the other observed value, 5. Operators can override it in the plugin config.
 */
export const DEFAULT_TYPE_IDS: Readonly<Record<ItemKind, number>> = { account: 1, contract: 2, ethtopic: 5 }

/** Network ids the service accepts: 295 = mainnet, 296 = testnet. */
export type NetworkId = 295 | 296

/** Rules of one facet of an account (metadata, balance, expiration); none on a new item. */
export interface AccountFacetSettings {
  eventRules: unknown[]
}

export type JsonSettings =
  | { metadata: AccountFacetSettings; balance: AccountFacetSettings; expiration: AccountFacetSettings }
  | { events: unknown[] }

/** The item exactly as the API returns it. */
export interface EventItem {
  id: string
  item_id: string
  user_id: string
  network_id: NetworkId
  type_id: number
  enabled: boolean
  json_settings: JsonSettings
  status: string
  created_at: string
  updated_at: string
  job_health_timestamp: string
  request_fetch_limit: number
}

/** Health timestamp of an item no job has looked at yet. */
export const NEVER_CHECKED = new Date(0).toISOString()

export function isItemKind(value: string): value is ItemKind {
  return (ITEM_KINDS as readonly string[]).includes(value)
}

/** One canonical spelling per item, so `0xAB…` and `0xab…` are the same topic. */
export function canonicalItemId(kind: ItemKind, itemId: string): string {
  return kind === 'ethtopic' ? itemId.toLowerCase() : itemId
}

/**
 * Storage key of an item: one per (project, kind, network, item). Project ids cannot hold `/`,
 * so the key is unambiguous.
 * @example itemKey('demo', 'account', 296, '0.0.5802863') // 'demo/account/296/0.0.5802863'
 */
export function itemKey(projectId: string, kind: ItemKind, networkId: NetworkId, itemId: string): string {
  return `${projectId}/${kind}/${networkId}/${canonicalItemId(kind, itemId)}`
}

/** Settings of a new item: accounts get their three facets, contracts and topics an event list. */
export function initialJsonSettings(kind: ItemKind): JsonSettings {
  if (kind === 'account') return { metadata: { eventRules: [] }, balance: { eventRules: [] }, expiration: { eventRules: [] } }
  return { events: [] }
}

export interface NewItemInput {
  kind: ItemKind
  projectId: string
  itemId: string
  networkId: NetworkId
  typeIds: Readonly<Record<ItemKind, number>>
  requestFetchLimit: number
  now?: Date
}

/**
 * A freshly created item: QUEUED, disabled, never checked.
 * @example
 * ```ts
 * const item = newEventItem({ kind: 'account', projectId: 'demo', itemId: '0.0.5802863', networkId: 296,
 *   typeIds: DEFAULT_TYPE_IDS, requestFetchLimit: 100 })
 * item.status // 'QUEUED'
 * ```
 */
export function newEventItem(input: NewItemInput): EventItem {
  const at = (input.now ?? new Date()).toISOString()
  return {
    id: randomUUID(),
    item_id: canonicalItemId(input.kind, input.itemId),
    user_id: input.projectId,
    network_id: input.networkId,
    type_id: input.typeIds[input.kind],
    enabled: false,
    json_settings: initialJsonSettings(input.kind),
    status: 'QUEUED',
    created_at: at,
    updated_at: at,
    job_health_timestamp: NEVER_CHECKED,
    request_fetch_limit: input.requestFetchLimit,
  }
}
