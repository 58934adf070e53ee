/**
 * Accounts of the shared engine, in PostgreSQL: the same three tables as the embedded engine,
 * created by {@link ACCOUNTS_MIGRATIONS} (module `accounts` of the shared migration runner), in the
 * schema of the pool's search_path. Every gateway instance reads them, so a session signed in on
 * one instance is valid on all of them and a revocation reaches all at once.
 */
import type pg from 'pg'
import type { Migration } from '../shared/migrations.ts'
import { sessionFromRow, userFromRow } from './sqlite.ts'
import { AccountConflict, type AccountsStore, type Role, type SessionRecord, type UserRecord } from './types.ts'

/** Append only: an applied migration is never edited. */
export const ACCOUNTS_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'accounts: users, project owners, sessions',
    sql: `
CREATE TABLE accounts_users (
  id TEXT PRIMARY KEY,
  email TEXT NOT NULL UNIQUE,
  role TEXT NOT NULL CHECK (role IN ('operator', 'owner')),
  password_hash TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
CREATE TABLE accounts_user_projects (
  user_id TEXT NOT NULL REFERENCES accounts_users (id) ON DELETE CASCADE,
  project_id TEXT NOT NULL,
  PRIMARY KEY (user_id, project_id)
);
CREATE TABLE accounts_sessions (
  id TEXT PRIMARY KEY,
  token_hash TEXT NOT NULL UNIQUE,
  user_id TEXT NOT NULL REFERENCES accounts_users (id) ON DELETE CASCADE,
  created_at BIGINT NOT NULL,
  last_seen_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL
);
CREATE INDEX accounts_sessions_by_user ON accounts_sessions (user_id);
`,
  },
]

const SESSION_COLUMNS = 'id, token_hash, user_id, created_at, last_seen_at, expires_at'
const USER_COLUMNS = 'id, email, role, password_hash, created_at, updated_at'

export class PostgresAccounts implements AccountsStore {
  readonly #pool: pg.Pool
  readonly #clock: () => number

  constructor(pool: pg.Pool, clock: () => number = Date.now) {
    this.#pool = pool
    this.#clock = clock
  }

