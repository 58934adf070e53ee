/**
 * The dashboard's viewer from the accounts session (core/accounts): a page is shown to a signed-in
 * user only (the cookie), never to a bearer token (a browser does not send one). An operator sees
 * every project, an owner the projects the account lists.
 */
import type { IncomingMessage } from 'node:http'
import type { Accounts } from '../accounts/authenticate.ts'
import { GatewayError } from '../proxy/errors.ts'
import type { DashboardAuth, DashboardSession } from './index.ts'

/** Reads the session cookie of a dashboard request with the accounts' own check. */
export function sessionAuth(accounts: Pick<Accounts, 'principalOf'>): DashboardAuth {
  return async (req: IncomingMessage): Promise<DashboardSession | undefined> => {
    // Pages read the cookie only: a bearer header would be judged instead of it.
    const { authorization: _ignored, ...headers } = req.headers
    let principal
    try {
      principal = await accounts.principalOf({ headers } as IncomingMessage)
    } catch (error) {
      // A forged, revoked or expired cookie: the page asks to sign in again.
      if (error instanceof GatewayError && error.status === 401) return undefined
      throw error
    }
    if (principal?.kind !== 'session') return undefined
    const operator = principal.role === 'operator'
    return {
      user: principal.user.email,
      userId: principal.user.id,
      operator,
      csrfToken: principal.session.csrfToken,
      projects: operator ? 'all' : new Set(principal.user.projects),
    }
  }
}
