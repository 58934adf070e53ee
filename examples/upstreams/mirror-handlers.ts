/**
 * Route handlers of the stand-in mirror node: they answer already-validated requests from the
 * fixture ledger with the real node's body shapes, filters, ordering and next links.
 */
import type { MirrorRouteName } from '../../plugins/mirror-validate/routes.ts'
import { isValidEntityId, parseAccountAlias, parseEntityId } from '../../plugins/mirror-validate/entity-id.ts'
import { decodeTransactionHash, isTransactionHash, parseTransactionId } from '../../plugins/mirror-validate/transaction-id.ts'
import { timestampToNanos } from '../../plugins/mirror-validate/query.ts'
import type { FixtureAccount, FixtureTransaction, MirrorLedger } from './mirror-fixture.ts'
import { allMatch, entityNum, nextLink, page, readListQuery, type ListQuery } from './mirror-pages.ts'

export interface HandlerAnswer {
  status: number
  body: unknown
}

export interface HandlerRequest {
  ledger: MirrorLedger
  /** Decoded path id, for single-item routes. */
  id: string
  query: URLSearchParams
  /** Full request path (`/api/v1/...`), echoed in next links. */
  path: string
}

const notFound = (message = 'Not found'): HandlerAnswer => ({ status: 404, body: { _status: { messages: [{ message }] } } })
const timestampOf = (value: string) => (/^\d{1,10}(\.\d{1,9})?$/.test(value) ? timestampToNanos(value) : null)
const lastRecord = <T>(rows: T[]) => rows.at(-1)
const tokenNum = (value: string) => {
  const num = parseEntityId(value, 'num-alias')?.num
  return num === undefined || num === null ? null : BigInt(num)
}

function accountsList({ ledger, query, path }: HandlerRequest): HandlerAnswer {
  const list = readListQuery(query, 'asc')
  const keys = list.filters.filter((f) => f.key === 'account.publickey').map((f) => f.value.replace(/^0x/, '').toLowerCase().slice(-64))
  const withBalance = list.filters.filter((f) => f.key === 'balance').at(-1)?.value.toLowerCase() !== 'false'
  const rows = ledger.accounts.filter((account) =>
    list.filters.filter((f) => f.key === 'account.id').every((f) => matchesAccount(account, f.op, f.value)) &&
    allMatch(list.filters, 'account.balance', account.balance, (v) => BigInt(v)) &&
    keys.every((key) => key === account.publicKey))
  const pageRows = page(rows, (a) => BigInt(a.num), list)
  const accounts = pageRows.map((a) => ({ ...a.record, balance: withBalance ? a.record.balance : null }))
  const last = pageRows.at(-1)?.record.account as string | undefined
  return { status: 200, body: { accounts, links: { next: nextLink(path, list, accounts.length, 'account.id', last) } } }
}

function matchesAccount(account: FixtureAccount, op: string, value: string): boolean {
  const num = entityNum(value)
  if (num !== null) return allMatch([{ key: 'k', op, value }], 'k', BigInt(account.num), () => num)
  return op === 'eq' && parseEntityId(value)?.evmAddress === account.evmAddress
}

function findAccount(ledger: MirrorLedger, id: string): FixtureAccount | undefined {
  if (isValidEntityId(id)) {
    const parts = parseEntityId(id)
    return ledger.accounts.find((a) => (parts?.num === null ? a.evmAddress === parts.evmAddress : a.num === parts?.num))
  }
  const alias = parseAccountAlias(id)
  return ledger.accounts.find((a) => alias !== null && a.alias?.equals(alias))
}

function involves(transaction: FixtureTransaction, accountNum: bigint): boolean {
  return transaction.transfers.some((t) => t.account === `0.0.${accountNum}`)
}

/** The transaction filters shared by /transactions and /accounts/{id}. */
function transactionPage(ledger: MirrorLedger, list: ListQuery, path: string, accountNums: bigint[] | 'any') {
  const types = list.filters.filter((f) => f.key === 'transactiontype').map((f) => f.value.toUpperCase())
  const result = list.filters.filter((f) => f.key === 'result').at(-1)?.value
  const direction = list.filters.filter((f) => f.key === 'type').at(-1)?.value.toLowerCase()
  const rows = ledger.transactions.filter((t) =>
    (accountNums === 'any' || accountNums.some((num) => involves(t, num))) &&
    allMatch(list.filters, 'timestamp', t.consensusNs, timestampOf) &&
    (types.length === 0 || types.includes(t.name)) &&
    (result === undefined || (result === 'success') === (t.result === 'SUCCESS')) &&
    (direction === undefined || t.transfers.some((x) =>
      (accountNums === 'any' || accountNums.some((n) => x.account === `0.0.${n}`)) && (direction === 'credit' ? x.amount > 0 : x.amount < 0))))
  const transactions = page(rows, (t) => t.consensusNs, list).map((t) => t.record)
  const last = lastRecord(transactions)?.consensus_timestamp as string | undefined
  return { transactions, links: { next: nextLink(path, list, transactions.length, 'timestamp', last) } }
}

function accountsGet({ ledger, id, query, path }: HandlerRequest): HandlerAnswer {
  const account = findAccount(ledger, id)
  if (!account) return notFound(isValidEntityId(id) ? 'Not found' : 'No account with a matching alias found')
  const list = readListQuery(query, 'desc')
  const wantsTransactions = list.filters.filter((f) => f.key === 'transactions').at(-1)?.value.toLowerCase() !== 'false'
  const transactions = wantsTransactions ? transactionPage(ledger, list, path, [BigInt(account.num)]) : { transactions: [], links: { next: null } }
  return { status: 200, body: { ...account.record, ...transactions } }
}

