/**
 * What of the client's credentials may reach an upstream, decided once per route at table build.
 *
 * The gateway's own cookies (the admin session `tollgate_session`, the workstation session
 * `tollgate_ws`, the identity link `tollgate_link`: every cookie the gateway sets is named
 * `tollgate_*`) and the client's `Authorization` header are credentials for the gateway, not for
 * the upstream: an upstream that received them could act as the user on the admin API or a
 * workstation. So they are removed unless the route opts in; the client's other cookies go through
 * (they are the upstream's own, as with Kong or nginx). An `Authorization` a plugin sets for the
 * upstream (`ctx.upstreamHeaders`: upstream credentials) is the gateway's choice and is always sent.
 *
 * The other way, an upstream's `Set-Cookie` would write cookies on the gateway's origin, where the
 * gateway's own cookies live (a forged or fixed `tollgate_session`); it is dropped unless the route
 * opts in. Response plugins still see it (a cache must know the answer set a cookie).
 */

/** The name prefix of every cookie the gateway sets. */
export const GATEWAY_COOKIE_PREFIX = 'tollgate_'

/** A route's opt-ins, from its config (`forwardAuthorization`, `forwardGatewayCookies`, `passSetCookie`). */
export interface UpstreamCredentialPolicy {
  /** Send the client's `Authorization` header upstream. */
  authorization: boolean
  /** Send the gateway's own `tollgate_*` cookies upstream. */
  gatewayCookies: boolean
  /** Let the upstream's `Set-Cookie` reach the client. */
  setCookie: boolean
}

export function credentialPolicy(route: { forwardAuthorization?: boolean; forwardGatewayCookies?: boolean; passSetCookie?: boolean }): UpstreamCredentialPolicy {
  return { authorization: route.forwardAuthorization === true, gatewayCookies: route.forwardGatewayCookies === true, setCookie: route.passSetCookie === true }
}

/**
 * `Set-Cookie` values without those that would set a gateway cookie (`tollgate_*`): for a
 * workstation, whose tenant runs what answers, and whose own app cookies must still work.
 */
export function withoutGatewaySetCookies(values: string | string[]): string[] {
  const all = Array.isArray(values) ? values : [values]
  return all.filter((value) => !value.trimStart().startsWith(GATEWAY_COOKIE_PREFIX))
}

/**
 * A `Cookie` header without the gateway's cookies; undefined when nothing else is left. A header
 * that names none of them is returned as it is (the common case: one substring search).
 */
export function withoutGatewayCookies(header: string): string | undefined {
  if (!header.includes(GATEWAY_COOKIE_PREFIX)) return header
  let kept = ''
  for (const part of header.split(';')) {
    const pair = part.trim()
    if (pair === '' || pair.startsWith(GATEWAY_COOKIE_PREFIX)) continue
    kept = kept === '' ? pair : `${kept}; ${pair}`
  }
  return kept === '' ? undefined : kept
}
