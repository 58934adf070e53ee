/** Accounts of the embedded engine: three tables in the store's SQLite database (WAL commit before each answer). */
import type Database from 'better-sqlite3'
import { AccountConflict, type AccountsStore, type Role, type SessionRecord, type UserRecord } from './types.ts'

export const SQLITE_ACCOUNTS_SCHEMA = `
CREATE TABLE IF NOT EXISTS accounts_users (
  id TEXT PRIMARY KEY,
  email TEXT NOT NULL UNIQUE,
  role TEXT NOT NULL,
  password_hash TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS accounts_user_projects (
  user_id TEXT NOT NULL REFERENCES accounts_users (id) ON DELETE CASCADE,
  project_id TEXT NOT NULL,
  PRIMARY KEY (user_id, project_id)
);
CREATE TABLE IF NOT EXISTS accounts_sessions (
  id TEXT PRIMARY KEY,
  token_hash TEXT NOT NULL UNIQUE,
  user_id TEXT NOT NULL REFERENCES accounts_users (id) ON DELETE CASCADE,
  created_at INTEGER NOT NULL,
  last_seen_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS accounts_sessions_by_user ON accounts_sessions (user_id);
`

interface UserRow {
  id: string
  email: string
  role: Role
  password_hash: string
  created_at: number
  updated_at: number
}

interface SessionRow {
  id: string
  token_hash: string
  user_id: string
  created_at: number
  last_seen_at: number
  expires_at: number
}

export function sessionFromRow(row: SessionRow): SessionRecord {
  return { id: row.id, tokenHash: row.token_hash, userId: row.user_id, createdAt: Number(row.created_at), lastSeenAt: Number(row.last_seen_at), expiresAt: Number(row.expires_at) }
}

export function userFromRow(row: UserRow, projects: string[]): UserRecord {
  return { id: row.id, email: row.email, role: row.role, passwordHash: row.password_hash, projects, createdAt: Number(row.created_at), updatedAt: Number(row.updated_at) }
}

const SESSION_COLUMNS = 'id, token_hash, user_id, created_at, last_seen_at, expires_at'
const USER_COLUMNS = 'id, email, role, password_hash, created_at, updated_at'

export class SqliteAccounts implements AccountsStore {
  readonly #db: Database.Database
  readonly #clock: () => number
  readonly #stmt: Record<string, Database.Statement>