function transactionsList({ ledger, query, path }: HandlerRequest): HandlerAnswer {
  const list = readListQuery(query, 'desc')
  const accounts = list.filters.filter((f) => f.key === 'account.id' && f.op === 'eq').map((f) => entityNum(f.value) ?? -1n)
  const ranges = list.filters.filter((f) => f.key === 'account.id' && f.op !== 'eq')
  const candidates = ledger.accounts.map((a) => BigInt(a.num)).concat([3n, 98n])
    .filter((num) => (accounts.length === 0 || accounts.includes(num)) && allMatch(ranges, 'account.id', num, entityNum))
  const filtered = accounts.length === 0 && ranges.length === 0 ? 'any' : candidates
  return { status: 200, body: transactionPage(ledger, list, path, filtered) }
}

function transactionsGet({ ledger, id, query }: HandlerRequest): HandlerAnswer {
  const list = readListQuery(query, 'asc')
  let matches: FixtureTransaction[]
  if (isTransactionHash(id)) {
    const hash = decodeTransactionHash(id)
    matches = ledger.transactions.filter((t) => t.hash.equals(hash))
  } else {
    const parsed = parseTransactionId(id)
    matches = 'error' in parsed ? [] : ledger.transactions.filter((t) =>
      t.payerNum === parsed.payer.num && t.validStart.seconds === parsed.seconds && t.validStart.nanos === parsed.nanos)
  }
  const nonce = list.filters.filter((f) => f.key === 'nonce').at(-1)?.value
  const scheduled = list.filters.filter((f) => f.key === 'scheduled').at(-1)?.value.toLowerCase()
  matches = matches.filter(() => (nonce === undefined || Number(nonce) === 0) && scheduled !== 'true')
  if (matches.length === 0) return notFound()
  return { status: 200, body: { transactions: matches.map((t) => ({ ...t.record, assessed_custom_fees: [] })) } }
}

function tokensList({ ledger, query, path }: HandlerRequest): HandlerAnswer {
  const list = readListQuery(query, 'asc')
  const holder = list.filters.find((f) => f.key === 'account.id')
  const holderNum = holder ? entityNum(holder.value) : null
  const names = list.filters.filter((f) => f.key === 'name').map((f) => f.value.toLowerCase())
  const keys = list.filters.filter((f) => f.key === 'publickey').map((f) => f.value.replace(/^0x/, '').toLowerCase().slice(-64))
  const types = list.filters.filter((f) => f.key === 'type' && f.value.toUpperCase() !== 'ALL').map((f) => f.value.toUpperCase())
  const rows = ledger.tokens.filter((t) =>
    (!holder || (holderNum !== null && t.holders.has(Number(holderNum)))) &&
    names.every((name) => t.name.toLowerCase().includes(name)) &&
    keys.every((key) => key === t.adminKey) &&
    (types.length === 0 || types.includes(t.type)) &&
    allMatch(list.filters, 'token.id', BigInt(t.num), tokenNum))
  const tokens = page(rows, (t) => BigInt(t.num), list).map((t) => t.listRecord)
  // A name search is not paged upstream.
  const next = names.length > 0 ? null : nextLink(path, list, tokens.length, 'token.id', lastRecord(tokens)?.token_id as string)
  return { status: 200, body: { tokens, links: { next } } }
}

function tokensGet({ ledger, id, query }: HandlerRequest): HandlerAnswer {
  const num = parseEntityId(id, 'num-alias')?.num
  const token = ledger.tokens.find((t) => t.num === num)
  if (!token) return notFound()
  const list = readListQuery(query, 'asc')
  const created = timestampToNanos(String(token.info.created_timestamp))
  // A historical query from before the token existed finds nothing.
  if (!allMatch(list.filters.map((f) => ({ ...f, op: f.op === 'eq' ? 'lte' : f.op })), 'timestamp', created, timestampOf)) return notFound()
  return { status: 200, body: token.info }
}

function topicsGet({ ledger, id }: HandlerRequest): HandlerAnswer {
  const num = parseEntityId(id, 'none')?.num
  const topic = ledger.topics.find((t) => t.num === num)
  // rest-java's not-found shape: reason phrase in `message`, explanation in `detail`.
  if (!topic) return { status: 404, body: { _status: { messages: [{ message: 'Not Found', detail: 'Topic not found' }] } } }
  return { status: 200, body: topic.record }
}

function topicsMessages({ ledger, id, query, path }: HandlerRequest): HandlerAnswer {
  const num = parseEntityId(id, 'none')?.num
  const list = readListQuery(query, 'asc')
  const utf8 = /^utf-?8$/i.test(list.filters.filter((f) => f.key === 'encoding').at(-1)?.value ?? '')
  const rows = ledger.messages.filter((m) =>
    m.topicNum === num &&
    allMatch(list.filters, 'sequencenumber', BigInt(m.sequence), (v) => BigInt(v)) &&
    allMatch(list.filters, 'timestamp', m.consensusNs, timestampOf))
  const messages = page(rows, (m) => m.consensusNs, list).map((m) => (utf8 ? { ...m.record, message: m.text } : m.record))
  const last = lastRecord(messages)?.consensus_timestamp as string | undefined
  return { status: 200, body: { messages, links: { next: nextLink(path, list, messages.length, 'timestamp', last) } } }
}

export const MIRROR_HANDLERS: Record<MirrorRouteName, (request: HandlerRequest) => HandlerAnswer> = {
  'accounts.list': accountsList,
  'accounts.get': accountsGet,
  'transactions.list': transactionsList,
  'transactions.get': transactionsGet,
  'tokens.list': tokensList,
  'tokens.get': tokensGet,
  'topics.get': topicsGet,
  'topics.messages': topicsMessages,
}
