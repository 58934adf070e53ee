/**
 * The embedded engine across worker processes (`tollgate start --workers N`): the primary process
 * owns the SQLite store and is the only one that opens it; workers reach it through this proxy over
 * the cluster IPC channel. Every operation runs in the primary, one at a time on its event loop, so
 * credit reservations, rate-limit buckets and the ledger stay exact: there is one ledger, never one
 * per worker. A worker's promise settles when the primary's did (a commit is on disk by then).
 *
 * The price is an IPC round trip per store operation (a few per request), and the primary's one
 * core caps the store's throughput; the shared engine (PostgreSQL + Redis) has neither cost.
 *
 * Settings notifications: the primary subscribes to its store's settings and forwards each change
 * to every worker. When a worker dies, the primary closes the reservations it left open (a pending
 * one is released), as a crash of a single process would.
 */
import type { Worker } from 'node:cluster'
import type {
  CreditBalance,
  CreditCarried,
  CreditCarry,
  CreditGrant,
  CreditLedger,
  CreditReservation,
  DocumentCollection,
  Granularity,
  RateDecision,
  Store,
  StoreHealth,
  StoredDocument,
  UsageEvent,
  UsageDetailRow,
  UsageRow,
} from './types.ts'
import { AccountConflict, type AccountsStore } from './accounts/types.ts'
import { SettingsConflict, type SettingsListener, type SettingsStore } from './settings/types.ts'

interface CallMessage {
  tg: 'store.call'
  id: number
  /** `reserveCredits`, `documents.<collection>.get`, `settings.read`, ... */
  op: string
  args: unknown[]
}

interface ReplyMessage {
  tg: 'store.reply'
  id: number
  ok: boolean
  value?: unknown
  error?: { name: string; message: string; code?: string }
}

interface SettingsMessage {
  tg: 'store.settings'
  change: Parameters<SettingsListener>[0]
}

const STORE_OPS = new Set([
  'reserveCredits',
  'commitCredits',
  'releaseCredits',
  'refundPart',
  'closeCredits',
  'balance',
  'grantCredits',
  'carryCredits',
  'creditLedger',
  'recordUsage',
  'queryUsage',
  'queryUsageDetail',
  'takeToken',
  'health',
])
const DOCUMENT_OPS = new Set(['insertIfAbsent', 'get', 'update', 'listByOwner', 'delete', 'getWithRevision', 'compareAndSet'])
const SETTINGS_OPS = new Set(['read', 'version', 'createProject', 'updateProject', 'addKey', 'updateKey', 'rotateKey', 'resetProject', 'recordAction', 'audit'])
const ACCOUNTS_OPS = new Set<keyof AccountsStore>([
  'createUser',
  'userByEmail',
  'userById',
  'listUsers',
  'addProjects',
  'updateUser',
  'deleteUser',
  'createSession',
  'sessionByTokenHash',
  'touchSession',
  'deleteSession',
  'listSessions',
  'deleteExpiredSessions',
])

/**
 * Primary side: answers the store calls of every worker and forwards settings changes to them.
 * Returns a function that stops forwarding.
 */
