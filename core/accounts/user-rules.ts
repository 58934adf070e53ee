/**
 * The rules a new or changed admin account must meet, shared by `tollgate user` (core/user-cli.ts)
 * and the users routes of the admin API (core/accounts/user-routes.ts), so both refuse the same
 * things. Email shape: {@link normaliseEmail}; password strength: {@link weakPassword}.
 */
import { ROLES, type Role } from '../store/accounts/types.ts'

export { normaliseEmail } from './authenticate.ts'
export { weakPassword } from './password.ts'

export function isRole(value: unknown): value is Role {
  return (ROLES as readonly unknown[]).includes(value)
}

/** The project ids that name no project (neither gateway.yaml's nor one created at run time), in the order given. */
export function unknownProjects(projects: readonly string[], exists: (id: string) => boolean): string[] {
  return projects.filter((id) => !exists(id))
}
