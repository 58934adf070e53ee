/**
 * Settings of the embedded engine: three tables in the store's SQLite database. The embedded
 * engine is one process, so change notifications are in-process calls made after each COMMIT.
 *
 * Writes run as their own small transactions, synchronously, outside the group commit: they are
 * rare, and the group commit only opens its transaction inside a setImmediate callback, so no
 * batch is open when a settings write runs.
 */
import type Database from 'better-sqlite3'
import { actorName, actorParts, change, storedActor, fieldsDetail, mergeFields, nextState, previousState, rotationDetail, toOverrides, type KeyState, type StoredKeyRow, type StoredProjectRow } from './fields.ts'
import {
  SettingsConflict,
  type ChangeActor,
  type ProjectFields,
  type RecordedAction,
  type SettingsAction,
  type SettingsChange,
  type SettingsListener,
  type SettingsSnapshot,
  type SettingsStore,
} from './types.ts'

export const SQLITE_SETTINGS_SCHEMA = `
CREATE TABLE IF NOT EXISTS settings_projects (
  id TEXT PRIMARY KEY,
  created INTEGER NOT NULL,
  fields TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  updated_by TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS settings_keys (
  project_id TEXT NOT NULL,
  label TEXT NOT NULL,
  hash TEXT UNIQUE,
  state TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  updated_by TEXT NOT NULL,
  PRIMARY KEY (project_id, label)
);
CREATE TABLE IF NOT EXISTS settings_audit (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  at INTEGER NOT NULL,
  actor TEXT NOT NULL,
  actor_note TEXT,
  action TEXT NOT NULL,
  project_id TEXT NOT NULL,
  detail TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS settings_audit_by_project ON settings_audit (project_id, seq);
`

interface ProjectRow {
  id: string
  created: number
  fields: string
  updated_at: number
  updated_by: string
}

interface KeyRow {
  project_id: string
  label: string
  state: string
  updated_at: number
  updated_by: string
}

interface AuditRow {
  seq: number
  at: number
  actor: string
  actor_note: string | null
  action: SettingsAction
  project_id: string
  detail: string
}

export class SqliteSettings implements SettingsStore {
  readonly #db: Database.Database
  readonly #clock: () => number
  readonly #listeners = new Set<SettingsListener>()
  readonly #stmt: Record<
    'project' | 'projects' | 'keys' | 'key' | 'keyByHash' | 'upsertProject' | 'insertKey' | 'upsertKey' | 'deleteProject' | 'deleteKeys' | 'deleteKey' | 'audit' | 'version' | 'auditAll' | 'auditOf',
    Database.Statement
  >

