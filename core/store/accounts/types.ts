/**
 * Accounts of the admin API: users (operators and project owners), which projects each owner owns,
 * and sign-in sessions. Passwords are stored as scrypt hashes (core/accounts/password.ts) and
 * session tokens as sha256 digests: nothing stored here lets anyone sign in.
 */

export type Role = 'operator' | 'owner'
export const ROLES: readonly Role[] = ['operator', 'owner']

export interface UserRecord {
  id: string
  /** Lower case. */
  email: string
  role: Role
  /** `scrypt$N$r$p$salt$hash`. */
  passwordHash: string
  /** Projects the user owns (operators see every project whatever this says). */
  projects: string[]
  createdAt: number
  updatedAt: number
}

export interface SessionRecord {
  /** Public id (listing, revocation); not a credential. */
  id: string
  /** `sha256:<hex>` of the cookie's token. */
  tokenHash: string
  userId: string
  createdAt: number
  lastSeenAt: number
  /** Absolute expiry, epoch ms. */
  expiresAt: number
}

export class AccountConflict extends Error {
  readonly code = 'user_exists'
  constructor(message: string) {
    super(message)
    this.name = 'AccountConflict'
  }
}

/** The accounts part of a {@link Store}; every method is one transaction. */
export interface AccountsStore {
  /** Throws {@link AccountConflict} when the email is taken. */
  createUser(user: Omit<UserRecord, 'createdAt' | 'updatedAt'>): Promise<UserRecord>
  userByEmail(email: string): Promise<UserRecord | undefined>
  userById(id: string): Promise<UserRecord | undefined>
  listUsers(): Promise<UserRecord[]>
  /** Adds projects to those the user owns (already owned ones are kept). */
  addProjects(userId: string, projectIds: string[]): Promise<void>
  /**
   * Changes a user in one transaction: `role`, `projects` (replaces the owned set) and/or
   * `passwordHash` (which also ends every session of the user).
   * Undefined when there is no such user.
   */
  updateUser(userId: string, change: { role?: Role; projects?: string[]; passwordHash?: string }): Promise<UserRecord | undefined>
  /** Removes the user, the projects it owns and every session of it at once. False when there is no such user. */
  deleteUser(userId: string): Promise<boolean>
  createSession(session: SessionRecord): Promise<void>
  sessionByTokenHash(tokenHash: string): Promise<SessionRecord | undefined>
  /** Records activity (idle expiry counts from it). */
  touchSession(id: string, lastSeenAt: number): Promise<void>
  deleteSession(id: string): Promise<boolean>
  /** Sessions, newest first; of one user when `userId` is given. */
  listSessions(userId?: string): Promise<SessionRecord[]>
  /** Deletes sessions past their absolute expiry or idle longer than `idleMs`; returns how many. */
  deleteExpiredSessions(now: number, idleMs: number): Promise<number>
}
