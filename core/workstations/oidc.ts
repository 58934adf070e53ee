/**
 * The OpenID Connect relying party that links a browser to an identity-provider account before it
 * may open a workstation: authorization code flow with PKCE (S256), `state` and `nonce`, the ID
 * token's signature checked against the provider's published keys (JWKS, fetched and cached by
 * jose), and its `iss`, `aud`, `exp` and `nonce` checked too.
 *
 * Pending sign-ins (state → verifier, nonce, where to go after) live in the Store, so the callback
 * may land on another instance than the login.
 */
import { createHash, randomBytes } from 'node:crypto'
import { createRemoteJWKSet, jwtVerify, type JWTVerifyGetKey } from 'jose'
import type { Store } from '../store/types.ts'

export interface OidcOptions {
  /** Issuer URL; its `/.well-known/openid-configuration` is read once. */
  issuer: string
  clientId: string
  /** Confidential clients authenticate with `client_secret_post`; public clients rely on PKCE alone. */
  clientSecret?: string
  store: Store
  clock?: () => number
}

/** The identity-provider account a sign-in proved. */
export interface LinkedIdentity {
  issuer: string
  subject: string
  email?: string
}

interface Discovery {
  issuer: string
  authorization_endpoint: string
  token_endpoint: string
  jwks_uri: string
}

interface PendingSignIn {
  verifier: string
  nonce: string
  returnTo: string
  redirectUri: string
  expiresAt: number
  /** Set when a signed-in tollgate user started the sign-in to link this IdP account to themselves. */
  linkUserId?: string
  /** sha256 (hex) of the `tollgate_link` cookie given to the browser that started the link. */
  linkBinding?: string
  /** sha256 (hex) of the `tollgate_ws_login` cookie given to the browser that started a plain sign-in. */
  loginBinding?: string
}

const base64url = (bytes: Buffer) => bytes.toString('base64url')
export const PENDING_TTL_MS = 10 * 60_000

/** A sign-in that did not prove an identity: 400 or 401 to the browser, with a stable code. */
export class SignInError extends Error {
  constructor(readonly status: 400 | 401 | 502, readonly code: string, message: string) {
    super(message)
  }
}

export class OidcClient {
  private discovery: Promise<Discovery> | undefined
  private keys: JWTVerifyGetKey | undefined
  private readonly clock: () => number

  constructor(private readonly options: OidcOptions) {
    this.clock = options.clock ?? Date.now
  }

  private discover(): Promise<Discovery> {
    this.discovery ??= (async () => {
      const url = `${this.options.issuer.replace(/\/$/, '')}/.well-known/openid-configuration`
      const answer = await fetch(url, { signal: AbortSignal.timeout(5000) })
      if (!answer.ok) throw new SignInError(502, 'oidc_discovery_failed', `the identity provider's discovery document answered ${answer.status}`)
      const doc = (await answer.json()) as Discovery
      if (doc.issuer !== this.options.issuer) throw new SignInError(502, 'oidc_discovery_failed', `the discovery document names issuer ${doc.issuer}, expected ${this.options.issuer}`)
      this.keys = createRemoteJWKSet(new URL(doc.jwks_uri))
      return doc
    })().catch((error) => {
      this.discovery = undefined
      throw error
    })
    return this.discovery
  }

