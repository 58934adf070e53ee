/**
 * Settings of the shared engine, in PostgreSQL: the same three tables as the embedded engine,
 * created by {@link SETTINGS_MIGRATIONS} (run by the shared engine's migration runner), in the
 * schema the pool's `search_path` names.
 *
 * Propagation. Each change runs in one transaction that also appends its audit row and calls
 * `pg_notify(channel, …)`; PostgreSQL delivers the notification at COMMIT to every session
 * LISTENing on the channel, i.e. to every gateway instance, which then re-reads the settings
 * (core/projects/project-settings.ts). The listening session is a dedicated connection (postgres-listen.ts),
 * reopened after a failure (listeners then get a `resync`); the sync's periodic version check is the
 * backstop for anything missed meanwhile.
 *
 * Changes are serialised with a transaction-level advisory lock: settings writes are rare, and
 * serialising them makes the audit sequence commit in order, so `max(seq)` is a version that
 * never skips a change that commits later with a smaller number.
 *
 * @example
 * ```ts
 * const pool = new pg.Pool({ connectionString, options: '-c search_path=tollgate' })
 * const settings = new PostgresSettings({
 *   pool,
 *   openListener: async () => {
 *     const client = new pg.Client({ connectionString })
 *     await client.connect()
 *     return client
 *   },
 *   channel: 'tollgate_settings',
 * })
 * // ... on shutdown, before pool.end():
 * await settings.close()
 * ```
 */
import type pg from 'pg'
import { SettingsNotifications } from './postgres-listen.ts'
import { actorName, actorParts, change, storedActor, fieldsDetail, mergeFields, nextState, previousState, rotationDetail, toOverrides, type KeyState } from './fields.ts'
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

/** A versioned migration: what the shared engine's runner applies once, in order of `version`. */
export interface Migration {
  /** Unique and increasing within its component. */
  version: number
  name: string
  sql: string
}

/** The settings tables. Unqualified names: they land in the schema of the pool's search_path. */
export const SETTINGS_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'settings: projects, keys, audit',
    sql: `
CREATE TABLE settings_projects (
  id TEXT PRIMARY KEY,
  created BOOLEAN NOT NULL,
  fields JSONB NOT NULL,
  updated_at BIGINT NOT NULL,
  updated_by TEXT NOT NULL
);
CREATE TABLE settings_keys (
  project_id TEXT NOT NULL,
  label TEXT NOT NULL,
  hash TEXT UNIQUE,
  state JSONB NOT NULL,
  updated_at BIGINT NOT NULL,
  updated_by TEXT NOT NULL,
  PRIMARY KEY (project_id, label)
);
CREATE TABLE settings_audit (
  seq BIGSERIAL PRIMARY KEY,
  at BIGINT NOT NULL,
  actor TEXT NOT NULL,
  action TEXT NOT NULL,
  project_id TEXT NOT NULL,
  detail JSONB NOT NULL
);
CREATE INDEX settings_audit_by_project ON settings_audit (project_id, seq);
`,
  },
  {
    version: 2,
    name: 'settings: audit actor note',
    // The actor column holds the authenticated principal only; what a caller says of itself
    // (x-admin-actor) is kept beside it, never in its place.
    sql: 'ALTER TABLE settings_audit ADD COLUMN actor_note TEXT',
  },
]

export const DEFAULT_SETTINGS_CHANNEL = 'tollgate_settings'
/** Advisory lock key serialising settings changes ("tollgate" + 1). */
const WRITE_LOCK = 0x746f6c6c
/** NOTIFY payloads must stay under 8000 bytes; a change with a bigger detail is announced without it. */
const MAX_PAYLOAD = 7000

export interface PostgresSettingsOptions {
  /** Pool whose connections have the settings tables on their search_path. */
  pool: pg.Pool
  /**
   * Opens a dedicated, connected client for LISTEN. Not a pool client: it holds its connection for
   * the store's lifetime. It needs no search_path (notifications are per database).
   */
  openListener: () => Promise<pg.Client>
  /**
   * NOTIFY channel. Channels are per database, not per schema: deployments (or test runs) sharing a
   * database with separate schemas need distinct channels. Default `tollgate_settings`.
   */
  channel?: string
  clock?: () => number
  /** Failures of the listening connection (it is reopened). Default: a process warning. */
  onListenerError?: (error: unknown) => void
}

interface ProjectRow {
  id: string
  created: boolean
  fields: ProjectFields
  updated_at: string
  updated_by: string
}

interface KeyRow {
  project_id: string
  label: string
  state: KeyState
  updated_at: string
  updated_by: string
}

interface AuditRow {
  seq: string
  at: string
  actor: string
  actor_note: string | null
  action: SettingsAction
  project_id: string
  detail: Record<string, unknown>
}

export class PostgresSettings implements SettingsStore {
  readonly #pool: pg.Pool
  readonly #channel: string
  readonly #clock: () => number
  readonly #notifications: SettingsNotifications