  constructor(db: Database.Database, clock: () => number = Date.now) {
    this.#db = db
    this.#clock = clock
    db.exec(SQLITE_SETTINGS_SCHEMA)
    // Databases made before the actor note: the column is added once (the principal stays in `actor`).
    const columns = db.prepare('PRAGMA table_info(settings_audit)').all() as { name: string }[]
    if (!columns.some((column) => column.name === 'actor_note')) db.exec('ALTER TABLE settings_audit ADD COLUMN actor_note TEXT')
    this.#stmt = {
      project: db.prepare('SELECT id, created, fields, updated_at, updated_by FROM settings_projects WHERE id = ?'),
      projects: db.prepare('SELECT id, created, fields, updated_at, updated_by FROM settings_projects'),
      keys: db.prepare('SELECT project_id, label, state, updated_at, updated_by FROM settings_keys ORDER BY project_id, updated_at, label'),
      key: db.prepare('SELECT project_id, label, state, updated_at, updated_by FROM settings_keys WHERE project_id = ? AND label = ?'),
      keyByHash: db.prepare('SELECT project_id, label FROM settings_keys WHERE hash = ?'),
      upsertProject: db.prepare(`
        INSERT INTO settings_projects (id, created, fields, updated_at, updated_by) VALUES (?, ?, ?, ?, ?)
        ON CONFLICT (id) DO UPDATE SET fields = excluded.fields, updated_at = excluded.updated_at, updated_by = excluded.updated_by`),
      insertKey: db.prepare('INSERT INTO settings_keys (project_id, label, hash, state, updated_at, updated_by) VALUES (?, ?, ?, ?, ?, ?)'),
      upsertKey: db.prepare(`
        INSERT INTO settings_keys (project_id, label, hash, state, updated_at, updated_by) VALUES (?, ?, NULL, ?, ?, ?)
        ON CONFLICT (project_id, label) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at, updated_by = excluded.updated_by`),
      deleteProject: db.prepare('DELETE FROM settings_projects WHERE id = ?'),
      deleteKeys: db.prepare('DELETE FROM settings_keys WHERE project_id = ?'),
      deleteKey: db.prepare('DELETE FROM settings_keys WHERE project_id = ? AND label = ?'),
      audit: db.prepare('INSERT INTO settings_audit (at, actor, actor_note, action, project_id, detail) VALUES (?, ?, ?, ?, ?, ?)'),
      version: db.prepare("SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'settings_audit'), 0) AS v"),
      auditAll: db.prepare('SELECT seq, at, actor, actor_note, action, project_id, detail FROM settings_audit ORDER BY seq DESC LIMIT ?'),
      auditOf: db.prepare('SELECT seq, at, actor, actor_note, action, project_id, detail FROM settings_audit WHERE project_id = ? ORDER BY seq DESC LIMIT ?'),
    }
  }

  async read(): Promise<SettingsSnapshot> {
    return this.#db.transaction(() => ({
      version: this.#version(),
      projects: toOverrides(
        (this.#stmt.projects.all() as ProjectRow[]).map(projectRow),
        (this.#stmt.keys.all() as KeyRow[]).map(keyRow),
      ),
    }))()
  }

  async version(): Promise<number> {
    return this.#version()
  }

  async createProject(id: string, fields: ProjectFields, actor: ChangeActor): Promise<SettingsChange> {
    return this.#change(actor, 'project.create', id, fieldsDetail(fields), (now) => {
      if (this.#stmt.project.get(id)) throw new SettingsConflict('project_exists', `project ${id} already exists`)
      this.#stmt.upsertProject.run(id, 1, JSON.stringify(mergeFields({}, fields)), now, actorName(actor))
    })
  }

  async updateProject(id: string, fields: ProjectFields, actor: ChangeActor): Promise<SettingsChange> {
    return this.#change(actor, 'project.update', id, fieldsDetail(fields), (now) => {
      const row = this.#stmt.project.get(id) as ProjectRow | undefined
      const stored = row ? (JSON.parse(row.fields) as ProjectFields) : {}
      this.#stmt.upsertProject.run(id, row?.created ?? 0, JSON.stringify(mergeFields(stored, fields)), now, actorName(actor))
    })
  }

  async addKey(projectId: string, key: { label: string; hash: string; expiresAt?: number; prefix?: string }, actor: ChangeActor): Promise<SettingsChange> {
    const detail = { label: key.label, ...(key.expiresAt !== undefined ? { expiresAt: key.expiresAt } : {}) }
    return this.#change(actor, 'key.add', projectId, detail, (now) => {
      if (this.#stmt.key.get(projectId, key.label)) throw new SettingsConflict('key_exists', `project ${projectId} already has a key labelled ${key.label}`)
      if (this.#stmt.keyByHash.get(key.hash)) throw new SettingsConflict('key_exists', 'this key is already registered')
      const state: KeyState = { hash: key.hash, disabled: false, ...(key.expiresAt !== undefined ? { expiresAt: key.expiresAt } : {}), ...(key.prefix ? { prefix: key.prefix } : {}) }
      this.#stmt.insertKey.run(projectId, key.label, key.hash, JSON.stringify(state), now, actorName(actor))
    })
  }

  async rotateKey(
    projectId: string,
    label: string,
    next: { hash: string; prefix?: string },
    previous: { label: string; hash: string; expiresAt: number; prefix?: string },
    actor: ChangeActor,
  ): Promise<SettingsChange> {
    const detail = rotationDetail(label, previous)
    return this.#change(actor, 'key.rotate', projectId, detail, (now) => {
      if (this.#stmt.key.get(projectId, previous.label)) throw new SettingsConflict('key_exists', `project ${projectId} already has a key labelled ${previous.label}`)
      if (this.#stmt.keyByHash.get(next.hash)) throw new SettingsConflict('key_exists', 'this key is already registered')
      // The rotated row first (its old hash leaves the UNIQUE column), then the previous key takes that hash.
      this.#stmt.deleteKey.run(projectId, label)
      this.#stmt.insertKey.run(projectId, label, next.hash, JSON.stringify(nextState(next)), now, actorName(actor))
      this.#stmt.insertKey.run(projectId, previous.label, previous.hash, JSON.stringify(previousState(previous)), now, actorName(actor))
    })
  }

  async updateKey(projectId: string, label: string, state: { disabled?: boolean; expiresAt?: number | null }, actor: ChangeActor): Promise<SettingsChange> {
    return this.#change(actor, 'key.update', projectId, { label, ...state }, (now) => {
      const row = this.#stmt.key.get(projectId, label) as KeyRow | undefined
      const merged: KeyState = { ...(row ? (JSON.parse(row.state) as KeyState) : {}) }
      if (state.disabled !== undefined) merged.disabled = state.disabled
      if (state.expiresAt !== undefined) merged.expiresAt = state.expiresAt
      this.#stmt.upsertKey.run(projectId, label, JSON.stringify(merged), now, actorName(actor))
    })
  }

  async resetProject(id: string, actor: ChangeActor): Promise<SettingsChange> {
    return this.#change(actor, 'project.reset', id, {}, () => {
      this.#stmt.deleteKeys.run(id)
      this.#stmt.deleteProject.run(id)
    })
  }

  async recordAction(projectId: string, action: RecordedAction, detail: Record<string, unknown>, actor: ChangeActor): Promise<SettingsChange> {
    return this.#change(actor, action, projectId, detail, () => {})
  }

  async audit(options: { projectId?: string; limit?: number } = {}): Promise<SettingsChange[]> {
    const limit = Math.max(1, Math.min(options.limit ?? 100, 10_000))
    const rows = (options.projectId === undefined ? this.#stmt.auditAll.all(limit) : this.#stmt.auditOf.all(options.projectId, limit)) as AuditRow[]
    return rows.map((row) => change(row.seq, row.at, storedActor(row.actor, row.actor_note), row.action, row.project_id, JSON.parse(row.detail)))
  }

  subscribe(listener: SettingsListener): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  #version(): number {
    return (this.#stmt.version.get() as { v: number }).v
  }

  /** Runs `apply` and the audit insert in one IMMEDIATE transaction, then tells the listeners. */
  #change(actor: ChangeActor, action: SettingsAction, projectId: string, detail: Record<string, unknown>, apply: (now: number) => void): SettingsChange {
    const at = this.#clock()
    const seq = this.#db
      .transaction(() => {
        apply(at)
        const by = actorParts(actor)
        return Number(this.#stmt.audit.run(at, by.actor, by.note ?? null, action, projectId, JSON.stringify(detail)).lastInsertRowid)
      })
      .immediate()
    const made = change(seq, at, actor, action, projectId, detail)
    for (const listener of this.#listeners) {
      try {
        listener(made)
      } catch (error) {
        process.emitWarning(error as Error, 'TollgateSettingsWarning')
      }
    }
    return made
  }
}

function projectRow(row: ProjectRow): StoredProjectRow {
  return { id: row.id, created: row.created === 1, fields: JSON.parse(row.fields), updatedAt: row.updated_at, updatedBy: row.updated_by }
}

function keyRow(row: KeyRow): StoredKeyRow {
  return { projectId: row.project_id, label: row.label, state: JSON.parse(row.state), updatedAt: row.updated_at, updatedBy: row.updated_by }
}
