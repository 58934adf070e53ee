/**
 * The LISTEN side of the shared engine's settings (postgres.ts): a dedicated connection that
 * LISTENs on the settings channel and hands every announced change to the subscribers.
 *
 * The connection opens on the first subscribe (or `listening()`), and is reopened after a failure
 * every {@link RELISTEN_MS}; once it is up again subscribers get a `resync`, since changes made
 * while nothing listened were not announced. A payload that does not parse is a `resync` too.
 */
import type pg from 'pg'
import type { SettingsChange, SettingsListener } from './types.ts'

const RELISTEN_MS = 1000

/** The subscribers of one settings store and the connection that feeds them. */
export class SettingsNotifications {
  readonly #openListener: () => Promise<pg.Client>
  readonly #channel: string
  readonly #onListenerError: (error: unknown) => void
  readonly #listeners = new Set<SettingsListener>()
  #listener: pg.Client | undefined
  #connecting: Promise<void> | undefined
  #retry: NodeJS.Timeout | undefined
  #closed = false
  #everListened = false

  /**
   * @param openListener opens a dedicated, connected client (see `PostgresSettingsOptions`)
   * @param channel the NOTIFY channel, already checked to be an SQL identifier
   * @param onListenerError told of each failure of the connection before it is reopened
   */
  constructor(openListener: () => Promise<pg.Client>, channel: string, onListenerError: (error: unknown) => void) {
    this.#openListener = openListener
    this.#channel = channel
    this.#onListenerError = onListenerError
  }

  /** Resolves once the LISTEN connection is up (subscribe starts it; this lets a caller wait for it). */
  async listening(): Promise<void> {
    if (this.#listener) return
    await this.#listen()
  }

  /** Calls `listener` with every change announced on the channel; returns the unsubscribe. */
  subscribe(listener: SettingsListener): () => void {
    this.#listeners.add(listener)
    if (!this.#listener && !this.#connecting) void this.#listen().catch(() => {})
    return () => this.#listeners.delete(listener)
  }

  /** Ends the LISTEN connection and stops reopening it. */
  async close(): Promise<void> {
    this.#closed = true
    clearTimeout(this.#retry)
    const client = this.#listener
    this.#listener = undefined
    await this.#connecting?.catch(() => {})
    await (client ?? this.#listener)?.end().catch(() => {})
  }

  #listen(): Promise<void> {
    if (this.#connecting) return this.#connecting
    const connect = async () => {
      let client: pg.Client | undefined
      try {
        client = await this.#openListener()
        if (this.#closed) {
          await client.end().catch(() => {})
          return
        }
        const opened = client
        opened.on('notification', (message) => {
          if (message.channel !== this.#channel) return
          let parsed: SettingsChange | undefined
          try {
            parsed = JSON.parse(message.payload ?? '')
          } catch {
            parsed = undefined
          }
          this.#emit(parsed ?? { seq: 0, action: 'resync' })
        })
        opened.on('error', (error) => this.#lost(opened, error))
        opened.on('end', () => this.#lost(opened, new Error('settings LISTEN connection ended')))
        await opened.query(`LISTEN ${this.#channel}`)
        const reconnected = this.#everListened
        this.#listener = opened
        this.#everListened = true
        // Changes made while no connection listened were not announced: have subscribers re-read.
        if (reconnected) this.#emit({ seq: 0, action: 'resync' })
      } catch (error) {
        await client?.end().catch(() => {})
        this.#onListenerError(error)
        this.#scheduleRelisten()
        throw error
      } finally {
        this.#connecting = undefined
      }
    }
    this.#connecting = connect()
    return this.#connecting
  }

  #lost(client: pg.Client, error: unknown): void {
    if (this.#listener !== client) return
    this.#listener = undefined
    client.removeAllListeners('end')
    void client.end().catch(() => {})
    if (this.#closed) return
    this.#onListenerError(error)
    this.#scheduleRelisten()
  }

  #scheduleRelisten(): void {
    if (this.#closed || this.#retry) return
    this.#retry = setTimeout(() => {
      this.#retry = undefined
      if (!this.#closed && !this.#listener) void this.#listen().catch(() => {})
    }, RELISTEN_MS)
    this.#retry.unref()
  }

  #emit(message: Parameters<SettingsListener>[0]): void {
    for (const listener of this.#listeners) {
      try {
        listener(message)
      } catch (error) {
        process.emitWarning(error as Error, 'TollgateSettingsWarning')
      }
    }
  }
}
