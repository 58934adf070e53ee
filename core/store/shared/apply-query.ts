/**
 * One call of `tollgate_apply` as a `pg` submittable: what a write batch sends, with less client
 * work than pg's general `Query`.
 *
 * Why not `client.query({ name, text, values })`: on every batch, pg's `Query` normalises and copies
 * the config, sends a Describe of the portal and parses the RowDescription it answers, and builds a
 * `Result` with a row object per row. A batch's statement never changes and returns one row of one
 * jsonb column, so this query sends Parse once per connection (named statement), then only Bind,
 * Execute and Sync, and reads the single DataRow's first text column with `JSON.parse` (which is
 * what pg's jsonb parser does). Measured by bench/pg-apply-query.ts (bench/RESULTS.md).
 *
 * What it keeps of pg's behaviour, on purpose:
 * - The named statement is tracked in the connection's `parsedStatements` /
 *   `submittedNamedStatements`, exactly as pg's `Query` does (the client moves it on ParseComplete
 *   and forgets it on an ErrorResponse), so a new connection parses again and a failed Parse is
 *   retried on the next batch.
 * - PostgreSQL's errors reach the caller as pg's error objects, with their SQLSTATE in `code` (the
 *   batcher retries 40001/40P01 and maps connection errors to 503 `store_unavailable`).
 * - `client.query()` still arms the pool's `query_timeout` for it (one timer per batch), and after
 *   an error the client waits for ReadyForQuery before it sends the next query, so the connection
 *   stays usable.
 */
import type pg from 'pg'

/** The parts of pg's (untyped) Connection this query writes to. */
interface PgConnection {
  parsedStatements: Record<string, string>
  submittedNamedStatements: Record<string, string>
  stream: { cork?: () => void; uncork?: () => void }
  parse(query: { text: string; name: string; types: unknown[] }): void
  bind(config: { portal: string; statement: string; values: unknown[] }): void
  execute(config: { portal: string; rows: number }): void
  sync(): void
  sendCopyFail(message: string): void
}

type Callback = (error: Error | null, result?: unknown) => void

/** A named statement whose first column is one jsonb value. */
export interface ApplyStatement {
  readonly name: string
  readonly text: string
}

/**
 * `statement` executed once with `values` (already strings); `promise` resolves with the first
 * column of its single row, parsed as JSON, or rejects with PostgreSQL's error.
 */
export class ApplyQuery implements pg.Submittable {
  readonly name: string
  readonly text: string
  /** Set by the caller, then wrapped by `client.query()` to clear its read timeout. */
  callback: Callback | undefined
  private value: unknown = undefined
  private failure: Error | undefined = undefined
  readonly promise: Promise<unknown>

  constructor(statement: ApplyStatement, private readonly parameters: string[]) {
    this.name = statement.name
    this.text = statement.text
    this.promise = new Promise((resolve, reject) => {
      this.callback = (error, result) => (error ? reject(error) : resolve(result))
    })
  }

  submit(pgConnection: pg.Connection): void {
    const connection = pgConnection as unknown as PgConnection
    const cork = connection.stream.cork !== undefined
    if (cork) connection.stream.cork!()
    try {
      if (connection.parsedStatements[this.name] === undefined && connection.submittedNamedStatements[this.name] === undefined) {
        connection.parse({ text: this.text, name: this.name, types: [] })
        connection.submittedNamedStatements[this.name] = this.text
      }
      connection.bind({ portal: '', statement: this.name, values: this.parameters })
      connection.execute({ portal: '', rows: 0 })
      connection.sync()
    } finally {
      if (cork) connection.stream.uncork!()
    }
  }

  handleDataRow(message: { fields: (string | null)[] }): void {
    if (this.failure !== undefined) return
    const text = message.fields[0]
    try {
      this.value = text === null || text === undefined ? null : JSON.parse(text)
    } catch (error) {
      // Reported once the server is done with the statement (ReadyForQuery), as pg's Query does.
      this.failure = error as Error
    }
  }

  handleRowDescription(): void {}
  handleCommandComplete(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}

  handleCopyInResponse(connection: PgConnection): void {
    connection.sendCopyFail('No source stream defined')
  }

  handleCopyData(): void {}

  handleError(error: Error): void {
    this.callback?.(error)
  }

  handleReadyForQuery(): void {
    if (this.failure !== undefined) return this.handleError(this.failure)
    this.callback?.(null, this.value)
  }
}
