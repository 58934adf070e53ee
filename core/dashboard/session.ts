/**
 * The dashboard's viewer from the accounts session (core/accounts): a page is shown to a signed-in
 * user only (the cookie), never to a bearer token (a browser does not send one). An operator sees
 * every project, an owner the projects the account lists.
 */
import type { IncomingMessage } from 'node:http'
import { authenticate, type AuthenticateDeps } from '../accounts/authenticate.ts'
import type { DashboardAuth, DashboardSession } from './index.ts'

/** Reads the session cookie of a dashboard request with the accounts' own check. */
export function sessionAuth(deps: AuthenticateDeps): DashboardAuth {
  return async (req: IncomingMessage): Promise<DashboardSession | undefined> => {
    // The bearer header is judged alone by authenticate(); pages ignore it and read the cookie.
    const { authorization: _ignored, ...headers } = req.headers
    const principal = await authenticate({ headers } as IncomingMessage, deps)
    if (principal?.kind !== 'session') return undefined
    const operator = principal.user.role === 'operator'
    return {
      user: principal.user.email,
      operator,
      csrfToken: principal.csrfToken,
      projects: operator ? 'all' : new Set(principal.user.projects),
    }
  }
}
