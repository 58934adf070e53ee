/**
 * core/proxy/http/gateway-cookies.ts: the gateway's own cookies are told apart by their `tollgate_`
 * name (end to end: test/security/upstream-credential-leak.test.ts).
 */
import t from 'tap'
import { credentialPolicy, GATEWAY_COOKIE_PREFIX, withoutGatewayCookies, withoutGatewaySetCookies } from '../../../../core/proxy/http/gateway-cookies.ts'
import { SESSION_COOKIE as ADMIN_SESSION } from '../../../../core/accounts/authenticate.ts'
import { SESSION_COOKIE as WORKSTATION_SESSION } from '../../../../core/workstations/access.ts'
import { LINK_COOKIE } from '../../../../core/workstations/public-routes.ts'

t.test('every cookie the gateway sets is in its namespace', async (t) => {
  for (const name of [ADMIN_SESSION, WORKSTATION_SESSION, LINK_COOKIE]) t.ok(name.startsWith(GATEWAY_COOKIE_PREFIX), name)
})

t.test('Cookie: only the gateway cookies go', async (t) => {
  t.equal(withoutGatewayCookies('a=1; b=2'), 'a=1; b=2', 'untouched when none is there')
  t.equal(withoutGatewayCookies('tollgate_session=x;a=1;  tollgate_ws=y ; b=2'), 'a=1; b=2')
  t.equal(withoutGatewayCookies('tollgate_session=x; tollgate_link=z'), undefined)
  t.equal(withoutGatewayCookies('my_tollgate_session=x'), 'my_tollgate_session=x', 'a name that only contains the prefix is not ours')
})

t.test('Set-Cookie from a workstation: never a gateway cookie', async (t) => {
  t.same(withoutGatewaySetCookies(['tollgate_session=forged; Path=/', 'app=1; Path=/']), ['app=1; Path=/'])
  t.same(withoutGatewaySetCookies('tollgate_ws=forged'), [])
})

t.test('route opt-ins default to off', async (t) => {
  t.same(credentialPolicy({}), { authorization: false, gatewayCookies: false, setCookie: false })
  t.same(credentialPolicy({ forwardAuthorization: true, passSetCookie: true }), { authorization: true, gatewayCookies: false, setCookie: true })
})
