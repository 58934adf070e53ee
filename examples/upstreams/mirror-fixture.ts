/**
 * A small, deterministic ledger for the stand-in mirror node: 60 accounts, 60 transactions,
 * 30 tokens, 5 topics with 40 messages each. Records use the field names and value formats of
 * the Hiero mirror node's REST API (OpenAPI `AccountInfo`, `Transaction`, `Token`, `TokenInfo`,
 * `Topic`, `TopicMessage`). Mainnet and testnet fixtures differ in timestamps, keys and memos,
 * so a test can tell which upstream answered.
 */
import { createHash } from 'node:crypto'
import { encodeBase32 } from '../../plugins/mirror-validate/entity-id.ts'
import { formatTransactionId } from '../../plugins/mirror-validate/transaction-id.ts'

export type MirrorNetwork = 'mainnet' | 'testnet'

type Json = Record<string, unknown>
export interface FixtureAccount { num: number; evmAddress: string; alias: Buffer | null; publicKey: string; balance: bigint; record: Json }
export interface FixtureTransfer { account: string; amount: number; is_approval: boolean }
export interface FixtureTransaction {
  consensusNs: bigint
  payerNum: number
  validStart: { seconds: string; nanos: number }
  hash: Buffer
  name: string
  result: string
  transfers: FixtureTransfer[]
  record: Json
}
export interface FixtureToken { num: number; type: string; name: string; adminKey: string; holders: Set<number>; listRecord: Json; info: Json }
export interface FixtureTopic { num: number; record: Json }
export interface FixtureMessage { topicNum: number; sequence: number; consensusNs: bigint; text: string; record: Json }

export interface MirrorLedger {
  network: MirrorNetwork
  accounts: FixtureAccount[]
  transactions: FixtureTransaction[]
  tokens: FixtureToken[]
  topics: FixtureTopic[]
  messages: FixtureMessage[]
}

const NANOS = 1_000_000_000n
const AUTO_RENEW_SECONDS = 7_776_000

function digest(algorithm: 'sha256' | 'sha384', ...parts: unknown[]): Buffer {
  return createHash(algorithm).update(parts.join('|')).digest()
}

/** `seconds.nanos` with nine nanosecond digits, the mirror's timestamp format. */
export function formatTimestamp(ns: bigint): string {
  return `${ns / NANOS}.${String(ns % NANOS).padStart(9, '0')}`
}

const id = (num: number) => `0.0.${num}`
const ed25519 = (network: string, ...seed: unknown[]) => ({ _type: 'ED25519', key: digest('sha256', network, ...seed).toString('hex') })

function buildAccounts(network: MirrorNetwork, base: bigint, tokenCount: number): FixtureAccount[] {
  return Array.from({ length: 60 }, (_, i) => {
    const num = 1001 + i
    // Every tenth account was created from an EVM-address alias, like auto-created accounts upstream.
    const alias = i % 10 === 9 ? digest('sha256', network, 'alias', num).subarray(0, 20) : null
    const evmAddress = alias ? alias.toString('hex') : num.toString(16).padStart(40, '0')
    const key = ed25519(network, 'account', num)
    const balance = BigInt(100_000_000 * (i + 1) + (network === 'mainnet' ? 7 : 3))
    const created = base + BigInt(i) * NANOS
    const tokens = Array.from({ length: tokenCount }, (_, j) => j)
      .filter((j) => (i + j) % 10 === 0)
      .map((j) => ({ token_id: id(2001 + j), balance: j % 3 === 2 ? 1 : 1000 * (j + 1) }))
    const record: Json = {
      account: id(num),
      alias: alias ? encodeBase32(alias) : null,
      auto_renew_period: AUTO_RENEW_SECONDS,
      balance: { balance: Number(balance), timestamp: formatTimestamp(base + 900_000n * NANOS), tokens },
      created_timestamp: formatTimestamp(created),
      decline_reward: false,
      deleted: false,
      ethereum_nonce: 0,
      evm_address: `0x${evmAddress}`,
      expiry_timestamp: formatTimestamp(created + BigInt(AUTO_RENEW_SECONDS) * NANOS),
      key,
      max_automatic_token_associations: 0,
      memo: `${network} account ${num}`,
      pending_reward: 0,
      receiver_sig_required: false,
      staked_account_id: null,
      staked_node_id: null,
      stake_period_start: null,
    }
    return { num, evmAddress, alias, publicKey: key.key, balance, record }
  })
}

