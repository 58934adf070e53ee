/**
 * The admin OpenAPI document: sign-in sessions and the linked identity-provider account
 * (core/accounts/session-routes.ts).
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
