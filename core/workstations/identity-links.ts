/**
 * Which identity-provider account each tollgate user linked (by an OpenID Connect sign-in started
 * from their admin session), kept as Store documents so both engines and every instance see it:
 *
 *   user:<userId>            → { issuer, subject, email?, linkedAt }   (the user's one link)
 *   idp:<sha256(iss, sub)>   → { userId }                               (reverse index: one user per IdP account)
 *
 * The reverse entry is written first with `insertIfAbsent`, so two users can never claim the same
 * IdP account, even when two instances link at once.
 */
import { createHash } from 'node:crypto'
import type { Store } from '../store/types.ts'
import type { LinkedIdentity } from './oidc.ts'

const COLLECTION = 'workstation-identity-links'

/** A user's link as stored and shown by `GET /admin/account/identity`. */
export interface IdentityLink {
  issuer: string
  subject: string
  email?: string
  /** Epoch ms. */
  linkedAt: number
}

/** Refused link: the IdP account already belongs to another user. */
export class IdentityTakenError extends Error {
  readonly code = 'identity_linked_to_another_user'
  constructor() {
    super('this identity-provider account is already linked to another tollgate user; unlink it there first')
  }
}

const idpKey = (issuer: string, subject: string) => `idp:${createHash('sha256').update(`${issuer}\n${subject}`).digest('hex')}`
const userKey = (userId: string) => `user:${userId}`

export class IdentityLinks {
  constructor(private readonly store: Pick<Store, 'documents'>, private readonly clock: () => number = Date.now) {}

  private get docs() {
    return this.store.documents(COLLECTION)
  }

  /** The link of a user, if any. */
  async linkOf(userId: string): Promise<IdentityLink | undefined> {
    return (await this.docs.get<IdentityLink>(userKey(userId)))?.doc
  }

  /** The user an IdP account is linked to, if any. */
  async userOf(identity: { issuer: string; subject: string }): Promise<string | undefined> {
    const found = await this.docs.get<{ userId: string }>(idpKey(identity.issuer, identity.subject))
    if (!found) return undefined
    // The user's own entry must agree: a half-finished relink never admits the old account.
    const link = await this.linkOf(found.doc.userId)
    return link && link.issuer === identity.issuer && link.subject === identity.subject ? found.doc.userId : undefined
  }

  /** Links `identity` to `userId`, replacing the user's previous link. Throws {@link IdentityTakenError}. */
  async link(userId: string, identity: LinkedIdentity): Promise<IdentityLink> {
    const claimed = await this.docs.insertIfAbsent(idpKey(identity.issuer, identity.subject), userId, { userId })
    if (!claimed.created && (claimed.stored.doc as { userId: string }).userId !== userId) throw new IdentityTakenError()
    const link: IdentityLink = { issuer: identity.issuer, subject: identity.subject, ...(identity.email ? { email: identity.email } : {}), linkedAt: this.clock() }
    const previous = await this.linkOf(userId)
    const inserted = await this.docs.insertIfAbsent(userKey(userId), userId, link)
    if (!inserted.created) await this.docs.update(userKey(userId), link)
    if (previous && (previous.issuer !== identity.issuer || previous.subject !== identity.subject)) await this.docs.delete(idpKey(previous.issuer, previous.subject))
    return link
  }

  /** Removes the user's link; false when there was none. */
  async unlink(userId: string): Promise<boolean> {
    const link = await this.linkOf(userId)
    if (!link) return false
    // The user's entry goes first: from then on userOf() admits nobody, whatever happens next.
    await this.docs.delete(userKey(userId))
    await this.docs.delete(idpKey(link.issuer, link.subject))
    return true
  }
}
