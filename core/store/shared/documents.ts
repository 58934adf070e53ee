/**
 * Durable documents of the shared engine, in PostgreSQL: the same contract as the embedded engine
 * (sqlite-documents.ts). Writes join the group commit (pg.ts); `insertIfAbsent` is an INSERT ... ON
 * CONFLICT DO NOTHING followed, in the same transaction, by a read of the winner, so two instances
 * inserting one key leave exactly one document. Reads wait for the writes queued before them.
 * Revisions (`compareAndSet`) come from the `document-revisions` migration set below: a column and a
 * trigger that bumps it on every UPDATE that does not set it, so the batched `doc-update` of
 * `tollgate_apply` (schema.ts, unchanged) counts as a new revision too.
 */
import type pg from 'pg'
import type { DocumentCollection, StoredDocument } from '../types.ts'
import type { MigrationSet } from './migrations.ts'
import { pgFailure, type PgBatcher } from './pg.ts'

/** Revisions of documents, for compare-and-set (module `document-revisions`, applied after `core`). */
export const documentRevisionMigrations: MigrationSet = {
  module: 'document-revisions',
  migrations: [
    {
      version: 1,
      name: 'documents.revision and its trigger',
      sql: `
ALTER TABLE documents ADD COLUMN revision bigint NOT NULL DEFAULT 1;
CREATE FUNCTION tollgate_document_revision() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF NEW.revision = OLD.revision THEN NEW.revision := OLD.revision + 1; END IF;
  RETURN NEW;
END
$fn$;
CREATE TRIGGER documents_revision BEFORE UPDATE ON documents FOR EACH ROW EXECUTE FUNCTION tollgate_document_revision();
`,
    },
  ],
}

interface DocumentRow {
  key: string
  owner: string
  doc: string
  created_at: number
  updated_at: number
}

export class SharedDocumentCollection implements DocumentCollection {
  constructor(
    private readonly name: string,
    private readonly pool: pg.Pool,
    private readonly batch: PgBatcher,
    private readonly clock: () => number,
  ) {}

  async insertIfAbsent<T>(key: string, owner: string, doc: T): Promise<{ created: boolean; stored: StoredDocument<T> }> {
    const json = toJson(doc)
    const now = this.clock()
    const result = await this.batch.enqueue<[true] | [false, string, string, number, number]>({ o: 'doc-insert', c: this.name, k: key, w: owner, d: json, t: now })
    if (result[0]) return { created: true, stored: { key, owner, doc: JSON.parse(json) as T, createdAt: now, updatedAt: now } }
    const [, storedOwner, storedDoc, createdAt, updatedAt] = result
    return { created: false, stored: { key, owner: storedOwner, doc: JSON.parse(storedDoc) as T, createdAt: Number(createdAt), updatedAt: Number(updatedAt) } }
  }

  async get<T>(key: string): Promise<StoredDocument<T> | undefined> {
    const rows = await this.read('SELECT key, owner, doc, created_at, updated_at FROM documents WHERE collection = $1 AND key = $2', [this.name, key])
    return rows[0] === undefined ? undefined : toStored<T>(rows[0])
  }

  async update<T>(key: string, doc: T): Promise<boolean> {
    return this.batch.enqueue<boolean>({ o: 'doc-update', c: this.name, k: key, d: toJson(doc), t: this.clock() })
  }

  async listByOwner<T>(owner: string, limit?: number): Promise<StoredDocument<T>[]> {
    if (limit !== undefined && !(Number.isInteger(limit) && limit >= 0)) throw new RangeError(`limit must be a non-negative integer, got ${limit}`)
    const rows = await this.read(
      'SELECT key, owner, doc, created_at, updated_at FROM documents WHERE collection = $1 AND owner = $2 ORDER BY created_at, seq LIMIT $3',
      [this.name, owner, limit ?? null],
    )
    return rows.map((row) => toStored<T>(row))
  }

  async delete(key: string): Promise<boolean> {
    return this.batch.enqueue<boolean>({ o: 'doc-delete', c: this.name, k: key })
  }

  async getWithRevision<T>(key: string): Promise<{ stored: StoredDocument<T>; revision: number } | undefined> {
    const rows = await this.read('SELECT key, owner, doc, created_at, updated_at, revision FROM documents WHERE collection = $1 AND key = $2', [this.name, key])
    const row = rows[0] as (DocumentRow & { revision: string | number }) | undefined
    return row === undefined ? undefined : { stored: toStored<T>(row), revision: Number(row.revision) }
  }

  async compareAndSet<T>(key: string, revision: number, doc: T): Promise<number | undefined> {
    if (!Number.isInteger(revision) || revision < 1) throw new RangeError(`revision must be a positive integer, got ${revision}`)
    const json = toJson(doc)
    // One autocommit statement (synchronous_commit on: durable when answered); the row lock and the
    // revision test make it atomic against every instance. Batched writes queued before it go first.
    const rows = await this.read(
      'UPDATE documents SET doc = $1, updated_at = $2, revision = revision + 1 WHERE collection = $3 AND key = $4 AND revision = $5 RETURNING key, owner, doc, created_at, updated_at, revision',
      [json, this.clock(), this.name, key, revision],
    )
    const row = rows[0] as (DocumentRow & { revision: string | number }) | undefined
    return row === undefined ? undefined : Number(row.revision)
  }

  private async read(sql: string, params: unknown[]): Promise<DocumentRow[]> {
    await this.batch.idle()
    try {
      return (await this.pool.query<DocumentRow>(sql, params)).rows
    } catch (error) {
      throw pgFailure(error)
    }
  }
}

function toStored<T>(row: DocumentRow): StoredDocument<T> {
  return { key: row.key, owner: row.owner, doc: JSON.parse(row.doc) as T, createdAt: Number(row.created_at), updatedAt: Number(row.updated_at) }
}

function toJson(doc: unknown): string {
  const json = JSON.stringify(doc)
  if (json === undefined) throw new TypeError('document must be JSON-serialisable (got undefined or a function)')
  return json
}