const TRANSACTION_TYPES = ['CRYPTOTRANSFER', 'CRYPTOTRANSFER', 'CONSENSUSSUBMITMESSAGE', 'TOKENASSOCIATE', 'CRYPTOTRANSFER', 'TOKENMINT']

function buildTransactions(network: MirrorNetwork, base: bigint): FixtureTransaction[] {
  return Array.from({ length: 60 }, (_, k) => {
    const payerNum = 1001 + k
    const receiverNum = 1001 + ((k * 7 + 3) % 60)
    const consensusNs = base + (100_000n + BigInt(k) * 7n) * NANOS + BigInt(k + 1)
    const validStartNs = consensusNs - NANOS - BigInt(k + 1)
    const validStart = { seconds: String(validStartNs / NANOS), nanos: Number(validStartNs % NANOS) }
    const name = TRANSACTION_TYPES[k % TRANSACTION_TYPES.length]
    const result = k % 9 === 8 ? 'INSUFFICIENT_PAYER_BALANCE' : 'SUCCESS'
    const fee = 100_000 + k
    const amount = result === 'SUCCESS' && name === 'CRYPTOTRANSFER' ? 1_000 * (k + 1) : 0
    const transfers = [
      { account: id(3), amount: 5_000, is_approval: false },
      { account: id(98), amount: fee - 5_000, is_approval: false },
      { account: id(payerNum), amount: -fee - amount, is_approval: false },
      ...(amount > 0 ? [{ account: id(receiverNum), amount, is_approval: false }] : []),
    ].sort((a, b) => Number(a.account.split('.')[2]) - Number(b.account.split('.')[2]))
    const hash = digest('sha384', network, 'transaction', k)
    const entity = name === 'CONSENSUSSUBMITMESSAGE' ? id(3001 + (k % 5)) : name.startsWith('TOKEN') ? id(2001 + (k % 30)) : null
    const record: Json = {
      batch_key: null,
      bytes: null,
      charged_tx_fee: fee,
      consensus_timestamp: formatTimestamp(consensusNs),
      entity_id: entity,
      max_custom_fees: [],
      max_fee: '200000000',
      memo_base64: Buffer.from(`${network} transfer ${k}`).toString('base64'),
      name,
      nft_transfers: [],
      node: id(3),
      nonce: 0,
      parent_consensus_timestamp: null,
      result,
      scheduled: false,
      staking_reward_transfers: [],
      token_transfers: [],
      transaction_hash: hash.toString('base64'),
      transaction_id: formatTransactionId(id(payerNum), validStart.seconds, validStart.nanos),
      transfers,
      valid_duration_seconds: '120',
      valid_start_timestamp: formatTimestamp(validStartNs),
    }
    return { consensusNs, payerNum, validStart, hash, name, result, transfers, record }
  })
}