  constructor(options: PostgresSettingsOptions) {
    this.#pool = options.pool
    this.#channel = options.channel ?? DEFAULT_SETTINGS_CHANNEL
    if (!/^[a-z_][a-z0-9_]{0,62}$/.test(this.#channel)) throw new Error(`settings channel ${JSON.stringify(this.#channel)} must be a lower-case SQL identifier`)
    this.#clock = options.clock ?? Date.now
    const onListenerError = options.onListenerError ?? ((error) => process.emitWarning(error as Error, 'TollgateSettingsWarning'))
    this.#notifications = new SettingsNotifications(options.openListener, this.#channel, onListenerError)
  }

  /** Resolves once the LISTEN connection is up (subscribe starts it; this lets a caller wait for it). */
  listening(): Promise<void> {
    return this.#notifications.listening()
  }


  async read(): Promise<SettingsSnapshot> {
    const client = await this.#pool.connect()
    try {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY')
      const version = await client.query<{ v: string }>('SELECT COALESCE(max(seq), 0) AS v FROM settings_audit')
      const projects = await client.query<ProjectRow>('SELECT id, created, fields, updated_at, updated_by FROM settings_projects')
      const keys = await client.query<KeyRow>('SELECT project_id, label, state, updated_at, updated_by FROM settings_keys ORDER BY project_id, updated_at, label')
      await client.query('COMMIT')
      return {
        version: Number(version.rows[0].v),
        projects: toOverrides(
          projects.rows.map((r) => ({ id: r.id, created: r.created, fields: r.fields, updatedAt: Number(r.updated_at), updatedBy: r.updated_by })),
          keys.rows.map((r) => ({ projectId: r.project_id, label: r.label, state: r.state, updatedAt: Number(r.updated_at), updatedBy: r.updated_by })),
        ),
      }
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {})
      throw error
    } finally {
      client.release()
    }
  }

  async version(): Promise<number> {
    const result = await this.#pool.query<{ v: string }>('SELECT COALESCE(max(seq), 0) AS v FROM settings_audit')
    return Number(result.rows[0].v)
  }

  createProject(id: string, fields: ProjectFields, actor: ChangeActor): Promise<SettingsChange> {
    return this.#change(actor, 'project.create', id, fieldsDetail(fields), async (client, now) => {
      const inserted = await client.query(
        'INSERT INTO settings_projects (id, created, fields, updated_at, updated_by) VALUES ($1, true, $2, $3, $4) ON CONFLICT (id) DO NOTHING',
        [id, JSON.stringify(mergeFields({}, fields)), now, actorName(actor)],
      )
      if (inserted.rowCount === 0) throw new SettingsConflict('project_exists', `project ${id} already exists`)
    })
  }

  updateProject(id: string, fields: ProjectFields, actor: ChangeActor): Promise<SettingsChange> {
    return this.#change(actor, 'project.update', id, fieldsDetail(fields), async (client, now) => {
      const row = await client.query<{ fields: ProjectFields }>('SELECT fields FROM settings_projects WHERE id = $1', [id])
      const merged = mergeFields(row.rows[0]?.fields ?? {}, fields)
      await client.query(
        `INSERT INTO settings_projects (id, created, fields, updated_at, updated_by) VALUES ($1, false, $2, $3, $4)
         ON CONFLICT (id) DO UPDATE SET fields = excluded.fields, updated_at = excluded.updated_at, updated_by = excluded.updated_by`,
        [id, JSON.stringify(merged), now, actorName(actor)],
      )
    })
  }

  addKey(projectId: string, key: { label: string; hash: string; expiresAt?: number; prefix?: string }, actor: ChangeActor): Promise<SettingsChange> {
    const detail = { label: key.label, ...(key.expiresAt !== undefined ? { expiresAt: key.expiresAt } : {}) }
    return this.#change(actor, 'key.add', projectId, detail, async (client, now) => {
      const labelled = await client.query('SELECT 1 FROM settings_keys WHERE project_id = $1 AND label = $2', [projectId, key.label])
      if (labelled.rowCount) throw new SettingsConflict('key_exists', `project ${projectId} already has a key labelled ${key.label}`)
      const hashed = await client.query('SELECT 1 FROM settings_keys WHERE hash = $1', [key.hash])
      if (hashed.rowCount) throw new SettingsConflict('key_exists', 'this key is already registered')
      const state: KeyState = { hash: key.hash, disabled: false, ...(key.expiresAt !== undefined ? { expiresAt: key.expiresAt } : {}), ...(key.prefix ? { prefix: key.prefix } : {}) }
      await client.query('INSERT INTO settings_keys (project_id, label, hash, state, updated_at, updated_by) VALUES ($1, $2, $3, $4, $5, $6)', [
        projectId,
        key.label,
        key.hash,
        JSON.stringify(state),
        now,
        actorName(actor),
      ])
    })
  }

  rotateKey(
    projectId: string,
    label: string,
    next: { hash: string; prefix?: string },
    previous: { label: string; hash: string; expiresAt: number; prefix?: string },
    actor: ChangeActor,
  ): Promise<SettingsChange> {
    return this.#change(actor, 'key.rotate', projectId, rotationDetail(label, previous), async (client, now) => {
      const labelled = await client.query('SELECT 1 FROM settings_keys WHERE project_id = $1 AND label = $2', [projectId, previous.label])
      if (labelled.rowCount) throw new SettingsConflict('key_exists', `project ${projectId} already has a key labelled ${previous.label}`)
      const hashed = await client.query('SELECT 1 FROM settings_keys WHERE hash = $1', [next.hash])
      if (hashed.rowCount) throw new SettingsConflict('key_exists', 'this key is already registered')
      // The rotated row first (its old hash leaves the UNIQUE column), then the previous key takes that hash.
      await client.query('DELETE FROM settings_keys WHERE project_id = $1 AND label = $2', [projectId, label])
      const insert = 'INSERT INTO settings_keys (project_id, label, hash, state, updated_at, updated_by) VALUES ($1, $2, $3, $4, $5, $6)'
      await client.query(insert, [projectId, label, next.hash, JSON.stringify(nextState(next)), now, actorName(actor)])
      await client.query(insert, [projectId, previous.label, previous.hash, JSON.stringify(previousState(previous)), now, actorName(actor)])
    })
  }

  updateKey(projectId: string, label: string, state: { disabled?: boolean; expiresAt?: number | null }, actor: ChangeActor): Promise<SettingsChange> {
    return this.#change(actor, 'key.update', projectId, { label, ...state }, async (client, now) => {
      const row = await client.query<{ state: KeyState }>('SELECT state FROM settings_keys WHERE project_id = $1 AND label = $2', [projectId, label])
      const merged: KeyState = { ...row.rows[0]?.state }
      if (state.disabled !== undefined) merged.disabled = state.disabled
      if (state.expiresAt !== undefined) merged.expiresAt = state.expiresAt
      await client.query(
        `INSERT INTO settings_keys (project_id, label, hash, state, updated_at, updated_by) VALUES ($1, $2, NULL, $3, $4, $5)
         ON CONFLICT (project_id, label) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at, updated_by = excluded.updated_by`,
        [projectId, label, JSON.stringify(merged), now, actorName(actor)],
      )
    })
  }

  resetProject(id: string, actor: ChangeActor): Promise<SettingsChange> {
    return this.#change(actor, 'project.reset', id, {}, async (client) => {
      await client.query('DELETE FROM settings_keys WHERE project_id = $1', [id])
      await client.query('DELETE FROM settings_projects WHERE id = $1', [id])
    })
  }

  recordAction(projectId: string, action: RecordedAction, detail: Record<string, unknown>, actor: ChangeActor): Promise<SettingsChange> {
    return this.#change(actor, action, projectId, detail, async () => {})
  }

  async audit(options: { projectId?: string; limit?: number } = {}): Promise<SettingsChange[]> {
    const limit = Math.max(1, Math.min(options.limit ?? 100, 10_000))
    const result =
      options.projectId === undefined
        ? await this.#pool.query<AuditRow>('SELECT seq, at, actor, actor_note, action, project_id, detail FROM settings_audit ORDER BY seq DESC LIMIT $1', [limit])
        : await this.#pool.query<AuditRow>('SELECT seq, at, actor, actor_note, action, project_id, detail FROM settings_audit WHERE project_id = $1 ORDER BY seq DESC LIMIT $2', [
            options.projectId,
            limit,
          ])
    return result.rows.map((row) => change(Number(row.seq), Number(row.at), storedActor(row.actor, row.actor_note), row.action, row.project_id, row.detail))
  }

  subscribe(listener: SettingsListener): () => void {
    return this.#notifications.subscribe(listener)
  }

  /** Ends the LISTEN connection. The pool is the caller's: close this first, then end the pool. */
  close(): Promise<void> {
    return this.#notifications.close()
  }

  /** Runs `apply` with the audit row and the NOTIFY in one serialised transaction. */
  async #change(
    actor: ChangeActor,
    action: SettingsAction,
    projectId: string,
    detail: Record<string, unknown>,
    apply: (client: pg.PoolClient, now: number) => Promise<void>,
  ): Promise<SettingsChange> {
    const at = this.#clock()
    const client = await this.#pool.connect()
    try {
      await client.query('BEGIN')
      await client.query('SELECT pg_advisory_xact_lock($1)', [WRITE_LOCK])
      await apply(client, at)
      const by = actorParts(actor)
      const inserted = await client.query<{ seq: string }>(
        'INSERT INTO settings_audit (at, actor, actor_note, action, project_id, detail) VALUES ($1, $2, $3, $4, $5, $6) RETURNING seq',
        [at, by.actor, by.note ?? null, action, projectId, JSON.stringify(detail)],
      )
      const made = change(Number(inserted.rows[0].seq), at, actor, action, projectId, detail)
      let payload = JSON.stringify(made)
      if (Buffer.byteLength(payload) > MAX_PAYLOAD) payload = JSON.stringify({ ...made, detail: {} })
      await client.query('SELECT pg_notify($1, $2)', [this.#channel, payload])
      await client.query('COMMIT')
      return made
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {})
      throw error
    } finally {
      client.release()
    }
  }
}