  async createUser(user: Omit<UserRecord, 'createdAt' | 'updatedAt'>): Promise<UserRecord> {
    const now = this.#clock()
    await this.#transaction(async (client) => {
      const inserted = await client.query(
        `INSERT INTO accounts_users (${USER_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (email) DO NOTHING`,
        [user.id, user.email, user.role, user.passwordHash, now],
      )
      if (inserted.rowCount === 0) throw new AccountConflict(`a user with email ${user.email} already exists`)
      for (const project of new Set(user.projects)) await client.query('INSERT INTO accounts_user_projects (user_id, project_id) VALUES ($1, $2)', [user.id, project])
    })
    return (await this.userById(user.id))!
  }

  userByEmail(email: string): Promise<UserRecord | undefined> {
    return this.#user('email = $1', email)
  }

  userById(id: string): Promise<UserRecord | undefined> {
    return this.#user('id = $1', id)
  }

  async listUsers(): Promise<UserRecord[]> {
    const users = await this.#pool.query(`SELECT ${USER_COLUMNS} FROM accounts_users ORDER BY email`)
    const owned = await this.#pool.query<{ user_id: string; project_id: string }>('SELECT user_id, project_id FROM accounts_user_projects ORDER BY project_id')
    return users.rows.map((row) => userFromRow(row, owned.rows.filter((o) => o.user_id === row.id).map((o) => o.project_id)))
  }

  async addProjects(userId: string, projectIds: string[]): Promise<void> {
    await this.#transaction(async (client) => {
      for (const project of projectIds) await client.query('INSERT INTO accounts_user_projects (user_id, project_id) VALUES ($1, $2) ON CONFLICT DO NOTHING', [userId, project])
    })
  }

  async updateUser(userId: string, change: { role?: Role; projects?: string[]; passwordHash?: string }): Promise<UserRecord | undefined> {
    const now = this.#clock()
    const found = await this.#transaction(async (client) => {
      // One UPDATE for the row (its lock orders concurrent changes of the same user); an absent field keeps its value.
      const touched = await client.query('UPDATE accounts_users SET updated_at = $1, role = coalesce($3, role), password_hash = coalesce($4, password_hash) WHERE id = $2', [
        now,
        userId,
        change.role ?? null,
        change.passwordHash ?? null,
      ])
      if (touched.rowCount === 0) return false
      if (change.projects !== undefined) {
        await client.query('DELETE FROM accounts_user_projects WHERE user_id = $1', [userId])
        for (const project of new Set(change.projects)) await client.query('INSERT INTO accounts_user_projects (user_id, project_id) VALUES ($1, $2)', [userId, project])
      }
      if (change.passwordHash !== undefined) await client.query('DELETE FROM accounts_sessions WHERE user_id = $1', [userId])
      return true
    })
    return found ? this.userById(userId) : undefined
  }

  async deleteUser(userId: string): Promise<boolean> {
    // ON DELETE CASCADE removes its owned projects and its sessions in the same statement.
    return ((await this.#pool.query('DELETE FROM accounts_users WHERE id = $1', [userId])).rowCount ?? 0) > 0
  }

  async createSession(session: SessionRecord): Promise<void> {
    await this.#pool.query(`INSERT INTO accounts_sessions (${SESSION_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)`, [
      session.id,
      session.tokenHash,
      session.userId,
      session.createdAt,
      session.lastSeenAt,
      session.expiresAt,
    ])
  }

  async sessionByTokenHash(tokenHash: string): Promise<SessionRecord | undefined> {
    const { rows } = await this.#pool.query(`SELECT ${SESSION_COLUMNS} FROM accounts_sessions WHERE token_hash = $1`, [tokenHash])
    return rows[0] && sessionFromRow(rows[0])
  }

  async touchSession(id: string, lastSeenAt: number): Promise<void> {
    await this.#pool.query('UPDATE accounts_sessions SET last_seen_at = GREATEST(last_seen_at, $1) WHERE id = $2', [lastSeenAt, id])
  }

  async deleteSession(id: string): Promise<boolean> {
    return ((await this.#pool.query('DELETE FROM accounts_sessions WHERE id = $1', [id])).rowCount ?? 0) > 0
  }

  async listSessions(userId?: string): Promise<SessionRecord[]> {
    const { rows } =
      userId === undefined
        ? await this.#pool.query(`SELECT ${SESSION_COLUMNS} FROM accounts_sessions ORDER BY created_at DESC, id`)
        : await this.#pool.query(`SELECT ${SESSION_COLUMNS} FROM accounts_sessions WHERE user_id = $1 ORDER BY created_at DESC, id`, [userId])
    return rows.map(sessionFromRow)
  }

  async deleteExpiredSessions(now: number, idleMs: number): Promise<number> {
    return (await this.#pool.query('DELETE FROM accounts_sessions WHERE expires_at <= $1 OR last_seen_at <= $2', [now, now - idleMs])).rowCount ?? 0
  }

  async #user(where: string, value: string): Promise<UserRecord | undefined> {
    const { rows } = await this.#pool.query(`SELECT ${USER_COLUMNS} FROM accounts_users WHERE ${where}`, [value])
    if (!rows[0]) return undefined
    const owned = await this.#pool.query<{ project_id: string }>('SELECT project_id FROM accounts_user_projects WHERE user_id = $1 ORDER BY project_id', [rows[0].id])
    return userFromRow(rows[0], owned.rows.map((r) => r.project_id))
  }

  async #transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.#pool.connect()
    try {
      await client.query('BEGIN')
      const result = await work(client)
      await client.query('COMMIT')
      return result
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {})
      throw error
    } finally {
      client.release()
    }
  }
}