  constructor(db: Database.Database, clock: () => number = Date.now) {
    this.#db = db
    this.#clock = clock
    db.exec(SQLITE_ACCOUNTS_SCHEMA)
    this.#stmt = {
      insertUser: db.prepare(`INSERT INTO accounts_users (${USER_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)`),
      byEmail: db.prepare(`SELECT ${USER_COLUMNS} FROM accounts_users WHERE email = ?`),
      byId: db.prepare(`SELECT ${USER_COLUMNS} FROM accounts_users WHERE id = ?`),
      users: db.prepare(`SELECT ${USER_COLUMNS} FROM accounts_users ORDER BY email`),
      projectsOf: db.prepare('SELECT project_id FROM accounts_user_projects WHERE user_id = ? ORDER BY project_id'),
      addProject: db.prepare('INSERT OR IGNORE INTO accounts_user_projects (user_id, project_id) VALUES (?, ?)'),
      // An absent (NULL) role or hash keeps its value.
      updateUser: db.prepare('UPDATE accounts_users SET updated_at = ?, role = coalesce(?, role), password_hash = coalesce(?, password_hash) WHERE id = ?'),
      deleteProjectsOf: db.prepare('DELETE FROM accounts_user_projects WHERE user_id = ?'),
      deleteUser: db.prepare('DELETE FROM accounts_users WHERE id = ?'),
      deleteSessionsOf: db.prepare('DELETE FROM accounts_sessions WHERE user_id = ?'),
      insertSession: db.prepare(`INSERT INTO accounts_sessions (${SESSION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)`),
      sessionByHash: db.prepare(`SELECT ${SESSION_COLUMNS} FROM accounts_sessions WHERE token_hash = ?`),
      touch: db.prepare('UPDATE accounts_sessions SET last_seen_at = max(last_seen_at, ?) WHERE id = ?'),
      deleteSession: db.prepare('DELETE FROM accounts_sessions WHERE id = ?'),
      sessions: db.prepare(`SELECT ${SESSION_COLUMNS} FROM accounts_sessions ORDER BY created_at DESC, id`),
      sessionsOf: db.prepare(`SELECT ${SESSION_COLUMNS} FROM accounts_sessions WHERE user_id = ? ORDER BY created_at DESC, id`),
      expire: db.prepare('DELETE FROM accounts_sessions WHERE expires_at <= ? OR last_seen_at <= ?'),
    }
  }

  async createUser(user: Omit<UserRecord, 'createdAt' | 'updatedAt'>): Promise<UserRecord> {
    const now = this.#clock()
    this.#db
      .transaction(() => {
        if (this.#stmt.byEmail.get(user.email)) throw new AccountConflict(`a user with email ${user.email} already exists`)
        this.#stmt.insertUser.run(user.id, user.email, user.role, user.passwordHash, now, now)
        for (const project of new Set(user.projects)) this.#stmt.addProject.run(user.id, project)
      })
      .immediate()
    return (await this.userById(user.id))!
  }

  async userByEmail(email: string): Promise<UserRecord | undefined> {
    return this.#user(this.#stmt.byEmail.get(email) as UserRow | undefined)
  }

  async userById(id: string): Promise<UserRecord | undefined> {
    return this.#user(this.#stmt.byId.get(id) as UserRow | undefined)
  }

  async listUsers(): Promise<UserRecord[]> {
    return (this.#stmt.users.all() as UserRow[]).map((row) => this.#user(row)!)
  }

  async addProjects(userId: string, projectIds: string[]): Promise<void> {
    this.#db.transaction(() => {
      for (const project of projectIds) this.#stmt.addProject.run(userId, project)
    })()
  }

  async updateUser(userId: string, change: { role?: Role; projects?: string[]; passwordHash?: string }): Promise<UserRecord | undefined> {
    const now = this.#clock()
    const found = this.#db
      .transaction(() => {
        if (this.#stmt.updateUser.run(now, change.role ?? null, change.passwordHash ?? null, userId).changes === 0) return false
        if (change.projects !== undefined) {
          this.#stmt.deleteProjectsOf.run(userId)
          for (const project of new Set(change.projects)) this.#stmt.addProject.run(userId, project)
        }
        if (change.passwordHash !== undefined) this.#stmt.deleteSessionsOf.run(userId)
        return true
      })
      .immediate()
    return found ? this.userById(userId) : undefined
  }

  async deleteUser(userId: string): Promise<boolean> {
    // Sessions and owned projects are deleted explicitly: the foreign keys' ON DELETE CASCADE acts
    // only where the connection enabled them.
    return this.#db
      .transaction(() => {
        this.#stmt.deleteSessionsOf.run(userId)
        this.#stmt.deleteProjectsOf.run(userId)
        return this.#stmt.deleteUser.run(userId).changes > 0
      })
      .immediate()
  }

  async createSession(session: SessionRecord): Promise<void> {
    this.#stmt.insertSession.run(session.id, session.tokenHash, session.userId, session.createdAt, session.lastSeenAt, session.expiresAt)
  }

  async sessionByTokenHash(tokenHash: string): Promise<SessionRecord | undefined> {
    const row = this.#stmt.sessionByHash.get(tokenHash) as SessionRow | undefined
    return row && sessionFromRow(row)
  }

  async touchSession(id: string, lastSeenAt: number): Promise<void> {
    this.#stmt.touch.run(lastSeenAt, id)
  }

  async deleteSession(id: string): Promise<boolean> {
    return this.#stmt.deleteSession.run(id).changes > 0
  }

  async listSessions(userId?: string): Promise<SessionRecord[]> {
    const rows = (userId === undefined ? this.#stmt.sessions.all() : this.#stmt.sessionsOf.all(userId)) as SessionRow[]
    return rows.map(sessionFromRow)
  }

  async deleteExpiredSessions(now: number, idleMs: number): Promise<number> {
    return this.#stmt.expire.run(now, now - idleMs).changes
  }

  #user(row: UserRow | undefined): UserRecord | undefined {
    if (!row) return undefined
    return userFromRow(row, (this.#stmt.projectsOf.all(row.id) as { project_id: string }[]).map((r) => r.project_id))
  }
}
