/**
 * A real OpenID Connect provider on loopback (the `oidc-provider` package, certified OpenID
 * implementation) for `npm start` and the workstation tests: discovery, authorization code with
 * PKCE, signed ID tokens and a JWKS endpoint, exactly as a production IdP speaks them.
 *
 * Its only simplification is the sign-in page: oidc-provider's development interactions, where the
 * account id typed in becomes the subject (no password). Clients are registered once the relying
 * party's redirect URI is known (the gateway may listen on port 0), so the provider's listener
 * starts first and the protocol handler is attached by {@link LocalOidcProvider.register}.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { randomBytes } from 'node:crypto'
import Provider from 'oidc-provider'

export interface LocalOidcProvider {
  /** `http://127.0.0.1:PORT`: the issuer and the base of every endpoint. */
  issuer: string
  /** Registers the one public client (PKCE, no secret) with its redirect URI; call once. */
  register(client: { clientId: string; redirectUris: string[] }): void
  close(): Promise<void>
}

export async function startLocalOidcProvider(port = 0): Promise<LocalOidcProvider> {
  let handler: ((req: IncomingMessage, res: ServerResponse) => void) | undefined
  const server = createServer((req, res) => {
    if (handler) return handler(req, res)
    res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"no client registered yet"}')
  })
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    issuer,
    register({ clientId, redirectUris }) {
      const provider = new Provider(issuer, {
        clients: [{ client_id: clientId, redirect_uris: redirectUris, token_endpoint_auth_method: 'none', grant_types: ['authorization_code'], response_types: ['code'] }],
        cookies: { keys: [randomBytes(32).toString('hex')] },
        claims: { openid: ['sub'], email: ['email', 'email_verified'] },
        async findAccount(_ctx, id) {
          return { accountId: id, claims: async () => ({ sub: id, email: `${id}@idp.test`, email_verified: true }) }
        },
      })
      // Loopback http is what this provider is for; silence its "not https" production warnings.
      provider.proxy = false
      handler = provider.callback()
    },
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve())
      server.closeAllConnections()
    }),
  }
}
