/**
 * The admin OpenAPI document: sign-in sessions and the linked identity-provider account
 * (core/accounts/session-routes.ts), and the operators' management of accounts
 * (core/accounts/user-routes.ts).
 */
import { authErrors, body, errorAnswer, idParam, iso, json, obj, ref, type Schema } from './common.ts'

/** Component schemas of this area, in document order. */
export const accountSchemas: Record<string, Schema> = {
  User: obj({ id: { type: 'string' }, email: { type: 'string' }, role: { enum: ['operator', 'owner'] }, projects: { type: 'array', items: { type: 'string' } } }),
  SessionAnswer: obj({
    user: ref('User'),
    session: obj({ id: { type: 'string' }, createdAt: iso, expiresAt: iso, idleExpiresAt: iso }),
    csrfToken: { type: 'string' },
  }),
  UserListItem: obj({
    id: { type: 'string' },
    email: { type: 'string' },
    role: { enum: ['operator', 'owner'] },
    projects: { type: 'array', items: { type: 'string' } },
    createdAt: iso,
    updatedAt: iso,
  }),
  SessionListItem: obj({
    id: { type: 'string' },
    userId: { type: 'string' },
    email: { type: ['string', 'null'] },
    createdAt: iso,
    lastSeenAt: iso,
    expiresAt: iso,
    idleExpiresAt: iso,
    current: { type: 'boolean' },
  }),
}

/** Paths of this area, in document order. */
export const accountPaths: Record<string, Record<string, unknown>> = {
  '/admin/session': {
    post: {
      summary: 'Sign in: sets the tollgate_session cookie (HttpOnly, SameSite=Strict)',
      security: [],
      requestBody: body(obj({ email: { type: 'string' }, password: { type: 'string' } })),
      responses: { '200': json(ref('SessionAnswer')), '400': errorAnswer('invalid_body'), '401': errorAnswer('invalid_credentials'), '429': errorAnswer('sign_in_rate_limited (Retry-After)') },
    },
    get: { summary: 'Who am I, and the CSRF token', responses: { '200': json(ref('SessionAnswer')), ...authErrors } },
    delete: { summary: 'Sign out', responses: { '200': json(obj({ signedOut: { const: true } })), ...authErrors } },
  },
  '/admin/sessions': {
    get: { summary: 'Sessions: all (operators) or your own (owners)', responses: { '200': json(obj({ sessions: { type: 'array', items: ref('SessionListItem') } })), ...authErrors } },
  },
  '/admin/sessions/{id}': {
    delete: {
      summary: 'Revoke a session',
      parameters: [idParam],
      responses: { '200': json(obj({ revoked: { type: 'string' } })), ...authErrors, '404': errorAnswer('session_not_found') },
    },
  },
  '/admin/users': {
    get: { summary: 'Admin accounts (operators); never a password hash', responses: { '200': json(obj({ users: { type: 'array', items: ref('UserListItem') } })), ...authErrors } },
    post: {
      summary: 'Create an account (operators), as `tollgate user add` does: the same email, role, project and password rules',
      requestBody: body(
        obj(
          {
            email: { type: 'string' },
            role: { enum: ['operator', 'owner'] },
            projects: { type: 'array', items: { type: 'string' }, description: 'Projects an owner owns; each must exist' },
            password: { type: 'string', minLength: 12, maxLength: 1024 },
          },
          ['email', 'role', 'password'],
        ),
      ),
      responses: {
        '201': json(obj({ user: ref('UserListItem') }), 'Created'),
        '400': errorAnswer('invalid_body (the message names the field), invalid_json'),
        ...authErrors,
        '409': errorAnswer('user_exists'),
        '413': errorAnswer('body_too_large'),
      },
    },
  },
  '/admin/users/{id}': {
    patch: {
      summary: "Change an account's role, projects (replaces the set) or password; a new password signs the user's sessions out",
      parameters: [idParam],
      requestBody: body(obj({ role: { enum: ['operator', 'owner'] }, projects: { type: 'array', items: { type: 'string' } }, password: { type: 'string', minLength: 12, maxLength: 1024 } }, [])),
      responses: {
        '200': json(obj({ user: ref('UserListItem'), sessionsEnded: { const: true } }, ['user'])),
        '400': errorAnswer('invalid_body (the message names the field), invalid_json'),
        ...authErrors,
        '404': errorAnswer('user_not_found'),
        '409': errorAnswer('self_lockout: your own account cannot be demoted'),
      },
    },
    delete: {
      summary: 'Delete an account and end its sessions at once',
      parameters: [idParam],
      responses: {
        '200': json(obj({ deleted: { type: 'string' } })),
        ...authErrors,
        '404': errorAnswer('user_not_found'),
        '409': errorAnswer('self_lockout: your own account cannot be deleted'),
      },
    },
  },
  '/admin/account/identity': {
    get: {
      summary: "The signed-in user's linked identity-provider account (sessions only: the admin token has no account)",
      responses: {
        '200': json(obj({ linked: { type: 'boolean' }, identity: obj({ issuer: { type: 'string' }, subject: { type: 'string' } }, ['issuer', 'subject'], true) }, ['linked'])),
        ...authErrors,
        '403': errorAnswer('account_session_required'),
      },
    },
    delete: {
      summary: 'Unlink the identity-provider account',
      responses: { '200': json(obj({ linked: { const: false } })), ...authErrors, '403': errorAnswer('account_session_required, csrf_required, csrf_invalid'), '404': errorAnswer('identity_not_linked') },
    },
  },
  '/admin/account/identity/link': {
    post: {
      summary: 'Start linking an identity-provider account: the browser goes to authorizeUrl (OpenID Connect, code + PKCE); the callback stores the link. Sets the tollgate_link cookie the callback requires: only this browser can finish the link',
      requestBody: { required: false, content: { 'application/json': { schema: obj({ returnTo: { type: 'string', description: 'A /dashboard/... path the callback returns to, on the request Origin' } }, []) } } },
      responses: {
        '200': json(obj({ authorizeUrl: { type: 'string' } })),
        '400': errorAnswer('invalid_body, invalid_header, oidc_not_configured'),
        ...authErrors,
        '403': errorAnswer('account_session_required, csrf_required, csrf_invalid'),
      },
    },
  },
}
