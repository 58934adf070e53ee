/**
 * The rules a new or changed admin account must meet, shared by `tollgate user` (core/cli/user-cli.ts)
 * and the users routes of the admin API (core/accounts/user-routes.ts), so both refuse the same
 * things. Email shape: {@link newAccountEmail}; password strength: {@link weakPassword}.
 */
import { ROLES, type Role } from '../store/accounts/types.ts'

import { normaliseEmail } from './authenticate.ts'

export { normaliseEmail }
export { weakPassword } from './password.ts'

// The HTML standard's "valid e-mail address" (what <input type=email> accepts), on the lowercased
// address: no quotes, spaces, angle brackets or parentheses, so an email shown by any consumer of
// the API or the audit trail cannot carry markup.
const NEW_ACCOUNT_EMAIL = /^[a-z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/

/** A new account's email: lowercased and trimmed, or undefined when it is not a plain address. */
export function newAccountEmail(value: unknown): string | undefined {
  const email = normaliseEmail(value)
  return email !== undefined && NEW_ACCOUNT_EMAIL.test(email) ? email : undefined
}

/**
 * Why {@link newAccountEmail} refused `value`. Sign-in keeps the looser {@link normaliseEmail}, so an
 * account made before this rule still signs in.
 */
export const NEW_ACCOUNT_EMAIL_RULE = "email must be an email address: letters, digits and .!#$%&'*+/=?^_`{|}~- before the @, a domain name after"

export function isRole(value: unknown): value is Role {
  return (ROLES as readonly unknown[]).includes(value)
}

/** The project ids that name no project (neither gateway.yaml's nor one created at run time), in the order given. */
export function unknownProjects(projects: readonly string[], exists: (id: string) => boolean): string[] {
  return projects.filter((id) => !exists(id))
}