function buildTokens(network: MirrorNetwork, base: bigint, accountCount: number): FixtureToken[] {
  return Array.from({ length: 30 }, (_, j) => {
    const num = 2001 + j
    const type = j % 3 === 2 ? 'NON_FUNGIBLE_UNIQUE' : 'FUNGIBLE_COMMON'
    const name = `Tollgate ${network} token ${j + 1}`
    const symbol = `TG${j + 1}`
    const decimals = type === 'FUNGIBLE_COMMON' ? 2 : 0
    const adminKey = ed25519(network, 'token', num)
    const created = base + (50_000n + BigInt(j)) * NANOS
    const holders = new Set(Array.from({ length: accountCount }, (_, i) => i).filter((i) => (i + j) % 10 === 0).map((i) => 1001 + i))
    const listRecord: Json = { admin_key: adminKey, decimals, metadata: '', name, symbol, token_id: id(num), type }
    const supply = type === 'FUNGIBLE_COMMON' ? String(1_000_000 * (j + 1)) : String(holders.size)
    const info: Json = {
      admin_key: adminKey,
      auto_renew_account: id(1001 + (j % accountCount)),
      auto_renew_period: AUTO_RENEW_SECONDS,
      created_timestamp: formatTimestamp(created),
      custom_fees: {
        created_timestamp: formatTimestamp(created),
        fixed_fees: [],
        ...(type === 'FUNGIBLE_COMMON' ? { fractional_fees: [] } : { royalty_fees: [] }),
      },
      decimals: String(decimals),
      deleted: false,
      // Integer nanoseconds here, unlike accounts; whole seconds, so exact as a JSON number.
      expiry_timestamp: Number(created + BigInt(AUTO_RENEW_SECONDS) * NANOS),
      fee_schedule_key: null,
      freeze_default: false,
      freeze_key: null,
      initial_supply: supply,
      kyc_key: null,
      max_supply: type === 'FUNGIBLE_COMMON' ? '0' : '1000',
      memo: `${network} token memo ${j + 1}`,
      metadata: '',
      metadata_key: null,
      modified_timestamp: formatTimestamp(created),
      name,
      pause_key: null,
      pause_status: 'NOT_APPLICABLE',
      supply_key: adminKey,
      supply_type: type === 'FUNGIBLE_COMMON' ? 'INFINITE' : 'FINITE',
      symbol,
      token_id: id(num),
      total_supply: supply,
      treasury_account_id: id(1001 + (j % accountCount)),
      type,
      wipe_key: null,
    }
    return { num, type, name, adminKey: adminKey.key, holders, listRecord, info }
  })
}

function buildTopics(network: MirrorNetwork, base: bigint): { topics: FixtureTopic[]; messages: FixtureMessage[] } {
  const topics: FixtureTopic[] = []
  const messages: FixtureMessage[] = []
  for (let t = 0; t < 5; t++) {
    const num = 3001 + t
    const created = base + (60_000n + BigInt(t)) * NANOS
    topics.push({
      num,
      record: {
        admin_key: ed25519(network, 'topic', num),
        auto_renew_account: id(1001 + t),
        auto_renew_period: AUTO_RENEW_SECONDS,
        created_timestamp: formatTimestamp(created),
        custom_fees: { created_timestamp: formatTimestamp(created), fixed_fees: [] },
        deleted: false,
        fee_exempt_key_list: [],
        fee_schedule_key: null,
        memo: `${network} topic ${t + 1}`,
        submit_key: null,
        timestamp: { from: formatTimestamp(created), to: null },
        topic_id: id(num),
      },
    })
    for (let sequence = 1; sequence <= 40; sequence++) {
      const consensusNs = base + (200_000n + BigInt(t * 1000 + sequence * 3)) * NANOS + BigInt(sequence)
      const text = `${network} topic ${num} message ${sequence}`
      messages.push({
        topicNum: num,
        sequence,
        consensusNs,
        text,
        record: {
          chunk_info: null,
          consensus_timestamp: formatTimestamp(consensusNs),
          message: Buffer.from(text).toString('base64'),
          payer_account_id: id(1001 + (sequence % 60)),
          running_hash: digest('sha384', network, num, sequence).toString('base64'),
          running_hash_version: 3,
          sequence_number: sequence,
          topic_id: id(num),
        },
      })
    }
  }
  return { topics, messages }
}

/** Builds the fixture ledger of one network; the same network always yields the same data. */
export function buildLedger(network: MirrorNetwork): MirrorLedger {
  const base = BigInt(network === 'mainnet' ? 1_700_000_000 : 1_710_000_000) * NANOS
  const accounts = buildAccounts(network, base, 30)
  const { topics, messages } = buildTopics(network, base)
  return { network, accounts, transactions: buildTransactions(network, base), tokens: buildTokens(network, base, accounts.length), topics, messages }
}
