/**
 * Durable documents of the SQLite engine: one table for every collection, documents stored as JSON.
 *
 * `insertIfAbsent` is INSERT ... ON CONFLICT DO NOTHING followed by a read of the winner, so two
 * concurrent inserts of one key (a settlement retried by two requests) leave exactly one record.
 *
 * Writes join the store's group commit ({@link WriteBatcher}): they settle once their batch has
 * committed. Reads drain the queue first, so they see every write issued before them.
 */
import type Database from 'better-sqlite3'
import type { WriteBatcher } from './sqlite-batch.ts'
import type { DocumentCollection, StoredDocument } from './types.ts'

export const DOCUMENTS_SCHEMA = `
CREATE TABLE IF NOT EXISTS documents (
  collection TEXT NOT NULL,
  key TEXT NOT NULL,
  owner TEXT NOT NULL,
  doc TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  revision INTEGER NOT NULL DEFAULT 1,
  PRIMARY KEY (collection, key)
);
CREATE INDEX IF NOT EXISTS documents_by_owner ON documents (collection, owner, created_at);
`

interface DocumentRow {
  key: string
  owner: string
  doc: string
  created_at: number
  updated_at: number
}

interface DocumentStatements {
  insert: Database.Statement
  get: Database.Statement
  update: Database.Statement
  listByOwner: Database.Statement
  delete: Database.Statement
  getWithRevision: Database.Statement
  compareAndSet: Database.Statement
}

/** Prepares the statements once; collections share them and bind their own name. */
export function prepareDocumentStatements(db: Database.Database): DocumentStatements {
  db.exec(DOCUMENTS_SCHEMA)
  // Data directories made before revisions existed: every document starts at revision 1.
  const columns = db.prepare('PRAGMA table_info(documents)').all() as { name: string }[]
  if (!columns.some((column) => column.name === 'revision')) db.exec('ALTER TABLE documents ADD COLUMN revision INTEGER NOT NULL DEFAULT 1')
  return {
    insert: db.prepare(`
      INSERT INTO documents (collection, key, owner, doc, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)
      ON CONFLICT (collection, key) DO NOTHING`),
    get: db.prepare('SELECT key, owner, doc, created_at, updated_at FROM documents WHERE collection = ? AND key = ?'),
    update: db.prepare('UPDATE documents SET doc = ?, updated_at = ?, revision = revision + 1 WHERE collection = ? AND key = ?'),
    // rowid breaks ties between documents created in the same millisecond: insertion order.
    listByOwner: db.prepare(`
      SELECT key, owner, doc, created_at, updated_at FROM documents
      WHERE collection = ? AND owner = ? ORDER BY created_at, rowid LIMIT ?`),
    delete: db.prepare('DELETE FROM documents WHERE collection = ? AND key = ?'),
    getWithRevision: db.prepare('SELECT key, owner, doc, created_at, updated_at, revision FROM documents WHERE collection = ? AND key = ?'),
    compareAndSet: db.prepare('UPDATE documents SET doc = ?, updated_at = ?, revision = revision + 1 WHERE collection = ? AND key = ? AND revision = ?'),
  }
}

/**
 * One named collection over the shared table.
 *
 * @example
 * ```ts
 * const settlements = store.documents('x402-settlements')
 * const { created } = await settlements.insertIfAbsent(txHash, payer, { amount: '1000' })
 * if (!created) throw duplicateSettlement()
 * ```
 */
export class SqliteDocumentCollection implements DocumentCollection {
  constructor(
    private readonly name: string,
    private readonly stmts: DocumentStatements,
    private readonly clock: () => number,
    private readonly writes: WriteBatcher,
  ) {}

  async insertIfAbsent<T>(key: string, owner: string, doc: T): Promise<{ created: boolean; stored: StoredDocument<T> }> {
    const json = toJson(doc)
    const now = this.clock()
    return this.writes.enqueue(() => {
      const { changes } = this.stmts.insert.run(this.name, key, owner, json, now, now)
      if (changes === 1) return { created: true, stored: { key, owner, doc: JSON.parse(json) as T, createdAt: now, updatedAt: now } }
      return { created: false, stored: this.read<T>(key)! }
    })
  }

  async get<T>(key: string): Promise<StoredDocument<T> | undefined> {
    this.writes.drain()
    return this.read<T>(key)
  }

  async update<T>(key: string, doc: T): Promise<boolean> {
    const json = toJson(doc)
    const now = this.clock()
    return this.writes.enqueue(() => this.stmts.update.run(json, now, this.name, key).changes === 1, true)
  }

  async listByOwner<T>(owner: string, limit?: number): Promise<StoredDocument<T>[]> {
    if (limit !== undefined && !(Number.isInteger(limit) && limit >= 0)) {
      throw new RangeError(`limit must be a non-negative integer, got ${limit}`)
    }
    this.writes.drain()
    // LIMIT -1 is SQLite for "no limit".
    const rows = this.stmts.listByOwner.all(this.name, owner, limit ?? -1) as DocumentRow[]
    return rows.map((row) => toStored<T>(row))
  }

  async delete(key: string): Promise<boolean> {
    return this.writes.enqueue(() => this.stmts.delete.run(this.name, key).changes === 1, true)
  }

  async getWithRevision<T>(key: string): Promise<{ stored: StoredDocument<T>; revision: number } | undefined> {
    this.writes.drain()
    const row = this.stmts.getWithRevision.get(this.name, key) as (DocumentRow & { revision: number }) | undefined
    return row === undefined ? undefined : { stored: toStored<T>(row), revision: row.revision }
  }

  async compareAndSet<T>(key: string, revision: number, doc: T): Promise<number | undefined> {
    if (!Number.isInteger(revision) || revision < 1) throw new RangeError(`revision must be a positive integer, got ${revision}`)
    const json = toJson(doc)
    const now = this.clock()
    // Checked and written inside the batch's transaction: no other write can slip between.
    return this.writes.enqueue(() => (this.stmts.compareAndSet.run(json, now, this.name, key, revision).changes === 1 ? revision + 1 : undefined), true)
  }

  private read<T>(key: string): StoredDocument<T> | undefined {
    const row = this.stmts.get.get(this.name, key) as DocumentRow | undefined
    return row === undefined ? undefined : toStored<T>(row)
  }
}

function toStored<T>(row: DocumentRow): StoredDocument<T> {
  return { key: row.key, owner: row.owner, doc: JSON.parse(row.doc) as T, createdAt: row.created_at, updatedAt: row.updated_at }
}

function toJson(doc: unknown): string {
  const json = JSON.stringify(doc)
  if (json === undefined) throw new TypeError('document must be JSON-serialisable (got undefined or a function)')
  return json
}