export function serveStoreToWorkers(store: Store, workers: () => Iterable<Worker>): { attach(worker: Worker): void; stop(): void } {
  const unsubscribe = store.settings.subscribe((change) => {
    const message: SettingsMessage = { tg: 'store.settings', change }
    for (const worker of workers()) if (worker.isConnected()) worker.send(message)
  })
  const dispatch = (op: string, args: unknown[]): Promise<unknown> => {
    if (STORE_OPS.has(op)) return (store as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[op](...args)
    if (op === 'recoverPendingReservations') return Promise.resolve(0) // the primary recovered once at open
    const [scope, ...rest] = op.split('.')
    if (scope === 'settings' && SETTINGS_OPS.has(rest[0])) return (store.settings as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[rest[0]](...args)
    if (scope === 'accounts' && ACCOUNTS_OPS.has(rest[0] as keyof AccountsStore)) return (store.accounts as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[rest[0]](...args)
    if (scope === 'documents' && rest.length >= 2) {
      const method = rest[rest.length - 1]
      const collection = rest.slice(0, -1).join('.')
      if (DOCUMENT_OPS.has(method)) return (store.documents(collection) as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[method](...args)
    }
    return Promise.reject(new Error(`unknown store operation ${op}`))
  }
  return {
    attach(worker) {
      // Reservations this worker has open: closed (pending ones released) if it dies.
      const open = new Set<string>()
      worker.on('message', (message: CallMessage) => {
        if (message?.tg !== 'store.call') return
        if (message.op === 'reserveCredits') open.add((message.args[0] as CreditReservation).id)
        if (message.op === 'closeCredits') open.delete(message.args[0] as string)
        dispatch(message.op, message.args).then(
          (value) => reply(worker, { tg: 'store.reply', id: message.id, ok: true, value }),
          (error: Error & { code?: string }) =>
            reply(worker, { tg: 'store.reply', id: message.id, ok: false, error: { name: error.name, message: error.message, code: error.code } }),
        )
      })
      worker.on('exit', () => {
        for (const id of open) void store.closeCredits(id).catch(() => {})
        open.clear()
      })
    },
    stop: unsubscribe,
  }
}

function reply(worker: Worker, message: ReplyMessage): void {
  if (worker.isConnected()) worker.send(message)
}

/** Worker side: the {@link Store} interface, each call answered by the primary's store. */
export class PrimaryStore implements Store {
  readonly engine = 'sqlite'
  readonly settings: SettingsStore
  readonly accounts: AccountsStore
  readonly #pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>()
  readonly #collections = new Map<string, DocumentCollection>()
  readonly #listeners = new Set<SettingsListener>()
  readonly #onMessage: (message: ReplyMessage | SettingsMessage) => void
  #next = 0

  constructor() {
    if (!process.send) throw new Error('PrimaryStore runs only in a cluster worker')
    this.#onMessage = (message) => {
      if (message?.tg === 'store.reply') {
        const waiting = this.#pending.get(message.id)
        if (!waiting) return
        this.#pending.delete(message.id)
        if (message.ok) waiting.resolve(message.value)
        else waiting.reject(revive(message.error!))
      } else if (message?.tg === 'store.settings') {
        for (const listener of this.#listeners) listener(message.change)
      }
    }
    process.on('message', this.#onMessage)
    const call = this.#call.bind(this)
    const listeners = this.#listeners
    this.settings = {
      read: () => call('settings.read', []),
      version: () => call('settings.version', []),
      createProject: (...args) => call('settings.createProject', args),
      updateProject: (...args) => call('settings.updateProject', args),
      addKey: (...args) => call('settings.addKey', args),
      updateKey: (...args) => call('settings.updateKey', args),
      resetProject: (...args) => call('settings.resetProject', args),
      recordAction: (...args) => call('settings.recordAction', args),
      rotateKey: (...args) => call('settings.rotateKey', args),
      audit: (...args) => call('settings.audit', args),
      subscribe(listener) {
        listeners.add(listener)
        return () => listeners.delete(listener)
      },
    }
    // Every accounts method is a plain call answered by the primary's store.
    this.accounts = Object.fromEntries([...ACCOUNTS_OPS].map((op) => [op, (...args: unknown[]) => call(`accounts.${op}`, args)])) as unknown as AccountsStore
  }

  #call<T>(op: string, args: unknown[]): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const id = ++this.#next
      this.#pending.set(id, { resolve: resolve as (value: unknown) => void, reject })
      const message: CallMessage = { tg: 'store.call', id, op, args }
      process.send!(message, undefined, undefined, (error: Error | null) => {
        if (error && this.#pending.delete(id)) reject(new Error(`the primary process is gone: ${error.message}`))
      })
    })
  }

  reserveCredits(reservation: CreditReservation): Promise<{ ok: boolean; balance: CreditBalance }> {
    return this.#call('reserveCredits', [reservation])
  }
  commitCredits(reservationId: string): Promise<void> {
    return this.#call('commitCredits', [reservationId])
  }
  releaseCredits(reservationId: string): Promise<void> {
    return this.#call('releaseCredits', [reservationId])
  }
  refundPart(reservationId: string, amount: number): Promise<void> {
    return this.#call('refundPart', [reservationId, amount])
  }
  closeCredits(reservationId: string): Promise<void> {
    return this.#call('closeCredits', [reservationId])
  }
  balance(projectId: string, period: string, allocation: number): Promise<CreditBalance> {
    return this.#call('balance', [projectId, period, allocation])
  }
  grantCredits(grant: CreditGrant): Promise<{ created: boolean; balance: CreditBalance }> {
    return this.#call('grantCredits', [grant])
  }
  carryCredits(carry: CreditCarry): Promise<CreditCarried> {
    return this.#call('carryCredits', [carry])
  }
  creditLedger(projectId: string, period: string, allocation: number): Promise<CreditLedger> {
    return this.#call('creditLedger', [projectId, period, allocation])
  }
  recoverPendingReservations(): Promise<number> {
    return this.#call('recoverPendingReservations', [])
  }
  /** The primary's store health (the worker's /readyz follows the one store all workers share). */
  health(): Promise<StoreHealth> {
    return this.#call('health', [])
  }
  recordUsage(event: UsageEvent): Promise<void> {
    return this.#call('recordUsage', [event])
  }
  queryUsage(projectId: string, fromMs: number, toMs: number, granularity: Granularity): Promise<UsageRow[]> {
    return this.#call('queryUsage', [projectId, fromMs, toMs, granularity])
  }
  queryUsageDetail(projectId: string, fromMs: number, toMs: number, granularity: Granularity): Promise<UsageDetailRow[]> {
    return this.#call('queryUsageDetail', [projectId, fromMs, toMs, granularity])
  }
  takeToken(key: string, capacity: number, refillPerSecond: number, cost?: number): Promise<RateDecision> {
    return this.#call('takeToken', cost === undefined ? [key, capacity, refillPerSecond] : [key, capacity, refillPerSecond, cost])
  }

  documents(collection: string): DocumentCollection {
    let found = this.#collections.get(collection)
    if (!found) {
      const call = <T>(method: string, args: unknown[]) => this.#call<T>(`documents.${collection}.${method}`, args)
      found = {
        insertIfAbsent: <T>(key: string, owner: string, doc: T) => call<{ created: boolean; stored: StoredDocument<T> }>('insertIfAbsent', [key, owner, doc]),
        get: <T>(key: string) => call<StoredDocument<T> | undefined>('get', [key]).then((value) => value ?? undefined),
        update: <T>(key: string, doc: T) => call<boolean>('update', [key, doc]),
        listByOwner: <T>(owner: string, limit?: number) => call<StoredDocument<T>[]>('listByOwner', limit === undefined ? [owner] : [owner, limit]),
        delete: (key: string) => call<boolean>('delete', [key]),
        getWithRevision: <T>(key: string) => call<{ stored: StoredDocument<T>; revision: number } | undefined>('getWithRevision', [key]).then((value) => value ?? undefined),
        compareAndSet: <T>(key: string, revision: number, doc: T) => call<number | undefined>('compareAndSet', [key, revision, doc]).then((value) => value ?? undefined),
      }
      this.#collections.set(collection, found)
    }
    return found
  }

  /** Stops listening to the primary; the store itself is the primary's to close. */
  async close(): Promise<void> {
    process.off('message', this.#onMessage)
    for (const waiting of this.#pending.values()) waiting.reject(new Error('store closed'))
    this.#pending.clear()
  }
}

function revive(error: { name: string; message: string; code?: string }): Error {
  if (error.name === 'AccountConflict') return new AccountConflict(error.message)
  if (error.name === 'SettingsConflict') return new SettingsConflict(error.code as 'project_exists' | 'key_exists', error.message)
  const revived = new Error(error.message) as Error & { code?: string }
  revived.name = error.name
  if (error.code !== undefined) revived.code = error.code
  return revived
}