  /** Starts a sign-in: remembers state, verifier and nonce; returns the provider's authorize URL. */
  async begin(redirectUri: string, returnTo: string, linkUserId?: string, linkBinding?: string, loginBinding?: string): Promise<string> {
    const discovery = await this.discover()
    const state = base64url(randomBytes(24))
    const verifier = base64url(randomBytes(32))
    const nonce = base64url(randomBytes(16))
    const pending: PendingSignIn = { verifier, nonce, returnTo, redirectUri, expiresAt: this.clock() + PENDING_TTL_MS, ...(linkUserId ? { linkUserId } : {}), ...(linkBinding ? { linkBinding } : {}), ...(loginBinding ? { loginBinding } : {}) }
    await this.options.store.documents('workstation-oidc-pending').insertIfAbsent(state, 'oidc', pending)
    const url = new URL(discovery.authorization_endpoint)
    url.search = new URLSearchParams({
      response_type: 'code',
      client_id: this.options.clientId,
      redirect_uri: redirectUri,
      scope: 'openid email',
      state,
      nonce,
      code_challenge: base64url(createHash('sha256').update(verifier).digest()),
      code_challenge_method: 'S256',
    }).toString()
    return url.toString()
  }

  /** Completes a sign-in from the callback's query; returns the proven identity and where to go. */
  /** Removes pending sign-ins past their expiry (abandoned ones would otherwise stay forever); returns how many. */
  async sweep(): Promise<number> {
    const pendingDocs = this.options.store.documents('workstation-oidc-pending')
    let removed = 0
    for (const { key, doc } of await pendingDocs.listByOwner<PendingSignIn>('oidc', 5000)) {
      if (doc.expiresAt < this.clock() && (await pendingDocs.delete(key))) removed++
    }
    return removed
  }

  async complete(query: URLSearchParams): Promise<{ identity: LinkedIdentity; returnTo: string; linkUserId?: string; linkBinding?: string; loginBinding?: string }> {
    const error = query.get('error')
    if (error) throw new SignInError(401, 'oidc_denied', `the identity provider refused the sign-in: ${error}`)
    const state = query.get('state') ?? ''
    const code = query.get('code') ?? ''
    if (!state || !code) throw new SignInError(400, 'oidc_bad_callback', 'the callback needs the query parameters code and state')
    const pendingDocs = this.options.store.documents('workstation-oidc-pending')
    const found = await pendingDocs.get<PendingSignIn>(state)
    // One use only: a replayed callback finds nothing.
    if (!found || !(await pendingDocs.delete(state)) || found.doc.expiresAt < this.clock()) {
      throw new SignInError(400, 'oidc_unknown_state', 'the sign-in is unknown, expired or already used: start again')
    }
    const pending = found.doc
    const discovery = await this.discover()
    const body = new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: pending.redirectUri, code_verifier: pending.verifier, client_id: this.options.clientId })
    if (this.options.clientSecret) body.set('client_secret', this.options.clientSecret)
    const answer = await fetch(discovery.token_endpoint, { method: 'POST', body, signal: AbortSignal.timeout(10_000) })
    const tokens = (await answer.json().catch(() => ({}))) as { id_token?: string; error?: string }
    if (!answer.ok || !tokens.id_token) throw new SignInError(401, 'oidc_token_refused', `the identity provider refused the code: ${tokens.error ?? answer.status}`)
    let payload
    try {
      ;({ payload } = await jwtVerify(tokens.id_token, this.keys!, { issuer: discovery.issuer, audience: this.options.clientId, currentDate: new Date(this.clock()) }))
    } catch (failure) {
      throw new SignInError(401, 'oidc_id_token_invalid', `the ID token did not verify: ${(failure as Error).message}`)
    }
    if (payload.nonce !== pending.nonce) throw new SignInError(401, 'oidc_id_token_invalid', 'the ID token carries another nonce')
    if (typeof payload.sub !== 'string' || payload.sub === '') throw new SignInError(401, 'oidc_id_token_invalid', 'the ID token has no subject')
    return {
      identity: { issuer: discovery.issuer, subject: payload.sub, ...(typeof payload.email === 'string' ? { email: payload.email } : {}) },
      returnTo: pending.returnTo,
      ...(pending.linkUserId ? { linkUserId: pending.linkUserId } : {}),
      ...(pending.linkBinding ? { linkBinding: pending.linkBinding } : {}),
      ...(pending.loginBinding ? { loginBinding: pending.loginBinding } : {}),
    }
  }
}
