/**
 * Who may open a workstation. A browser proves an identity-provider account by an OpenID Connect
 * sign-in (oidc.ts); the gateway then gives it a session cookie (`tollgate_ws`, HttpOnly,
 * SameSite=Lax, path `/workstations/`), stored in the Store as the sha256 of the token only.
 *
 * The account the workstation belongs to comes from {@link OwnerIdentities}: which IdP account is
 * linked to the user owning the project's workstation. Until the accounts module provides users,
 * the operator names it per project (`settings.workstationOwner: { issuer, subject }`), see
 * {@link projectSettingOwners}; a user directory implements the same interface.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import type { Project } from '../projects/projects.ts'
import type { Store } from '../store/types.ts'
import type { LinkedIdentity } from './oidc.ts'

export const SESSION_COOKIE = 'tollgate_ws'
const SESSION_TTL_MS = 12 * 3_600_000

/** The IdP account allowed into a project's workstation, or undefined when none is linked. */
export interface OwnerIdentities {
  ownerOf(projectId: string): Promise<{ issuer: string; subject: string } | undefined>
}

/** Owners named by the operator in the project's settings (`settings.workstationOwner`). */
export function projectSettingOwners(project: (id: string) => Project | undefined): OwnerIdentities {
  return {
    async ownerOf(projectId) {
      const owner = project(projectId)?.settings.workstationOwner as { issuer?: unknown; subject?: unknown } | undefined
      return typeof owner?.issuer === 'string' && typeof owner.subject === 'string' ? { issuer: owner.issuer, subject: owner.subject } : undefined
    },
  }
}

interface StoredSession {
  identity: LinkedIdentity
  expiresAt: number
}

const digest = (token: string) => createHash('sha256').update(token).digest('hex')

/** Browser sessions of signed-in identities. */
export class IdentitySessions {
  private readonly clock: () => number

  constructor(private readonly store: Store, clock?: () => number) {
    this.clock = clock ?? Date.now
  }

  /** Creates a session; returns the Set-Cookie value. The token itself is never stored. */
  async create(identity: LinkedIdentity): Promise<string> {
    const token = randomBytes(32).toString('base64url')
    await this.store.documents('workstation-sessions').insertIfAbsent(digest(token), identity.subject, { identity, expiresAt: this.clock() + SESSION_TTL_MS } satisfies StoredSession)
    return `${SESSION_COOKIE}=${token}; Path=/workstations/; HttpOnly; SameSite=Lax; Max-Age=${SESSION_TTL_MS / 1000}`
  }

  /** Ends the request's session (sign-out); true when there was one. */
  async end(req: IncomingMessage): Promise<boolean> {
    const token = cookie(req, SESSION_COOKIE)
    if (!token || token.length > 128) return false
    return this.store.documents('workstation-sessions').delete(digest(token))
  }

  /** The identity of the request's session cookie, if valid. */
  async identityOf(req: IncomingMessage): Promise<LinkedIdentity | undefined> {
    const token = cookie(req, SESSION_COOKIE)
    if (!token || token.length > 128) return undefined
    const found = await this.store.documents('workstation-sessions').get<StoredSession>(digest(token))
    if (!found || found.doc.expiresAt < this.clock()) return undefined
    return found.doc.identity
  }
}

/** Whether `identity` is the linked owner (constant-time on the subject). */
export function sameIdentity(identity: LinkedIdentity, owner: { issuer: string; subject: string }): boolean {
  const a = Buffer.from(identity.subject)
  const b = Buffer.from(owner.subject)
  return identity.issuer === owner.issuer && a.length === b.length && timingSafeEqual(a, b)
}

function cookie(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [key, ...value] = part.trim().split('=')
    if (key === name) return value.join('=')
  }
  return undefined
}
